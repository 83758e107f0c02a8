package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newUnlockCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "unlock",
		Short: "Set the partition back to replicas and release a stale rollout lease",
		Long: `unlock re-locks the StatefulSet (partition = replicas) and releases the rollout Lease when its holder is
gone (a run that was killed before it could clean up). It refuses while another rollout still renews the
Lease, naming it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := o.engine(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer e.Close()
			if err := e.Unlock(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: partition = replicas, lease released\n", e.Config().Namespace, e.Config().StatefulSet)
			return nil
		},
	}
}
