package rollout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The layers keep to their imports (docs/architecture.md): the engine is a plain Go library that any program
// can embed, so nothing of Pulumi reaches it; memberdial, below it, knows neither the engine nor etcd.
func TestLayersKeepToTheirImports(t *testing.T) {
	const module = "github.com/etcd-rollout/pulumi-etcd-rollout"
	plannerAndItsLeaves := []string{module + "/rollout/internal/planner", module + "/rollout/internal/podpath", module + "/rollout/internal/durability",
		module + "/rollout/internal/memberlist", module + "/rollout/internal/probes", module + "/rollout/internal/replace", module + "/rollout/internal/selfremoval"}
	tests := []struct {
		pkg       string
		forbidden []string // import path prefixes no dependency, direct or not, may have
		allowed   []string // import paths allowed although a forbidden prefix names them
	}{
		{pkg: "./", forbidden: []string{"github.com/pulumi/"}},
		{pkg: "./memberdial", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout"}},
		// The pure decisions below the engine read typed values and make no call: no etcd, no engine, and for
		// the replacement's procedure not even Kubernetes' types.
		{pkg: "./internal/durability", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"},
			allowed: []string{module + "/rollout/internal/podpath"}},
		{pkg: "./internal/podpath", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"}},
		{pkg: "./internal/configfile", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout/memberdial", module + "/rollout/internal/member"}},
		{pkg: "./internal/podfile", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout/memberdial", module + "/rollout/internal/member"}},
		{pkg: "./internal/selfremoval", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"}},
		{pkg: "./internal/trustcheck", forbidden: []string{"github.com/pulumi/"}},
		{pkg: "./internal/testetcd", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/", module + "/rollout"}},
		{pkg: "./internal/testpki", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/", module + "/rollout"}},
		{pkg: "./internal/trust", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/", module + "/rollout"}},
		{pkg: "./internal/replace", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/", module + "/rollout"}},
		// Snapshots are taken, checked and stored from a stream the engine hands over: no etcd client, no
		// Kubernetes, no engine; bbolt (to check the file) and gocloud.dev's blob (to store it) are its own.
		{pkg: "./internal/snapshot", forbidden: []string{"github.com/pulumi/", "go.etcd.io/etcd/", "k8s.io/", module + "/rollout"}},
		{pkg: "./internal/probes", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"}},
		// How the engine waits and calls the API server, below it so that a procedure of its own package can too.
		{pkg: "./internal/poll", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"}},
		{pkg: "./internal/kubeapi", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout"},
			allowed: []string{module + "/rollout/internal/poll"}},
		// The gate sequences the rules and judges none: it knows neither the cluster nor the engine.
		{pkg: "./internal/gate", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/", module + "/rollout"}},
		// The planner is pure (issue 44): observed state in, steps out. It reads the pure decisions below it and
		// knows neither etcd's client, nor the member layer, nor client-go's clientsets.
		{pkg: "./internal/planner", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"},
			allowed: plannerAndItsLeaves[1:]},
		// A procedure decides its steps over the engine it is handed: it sees the cluster through the planner's
		// types and asks the gate; it reaches neither etcd, nor the API server, nor the checks (gate_layers_test.go).
		{pkg: "./internal/procedure/replacement", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"},
			allowed: append(plannerAndItsLeaves, module+"/rollout/internal/gate", module+"/rollout/internal/poll")},
		{pkg: "./internal/procedure/restart", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"},
			allowed: append(plannerAndItsLeaves, module+"/rollout/internal/gate")},
		{pkg: "./internal/procedure/versionchange", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"},
			allowed: append(plannerAndItsLeaves, module+"/rollout/internal/gate")},
		{pkg: "./internal/procedure/revert", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"},
			allowed: append(plannerAndItsLeaves, module+"/rollout/internal/gate")},
		// What the engine holds and reads of Kubernetes, below it: the run's Lease, its cache of the StatefulSet
		// and pods, the client TLS material the etcd container mounts. None knows etcd or the engine.
		{pkg: "./internal/lease", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout"},
			allowed: []string{module + "/rollout/internal/kubeapi", module + "/rollout/internal/poll"}},
		{pkg: "./internal/memberwatch", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout"}},
		{pkg: "./internal/tlsmaterial", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout"},
			allowed: []string{module + "/rollout/internal/podfile", module + "/rollout/internal/podpath"}},
		// Whether a member stayed healthy, judged from the looks the gates hand it: no etcd, no API server.
		{pkg: "./internal/health", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/client-go", module + "/rollout"},
			allowed: append(plannerAndItsLeaves, module+"/rollout/internal/process")},
		{pkg: "./internal/process", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/", module + "/rollout"}},
		// The StatefulSet as the engine reads and writes it: Kubernetes, the gate's permit, no etcd.
		{pkg: "./internal/statefulset", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout"},
			allowed: append(plannerAndItsLeaves, module+"/rollout/internal/gate", module+"/rollout/internal/health", module+"/rollout/internal/kubeapi",
				module+"/rollout/internal/memberwatch", module+"/rollout/internal/poll", module+"/rollout/internal/process")},
		// What a rollout tells while it runs: its events and the status ConfigMap; no etcd, no engine.
		{pkg: "./internal/progress", forbidden: []string{"github.com/pulumi/", "go.etcd.io/etcd/client", "go.etcd.io/etcd/server", module + "/rollout"},
			allowed: append(plannerAndItsLeaves, module+"/rollout/internal/lease", module+"/rollout/internal/kubeapi", module+"/rollout/internal/poll",
				module+"/rollout/internal/snapshot")},
		{pkg: "./internal/memberlist", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/", module + "/rollout"}},
		{pkg: "./internal/outage", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", "k8s.io/", module + "/rollout"}},
		{pkg: "./internal/replacerecord", forbidden: []string{"github.com/pulumi/", "go.etcd.io/", module + "/rollout/memberdial", module + "/rollout/internal/member"}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tt.pkg).CombinedOutput()
			require.NoError(t, err, "go list -deps %s:\n%s", tt.pkg, out)
			deps := strings.Fields(string(out))
			require.NotEmpty(t, deps)
			for _, dep := range deps {
				if dep == module+"/rollout/"+strings.TrimPrefix(tt.pkg, "./") || slices.Contains(tt.allowed, dep) {
					continue // itself, or a pure leaf it may use
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

// A type's methods live in its type's file, or in files named <type>_<topic>.go when there are many
// (docs/architecture.md): a newcomer finds Engine's in engine*.go and a run's steps in run*.go.
func TestMethodsLiveInTheirTypesFiles(t *testing.T) {
	for _, dir := range []string{".", "internal/planner", "internal/health", "internal/lease", "internal/memberwatch", "internal/statefulset", "internal/progress", "internal/member", "internal/replace", "internal/replacerecord", "internal/durability", "memberdial", "../provider"} {
		t.Run(dir, func(t *testing.T) {
			files := map[string]map[string]bool{} // receiver type: the files holding its methods
			for _, m := range methodsIn(t, dir) {
				if files[m.receiver] == nil {
					files[m.receiver] = map[string]bool{}
				}
				files[m.receiver][m.file] = true
			}
			require.NotEmpty(t, files)
			for typ, fs := range files {
				if len(fs) < 2 {
					continue
				}
				for f := range fs {
					base, lower := strings.TrimSuffix(strings.ToLower(f), ".go"), strings.ToLower(typ)
					assert.True(t, base == lower || strings.HasPrefix(base, lower+"_"),
						"%s's methods are in %d files; %s is not named for it (%s.go or %s_<topic>.go)", typ, len(fs), f, lower, lower)
				}
			}
		})
	}
}

// The executor's surface listed in api.go is the whole of it: every exported Engine method, and no other.
func TestTheSurfaceListNamesEveryEngineMethod(t *testing.T) {
	api, err := parser.ParseFile(token.NewFileSet(), "api.go", nil, parser.ParseComments|parser.SkipObjectResolution)
	require.NoError(t, err)
	var listed []string
	for _, group := range api.Comments {
		if text := group.Text(); strings.HasPrefix(text, "The executor's surface") {
			for _, m := range regexp.MustCompile(`func \(e \*Engine\) (\w+)\(`).FindAllStringSubmatch(text, -1) {
				listed = append(listed, m[1])
			}
		}
	}
	require.NotEmpty(t, listed, "api.go has no executor's surface list")
	var exported []string
	for _, m := range methodsIn(t, ".") {
		if m.receiver == "Engine" && ast.IsExported(m.name) {
			exported = append(exported, m.name)
		}
	}
	assert.ElementsMatch(t, exported, listed)
}

// method is one method declared in a package: its receiver type (without pointer or type parameters), its
// name, and the file it is in.
type method struct{ receiver, name, file string }

// methodsIn reads the methods declared in the non-test files of dir.
func methodsIn(t *testing.T, dir string) []method {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var methods []method
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if generic, ok := typ.(*ast.IndexExpr); ok {
				typ = generic.X
			}
			methods = append(methods, method{receiver: typ.(*ast.Ident).Name, name: fn.Name.Name, file: filepath.Base(path)})
		}
	}
	return methods
}
