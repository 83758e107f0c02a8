package main

import (
	"slices"
	"strings"
)

// Goal is one of the issues' targets, judged against the numbers of a run (reported, never asserted).
// Unknown (NOT MEASURED) goals are never Met: a run that lacks the data proves nothing either way.
type Goal struct {
	Name    string
	Met     bool
	Unknown bool
	Detail  string
}

// verdict accumulates one goal over the cells it covers. A failing cell fails the goal; a cell without the
// data, or a scenario the run did not roll, leaves it NOT MEASURED unless another cell already failed it
// (a partial run must not read as a target met).
type verdict struct {
	failed   bool
	measured int
	detail   []string
	missing  []string
}

// add records a measured cell; detail may be empty for a cell that only counts.
func (v *verdict) add(detail string, ok bool) {
	v.measured++
	if !ok {
		v.failed = true
	}
	if detail != "" {
		v.detail = append(v.detail, detail)
	}
}

// miss records what the run lacks for this goal ("hung/engine", "ten-clusters/engine peak RSS").
func (v *verdict) miss(what string) { v.missing = append(v.missing, what) }

// goal is the verdict under name; summary stands in for the detail when no cell left one.
func (v *verdict) goal(name, summary string) Goal {
	detail := v.detail
	if len(detail) == 0 && v.measured > 0 {
		detail = []string{summary}
	}
	if len(v.missing) > 0 {
		detail = append(detail, "not measured: "+strings.Join(v.missing, ", "))
	}
	unknown := !v.failed && (v.measured == 0 || len(v.missing) > 0)
	return Goal{Name: name, Met: !v.failed && !unknown, Unknown: unknown, Detail: strings.Join(detail, "; ")}
}

// cellOf finds a run's cell by scenario and strategy, nil when the run has none.
type cellOf func(sc, st string) *Cell

// eachEngineCell calls f for every engine strategy's cell of the named scenarios; a cell the run lacks is
// recorded as not measured.
func eachEngineCell(v *verdict, cell cellOf, scenarios []string, f func(name string, c *Cell)) {
	for _, sc := range scenarios {
		for _, st := range engineStrategies {
			if !rolls(sc, st) {
				continue // a strategy the scenario does not roll (Scenario.Only) is not missing
			}
			if c := cell(sc, st); c != nil {
				f(sc+"/"+st, c)
			} else {
				v.miss(sc + "/" + st)
			}
		}
	}
}

// rolls says scenario name rolls strategy st (Scenario.Only); an unknown scenario rolls every one.
func rolls(name, st string) bool {
	for _, sc := range scenarios() {
		if sc.Name == name {
			return len(sc.Only) == 0 || slices.Contains(sc.Only, st)
		}
	}
	return true
}

// restartScenarios are benchScenarios(replicas) whose members are restarted, not replaced (their data
// outlives the pod).
func restartScenarios(replicas int) []string {
	var out []string
	for _, s := range scenarios() {
		spec, _ := s.Spec.WithDefaults()
		if (replicas == 0 || spec.Replicas == replicas) && !spec.DataDiesWithPod {
			out = append(out, s.Name)
		}
	}
	return out
}

// benchScenarios names the scenarios of scenarios.go (every one that can keep a quorum, or those of a member
// count): "every scenario" in a target means these, not only the ones a run happened to select. A one-member
// etcd keeps no quorum while its member restarts, whoever rolls it: oneMemberGoal judges it.
func benchScenarios(replicas int) []string {
	var out []string
	for _, s := range scenarios() {
		spec, _ := s.Spec.WithDefaults()
		if replicas == 0 && spec.Replicas > 1 || spec.Replicas == replicas {
			out = append(out, s.Name)
		}
	}
	return out
}
