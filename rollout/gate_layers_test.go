package rollout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gateChecksNamed are the checks of the gate's refusal sequence (gatechecks.go): no procedure, no provider code
// and no command calls one of them; they ask the gate, which runs them all, in order.
var gateChecksNamed = []string{
	"checkTrust", "CheckTrust", "CheckConsents", "CheckSelfRemoval", "CheckVersionPaths", "CheckImagePath",
	"CheckV2Store", "CheckContainerFlags", "ControllerWillAct", "quorumOnAFreshLook", "podDeleteSafety",
	"revertSafety", "othersExposedBy", "ValidateDowngrade", "checkPointOfNoReturn", "anotherFailedMemberDown",
	"othersOnTheFailedRevisionStayUp", "leaderIs",
}

// disruptionsNamed are the calls that take a member down, change etcd's membership or cross a point of no
// return: each is made only by a function that asked the gate for a permit before it (permit, or
// clearToDisrupt, which asks for one), or that was handed a gate.Permit.
var disruptionsNamed = []string{"LowerPartition", "DeleteMemberPod", "transferLeader", "MemberRemove", "MemberAddAsLearner", "MemberPromote",
	// and the writes a procedure asks its engine for
	"MoveLeader", "DeleteOnAFreshLook", "DeleteReleased", "EnableDowngrade"}

// askingTheGate are the calls that ask the gate for a permit: the run's own, and the procedures' through the
// engine they are handed (replacement.Engine).
var askingTheGate = []string{"permit", "clearToDisrupt", "Permit", "ClearToDisrupt", "PermitRelease", "PermitRevert"}

// procedureDirs are the procedures below the engine: each asks the gate through its engine before every
// disruption, and none calls a check itself.
var procedureDirs = []string{"internal/procedure/replacement", "internal/procedure/restart", "internal/procedure/revert", "internal/procedure/versionchange"}

// writesUnderAPermit are the functions that send a disruption out: each takes the gate.Permit it goes out
// under, and bounds its write to the permit's lease (Permit.Within), so a zero permit sends nothing.
var writesUnderAPermit = []string{"LowerPartition", "DeleteMemberPod", "transferLeader", "call"}

// call is one call in a package's non-test code: the file and function it is in, the name called, and whether
// the function asked the gate for a permit earlier in its body, or takes one.
type call struct {
	file, caller, callee string
	permitted            bool
	// arg is the first selector among the call's arguments (member.DowngradeEnable), "" when none.
	arg string
}

// funcsIn calls each with every function declared in the non-test files of dir, and the file it is in.
func funcsIn(t *testing.T, dir string, each func(fn *ast.FuncDecl, file string)) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok {
				each(fn, filepath.Base(path))
			}
		}
	}
}

// callsIn reads every call in the non-test files of dir.
func callsIn(t *testing.T, dir string) []call {
	t.Helper()
	var calls []call
	funcsIn(t, dir, func(fn *ast.FuncDecl, file string) {
		if fn.Body != nil {
			calls = append(calls, callsOf(fn, file)...)
		}
	})
	return calls
}

// callsOf is the calls in fn's body, in source order.
func callsOf(fn *ast.FuncDecl, file string) []call {
	permitted := takesPermit(fn)
	var calls []call
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		name := calledName(c.Fun)
		cl := call{file: file, caller: fn.Name.Name, callee: name, permitted: permitted}
		for _, a := range c.Args {
			if sel, ok := a.(*ast.SelectorExpr); ok && cl.arg == "" {
				cl.arg = sel.Sel.Name
			}
		}
		calls = append(calls, cl)
		if slices.Contains(askingTheGate, name) {
			permitted = true
		}
		return true
	})
	return calls
}

func calledName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// permitTakers says, for every function declared in the non-test files of dirs, whether it takes a gate.Permit.
func permitTakers(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	takers := map[string]bool{}
	for _, dir := range dirs {
		funcsIn(t, dir, func(fn *ast.FuncDecl, _ string) {
			takers[fn.Name.Name] = takers[fn.Name.Name] || takesPermit(fn)
		})
	}
	for _, name := range writesUnderAPermit {
		require.Contains(t, takers, name, "the list of functions that send a disruption out is out of date")
	}
	return takers
}

// takesPermit says fn has a parameter of type gate.Permit.
func takesPermit(fn *ast.FuncDecl) bool {
	for _, p := range fn.Type.Params.List {
		if sel, ok := p.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Permit" {
			return true
		}
	}
	return false
}

// The refusal sequence exists once: in the gate (internal/gate) and the file that judges its rules
// (gatechecks.go). A check may be built of other checks (revertSafety of podDeleteSafety), and the public
// wrapper of one calls it (CheckTrust of checkTrust); every other caller asks the gate.
func TestOnlyTheGateCallsTheChecks(t *testing.T) {
	for _, dir := range append([]string{".", "../provider", "../cmd/etcd-rollout"}, procedureDirs...) {
		t.Run(dir, func(t *testing.T) {
			for _, c := range callsIn(t, dir) {
				if !slices.Contains(gateChecksNamed, c.callee) || (dir == "." && c.file == "gatechecks.go") {
					continue
				}
				if dir == "." && slices.Contains(gateChecksNamed, c.caller) {
					continue // a check built of checks
				}
				assert.Fail(t, "a check called outside the gate",
					"%s: %s calls %s: ask the gate instead (run.permit, GatePreview, GatePreflight)", c.file, c.caller, c.callee)
			}
		})
	}
}

// Every disruption is made under a permit of the gate's: a function that makes one asked for the permit before
// it in its own body, or was handed it.
func TestEveryDisruptionHoldsAPermit(t *testing.T) {
	dirs := append([]string{".", "internal/statefulset"}, procedureDirs...)
	for name, takes := range permitTakers(t, dirs...) {
		if slices.Contains(writesUnderAPermit, name) {
			assert.True(t, takes, "%s sends a disruption out without taking the gate.Permit it goes out under", name)
		}
	}
	var calls []call
	for _, dir := range dirs {
		calls = append(calls, callsIn(t, dir)...)
	}
	seen := map[string]bool{}
	for _, c := range calls {
		disrupts := slices.Contains(disruptionsNamed, c.callee) || (c.callee == "downgradeCall" && c.arg == "DowngradeEnable")
		if !disrupts || c.caller == c.callee {
			continue
		}
		seen[c.callee] = true
		assert.True(t, c.permitted, "%s: %s makes a disruption (%s) without a gate permit before it: ask the gate first (run.permit)", c.file, c.caller, c.callee)
	}
	for _, d := range append(disruptionsNamed, "downgradeCall") {
		assert.True(t, seen[d], "no call of %s found: the list of disruptions is out of date", d)
	}
}
