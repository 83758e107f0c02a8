package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newPlanCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "plan",
		Short: "Print what a run would do now, changing nothing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := o.engine(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer e.Close()
			st, p, err := e.Plan(cmd.Context())
			out := cmd.OutOrStdout()
			if st.Replicas > 0 && len(st.Members) > 0 {
				printStatus(out, e.Config(), st)
				fmt.Fprintln(out)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Plan: %s\n", p)
			if len(p.Steps) > 0 {
				fmt.Fprintf(out, "\n%s", p.Detail())
			}
			return nil
		},
	}
}
