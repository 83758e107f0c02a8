package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newPlanCommand(o *options) *cobra.Command {
	format := outputText
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Print what a run would do now, changing nothing",
		Long: `Print what a run would do now, changing nothing. -o json or -o yaml prints the StatefulSet, the members
and the plan as one document (apiVersion ` + outputAPIVersion + `, kind Plan); a blocked plan is printed with
its reason in "blocked", and the command exits 3.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := o.engine(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer e.Close()
			st, p, err := e.Plan(cmd.Context())
			out := cmd.OutOrStdout()
			if format != outputText && st.Replicas > 0 {
				if werr := writeDoc(out, format, newPlanDoc(e.Config(), st, p, err)); werr != nil {
					return werr
				}
				return err
			}
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
			for _, w := range st.ProbeWarnings {
				fmt.Fprintf(out, "\nwarning: %s\n", w)
			}
			return nil
		},
	}
	cmd.Flags().VarP(&format, "output", "o", "output format: text, json or yaml")
	return cmd
}
