//go:build e2e

package e2e

import (
	"context"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

// result is what one pulumi operation left: the stack outputs (up), the change summary, the steps the engine
// reported for our Rollout resource (preview), and the text the CLI printed.
type result struct {
	Outputs map[string]any              `json:"outputs"`
	Summary map[string]int              `json:"summary"`
	Steps   []apitype.StepEventMetadata `json:"steps"`
	Text    string                      `json:"text"`
	Error   string                      `json:"error"`
}

// runner runs one example's program inline, one operation at a time, with the given stack config.
type runner interface {
	up(ctx context.Context, config map[string]string) (result, error)
	preview(ctx context.Context, config map[string]string) (result, error)
	destroy(ctx context.Context) error
}

// rolloutSteps picks the steps of our Rollout resource out of a preview.
func (r result) rolloutSteps() []apitype.StepEventMetadata {
	var out []apitype.StepEventMetadata
	for _, s := range r.Steps {
		if s.Type == "etcd-rollout:index:Rollout" {
			out = append(out, s)
		}
	}
	return out
}

// planOf reads the plan the provider wrote into a Rollout step's new inputs.
func planOf(s apitype.StepEventMetadata) []string {
	if s.New == nil {
		return nil
	}
	raw, _ := s.New.Inputs["plan"].([]any)
	var out []string
	for _, l := range raw {
		if str, ok := l.(string); ok {
			out = append(out, str)
		}
	}
	return out
}

// rolled lists the pods a plan restarts, in order.
func rolled(plan []string) []string {
	var out []string
	for _, l := range plan {
		if pod, ok := strings.CutPrefix(l, "roll "); ok {
			out = append(out, pod)
		}
	}
	return out
}

// tail is the last lines of a CLI's text, for a test log.
func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// explained is the CLI's text for a failure message, followed by its Diagnostics section once more: pulumi
// prints the errors above the resource summary, and a CI log that keeps only a failure's last lines would
// otherwise show the summary ("2 errored") without the reason.
func (r result) explained() string {
	start := strings.Index(r.Text, "Diagnostics:")
	if start < 0 {
		return r.Text
	}
	diag := r.Text[start:]
	for _, end := range []string{"\nOutputs:", "\nResources:"} {
		if i := strings.Index(diag, end); i >= 0 {
			diag = diag[:i]
		}
	}
	return r.Text + "\n--- the diagnostics again:\n" + strings.TrimRight(diag, "\n")
}
