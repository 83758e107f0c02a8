package harness_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// The checker must be able to fail: a lost acknowledged write and a stale read are caught; an unknown put
// that a later get observed, or that nobody observed, is accepted.
func TestCheckLinearizable(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	put := func(client int, key, value string, call, ret int, outcome harness.Outcome) harness.HistoryOp {
		return harness.HistoryOp{Client: client, Kind: harness.OpPut, Key: key, Value: value, Call: ms(call), Return: ms(ret), Outcome: outcome}
	}
	get := func(client int, key, value string, call, ret int) harness.HistoryOp {
		return harness.HistoryOp{Client: client, Kind: harness.OpGet, Key: key, Value: value, Call: ms(call), Return: ms(ret), Outcome: harness.OutcomeOK}
	}
	tests := []struct {
		name string
		ops  []harness.HistoryOp
		want porcupine.CheckResult
		sent int
	}{
		{"sequential puts and gets", []harness.HistoryOp{
			put(0, "a", "1", 0, 1, harness.OutcomeOK), get(1, "a", "1", 2, 3), put(0, "b", "2", 4, 5, harness.OutcomeOK),
			get(1, "b", "2", 6, 7), get(1, "a", "1", 8, 9),
		}, porcupine.Ok, 5},
		{"a concurrent get may see either value", []harness.HistoryOp{
			put(0, "a", "1", 0, 1, harness.OutcomeOK), put(0, "a", "2", 2, 10, harness.OutcomeOK), get(1, "a", "1", 3, 4), get(1, "a", "2", 5, 6),
		}, porcupine.Ok, 4},
		{"lost acknowledged write", []harness.HistoryOp{
			put(0, "a", "1", 0, 1, harness.OutcomeOK), put(0, "a", "2", 2, 3, harness.OutcomeOK), get(1, "a", "1", 4, 5),
		}, porcupine.Illegal, 3},
		{"stale read after a newer read", []harness.HistoryOp{
			put(0, "a", "1", 0, 1, harness.OutcomeOK), put(0, "a", "2", 2, 10, harness.OutcomeOK), get(1, "a", "2", 3, 4), get(1, "a", "1", 5, 6),
		}, porcupine.Illegal, 4},
		{"a value nobody wrote", []harness.HistoryOp{get(1, "a", "x", 0, 1)}, porcupine.Illegal, 1},
		{"an unknown put observed later", []harness.HistoryOp{
			put(0, "a", "1", 0, 1, harness.OutcomeUnknown), get(1, "a", "", 2, 3), get(1, "a", "1", 50, 51),
		}, porcupine.Ok, 3},
		{"an unknown put nobody observed is left out", []harness.HistoryOp{
			put(0, "a", "1", 0, 1, harness.OutcomeUnknown), get(1, "a", "", 2, 3),
		}, porcupine.Ok, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := harness.CheckLinearizable(tt.ops, 10*time.Second)
			assert.Equal(t, tt.want, check.Result)
			assert.Equal(t, tt.sent, check.Ops)
			if tt.want == porcupine.Illegal {
				dir := t.TempDir()
				require.NoError(t, harness.KeepHistory(dir, tt.ops, check))
				for _, f := range []string{"history.json", "history.html"} {
					st, err := os.Stat(filepath.Join(dir, f))
					require.NoError(t, err)
					assert.Positive(t, st.Size())
				}
			}
		})
	}
}
