package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

func TestExitCodes(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"success", context.Background(), nil, 0},
		{"usage", context.Background(), usageError{errors.New("--sts is required")}, 2},
		{"blocked", context.Background(), fmt.Errorf("rolling db/etcd: %w: no leader", rollout.ErrBlocked), 3},
		{"locked", context.Background(), fmt.Errorf("x: %w", &rollout.LockedError{Holder: "ci"}), 4},
		{"gate timeout", context.Background(), fmt.Errorf("rolling etcd-2: %w", &rollout.GateTimeoutError{Pod: "etcd-2"}), 5},
		{"member reverted", context.Background(), &rollout.RevertedError{Pod: "etcd-2", Cause: &rollout.GateTimeoutError{Pod: "etcd-2"}}, 5},
		{"interference", context.Background(), fmt.Errorf("%w during the rollout", rollout.ErrInterference), 6},
		{"interrupted wins over the error it caused", cancelled, fmt.Errorf("waiting: %w", context.Canceled), 130},
		{"anything else", context.Background(), errors.New("moving leader: etcdserver: bad leader transferee"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, exitCode(tt.ctx, tt.err))
		})
	}
}

func TestFlagsAndHelp(t *testing.T) {
	t.Run("help documents the exit codes", func(t *testing.T) {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--help"})
		require.NoError(t, cmd.Execute())
		assert.Contains(t, out.String(), "130  interrupted (Ctrl-C); the partition was re-locked")
	})
	t.Run("missing --sts is a usage error", func(t *testing.T) {
		cmd := newRootCommand()
		cmd.SetArgs([]string{"plan", "-n", "db"})
		err := cmd.Execute()
		assert.Equal(t, 2, exitCode(context.Background(), err))
	})
	t.Run("unknown flag is a usage error", func(t *testing.T) {
		cmd := newRootCommand()
		cmd.SetArgs([]string{"run", "--nope"})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.Execute()
		assert.Equal(t, 2, exitCode(context.Background(), err))
	})
}
