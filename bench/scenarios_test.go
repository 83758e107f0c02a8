package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

func TestSelectStrategies(t *testing.T) {
	all := strategies(0, 0)
	tests := []struct {
		names   string
		want    []string
		wantErr string
	}{
		{names: "all", want: []string{"default", "default-hardened", "job-like", "engine", "engine-cd0"}},
		{names: "", want: []string{"default", "default-hardened", "job-like", "engine", "engine-cd0"}},
		{names: "engine-cd0", want: []string{"engine-cd0"}},
		{names: "default-hardened, engine", want: []string{"default-hardened", "engine"}},
		{names: "engine-cd1", wantErr: `unknown strategy "engine-cd1"`},
	}
	for _, tt := range tests {
		t.Run(tt.names, func(t *testing.T) {
			got, err := selectStrategies(all, tt.names)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			assert.Equal(t, tt.want, names)
		})
	}
}

// The report's pod-Ready and etcd-gate times come from the engine's typed member events, paired by pod; a
// member that was Ready but never rolled (the run stopped) adds no gate time.
func TestAddGateTimes(t *testing.T) {
	s := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	events := []TimedEvent{
		{Kind: rollout.EventMemberReady, Pod: "etcd-2", Elapsed: s(1.5)},
		{Kind: rollout.EventProgress, Message: "etcd-2 is Ready at rev after 1.5s"},
		{Kind: rollout.EventMemberRolled, Pod: "etcd-2", Elapsed: s(4.5)},
		{Kind: rollout.EventMemberReady, Pod: "etcd-1", Elapsed: s(1)},
		{Kind: rollout.EventMemberRolled, Pod: "etcd-1", Elapsed: s(1.25)},
		{Kind: rollout.EventMemberRolled, Pod: "etcd-0", Elapsed: s(2)}, // no Ready seen: no gate time
		{Kind: rollout.EventMemberReady, Pod: "etcd-0", Elapsed: s(0.5)},
	}
	var c Cell
	c.addGateTimes(events)
	assert.Equal(t, []float64{1.5, 1, 0.5}, c.ReadyAfter)
	assert.Equal(t, []float64{3, 0.25}, c.GateAfter)
}

// A scenario that names its strategies rolls those only, in the run's order, and says why not the others.
func TestStrategiesOf(t *testing.T) {
	all := strategies(time.Second, 0)
	names := func(sts []Strategy) []string {
		var out []string
		for _, s := range sts {
			out = append(out, s.Name)
		}
		return out
	}
	byName := map[string]Scenario{}
	for _, sc := range scenarios() {
		byName[sc.Name] = sc
	}
	tests := []struct {
		scenario string
		want     []string
	}{
		{"easy", []string{"default", "default-hardened", "job-like", "engine", "engine-cd0"}},
		{"emptydir", []string{"engine", "engine-cd0"}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			sc, ok := byName[tt.scenario]
			require.True(t, ok)
			assert.Equal(t, tt.want, names(strategiesOf(sc, all)))
			if len(sc.Only) > 0 {
				assert.Contains(t, sc.title(), "so they are not run", "the report says why the others are not run")
			}
		})
	}
	assert.Equal(t, []string{"engine-cd0"}, names(strategiesOf(byName["emptydir"], all[4:])), "a selection keeps to the run's strategies")
	assert.True(t, byName["emptydir"].Spec.DataDiesWithPod)
}
