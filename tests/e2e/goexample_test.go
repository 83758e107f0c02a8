//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/require"
)

// goRunner runs a Go program in this process through the Automation API.
type goRunner struct {
	stack auto.Stack
}

func newGoRunner(t *testing.T, p paths, project string, program pulumi.RunFunc) *goRunner {
	t.Helper()
	env, backend := pulumiEnv(t, p)
	var plugins []workspace.PluginOptions
	for _, pl := range pluginSettings(p) {
		plugins = append(plugins, workspace.PluginOptions{Name: pl["name"], Path: pl["path"]})
	}
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(filepath.Dir(p.pulumi)), SkipVersionCheck: true})
	require.NoError(t, err)
	proj := workspace.Project{
		Name:    tokens.PackageName(project),
		Runtime: workspace.NewProjectRuntimeInfo("go", nil),
		Backend: &workspace.ProjectBackend{URL: backend},
		Plugins: &workspace.Plugins{Providers: plugins},
	}
	stack, err := auto.UpsertStackInlineSource(t.Context(), "e2e", project, program,
		auto.Project(proj), auto.EnvVars(env), auto.WorkDir(t.TempDir()), auto.Pulumi(cmd))
	require.NoError(t, err)
	return &goRunner{stack: stack}
}

func (g *goRunner) setConfig(ctx context.Context, config map[string]string) error {
	m := auto.ConfigMap{}
	for k, v := range config {
		m[k] = auto.ConfigValue{Value: v}
	}
	return g.stack.SetAllConfig(ctx, m)
}

func (g *goRunner) up(ctx context.Context, config map[string]string) (result, error) {
	if err := g.setConfig(ctx, config); err != nil {
		return result{}, err
	}
	var text bytes.Buffer
	res, err := g.stack.Up(ctx, optup.ProgressStreams(&text))
	r := result{Text: text.String(), Outputs: map[string]any{}}
	if err != nil {
		r.Error = err.Error()
		return r, err
	}
	for k, v := range res.Outputs {
		r.Outputs[k] = v.Value
	}
	if res.Summary.ResourceChanges != nil {
		r.Summary = *res.Summary.ResourceChanges
	}
	return r, nil
}

func (g *goRunner) preview(ctx context.Context, config map[string]string) (result, error) {
	if err := g.setConfig(ctx, config); err != nil {
		return result{}, err
	}
	ch := make(chan events.EngineEvent)
	steps := make(chan []apitype.StepEventMetadata)
	go func() {
		var out []apitype.StepEventMetadata
		for e := range ch {
			if e.ResourcePreEvent != nil {
				out = append(out, e.ResourcePreEvent.Metadata)
			}
		}
		steps <- out
	}()
	var text bytes.Buffer
	res, err := g.stack.Preview(ctx, optpreview.Diff(), optpreview.EventStreams(ch), optpreview.ProgressStreams(&text))
	r := result{Text: text.String(), Steps: <-steps}
	if err != nil {
		r.Error = err.Error()
		return r, err
	}
	r.Summary = map[string]int{}
	for k, v := range res.ChangeSummary {
		r.Summary[string(k)] = v
	}
	return r, nil
}

func (g *goRunner) destroy(ctx context.Context) error {
	_, err := g.stack.Destroy(ctx, optdestroy.ContinueOnError())
	return err
}
