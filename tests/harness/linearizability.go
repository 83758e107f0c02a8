package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// kvInput and kvOutput are one op as the porcupine model sees it.
type kvInput struct {
	Put   bool
	Key   string
	Value string
}

type kvOutput struct {
	Value   string
	Unknown bool
}

// kvModel is a register per key: a put sets it, a get must return it. Partitioning by key makes the check
// linear in the number of keys instead of exponential in the history's concurrency.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in, out := input.(kvInput), output.(kvOutput)
		if in.Put {
			return true, in.Value
		}
		return out.Value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		switch {
		case in.Put && out.Unknown:
			return fmt.Sprintf("put(%s, %s) -> unknown", in.Key, in.Value)
		case in.Put:
			return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		}
		return fmt.Sprintf("get(%s) -> %q", in.Key, out.Value)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
}

// LinearizabilityCheck is the verdict on one history.
type LinearizabilityCheck struct {
	Result porcupine.CheckResult
	// Ops is how many ops went to the checker: every acknowledged op, and the unknown puts some get observed
	// (an unknown put nobody read may be placed after everything, where it changes nothing, so it is left out).
	Ops  int
	info porcupine.LinearizationInfo
}

// CheckLinearizable checks ops against a per-key register with porcupine, as etcd's own robustness tests
// do: an unknown put may take effect at any time after its call, or never. It returns porcupine.Unknown
// when timeout passes first.
func CheckLinearizable(ops []HistoryOp, timeout time.Duration) LinearizabilityCheck {
	read := map[string]bool{}
	for _, op := range ops {
		if op.Kind == OpGet {
			read[op.Key+"\x00"+op.Value] = true
		}
	}
	var history []porcupine.Operation
	for _, op := range ops {
		ret := op.Return.Nanoseconds()
		if op.Outcome == OutcomeUnknown {
			if !read[op.Key+"\x00"+op.Value] {
				continue
			}
			ret = math.MaxInt64
		}
		history = append(history, porcupine.Operation{
			ClientId: op.Client,
			Input:    kvInput{Put: op.Kind == OpPut, Key: op.Key, Value: op.Value},
			Call:     op.Call.Nanoseconds(),
			Output:   kvOutput{Value: op.Value, Unknown: op.Outcome == OutcomeUnknown},
			Return:   ret,
		})
	}
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, timeout)
	return LinearizabilityCheck{Result: res, Ops: len(history), info: info}
}

// KeepHistory writes the history as JSON (history.json) and porcupine's visualization of the check
// (history.html, open it in a browser) into dir, for a failed test to point at.
func KeepHistory(dir string, ops []HistoryOp, check LinearizabilityCheck) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("keeping the history: %w", err)
	}
	data, err := json.MarshalIndent(ops, "", " ")
	if err != nil {
		return fmt.Errorf("encoding the history: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "history.json"), data, 0o644); err != nil {
		return fmt.Errorf("writing the history: %w", err)
	}
	if err := porcupine.VisualizePath(kvModel, check.info, filepath.Join(dir, "history.html")); err != nil {
		return fmt.Errorf("writing the history's visualization: %w", err)
	}
	return nil
}
