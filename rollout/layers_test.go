package rollout

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The layers keep to their imports (docs/architecture.md): the engine is a plain Go library that any program
// can embed, so nothing of Pulumi reaches it; memberdial, below it, knows neither the engine nor etcd.
func TestLayersKeepToTheirImports(t *testing.T) {
	const module = "github.com/etcd-rollout/pulumi-etcd-rollout"
	tests := []struct {
		pkg       string
		forbidden []string // import path prefixes no dependency, direct or not, may have
	}{
		{pkg: "./", forbidden: []string{"github.com/pulumi/"}},
		{pkg: "./memberdial", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout"}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tt.pkg).CombinedOutput()
			require.NoError(t, err, "go list -deps %s:\n%s", tt.pkg, out)
			deps := strings.Fields(string(out))
			require.NotEmpty(t, deps)
			for _, dep := range deps {
				if dep == module+"/rollout/memberdial" {
					continue // itself
				}
				for _, f := range tt.forbidden {
					assert.False(t, strings.HasPrefix(dep, f), "%s depends on %s", tt.pkg, dep)
				}
			}
		})
	}
}

// Member access is the engine's only way to etcd: no file of package rollout imports etcd's client, gRPC or
// zap itself; internal/member does, behind the interface the engine calls (etcdAccess).
func TestOnlyMemberAccessTalksToEtcd(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./").CombinedOutput()
	require.NoError(t, err, "go list ./:\n%s", out)
	imports := strings.Fields(string(out))
	require.NotEmpty(t, imports)
	for _, imp := range imports {
		for _, f := range []string{"go.etcd.io/", "google.golang.org/grpc", "go.uber.org/zap"} {
			assert.False(t, strings.HasPrefix(imp, f), "package rollout imports %s: reach etcd through internal/member", imp)
		}
	}
}
