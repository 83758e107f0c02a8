package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Log lines as etcd 3.6 writes them (copied from member logs of the local cluster, IDs shortened).
const (
	idA = "aaaa"
	idB = "bbbb"
	idC = "cccc"
)

func line(ts, msg string) string {
	return `{"level":"info","ts":"2026-11-29T14:18:` + ts + `Z","caller":"x","msg":"` + msg + `"}` + "\n"
}

func writeLog(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestClassifyLeaderChanges(t *testing.T) {
	ids := map[string]int{idA: 0, idB: 1, idC: 2}
	tests := []struct {
		name       string
		logs       [3]string
		want       []LeaderChangeKind
		wantTerms  int
		wantWinner []int
	}{
		{
			name: "MoveLeader: planned transfer",
			logs: [3]string{
				line("53.757652", "leadership transfer starting") +
					line("53.757724", idA+" [term 2] starts to transfer leadership to "+idB),
				line("53.757912", idB+" [term 2] received MsgTimeoutNow from "+idA+" and starts an election to get leadership.") +
					line("53.757965", idB+" became candidate at term 3") +
					line("53.758462", idB+" became leader at term 3"),
				"",
			},
			want: []LeaderChangeKind{ChangePlanned}, wantTerms: 1, wantWinner: []int{1},
		},
		{
			name: "SIGTERM on the leader: hand-over",
			logs: [3]string{
				line("54.888805", idA+" [term 3] received MsgTimeoutNow from "+idB+" and starts an election to get leadership.") +
					line("54.888830", idA+" became candidate at term 4") +
					line("54.889258", idA+" became leader at term 4"),
				line("54.887930", "received signal; shutting down") +
					line("54.888539", "leadership transfer starting"),
				"",
			},
			want: []LeaderChangeKind{ChangeHandover}, wantTerms: 1, wantWinner: []int{0},
		},
		{
			name: "leader killed: election, with a lost pre-campaign that raises no term",
			logs: [3]string{
				line("03.100000", idA+" became pre-candidate at term 4"),
				"",
				line("03.800000", idC+" is starting a new election at term 4") +
					line("03.800001", idC+" became pre-candidate at term 4") +
					line("03.800100", idC+" became candidate at term 5") +
					line("03.895000", idC+" became leader at term 5"),
			},
			want: []LeaderChangeKind{ChangeElection}, wantTerms: 1, wantWinner: []int{2},
		},
		{
			name: "split vote: two terms, one leader",
			logs: [3]string{
				line("03.800100", idA+" became candidate at term 5"),
				"",
				line("03.800100", idC+" became candidate at term 5") +
					line("05.100000", idC+" became candidate at term 6") +
					line("05.200000", idC+" became leader at term 6"),
			},
			want: []LeaderChangeKind{ChangeElection}, wantTerms: 2, wantWinner: []int{2},
		},
	}
	from := time.Date(2026, 11, 29, 14, 18, 0, 0, time.UTC)
	to := from.Add(time.Minute)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paths []string
			for i, l := range tt.logs {
				paths = append(paths, writeLog(t, []string{"a", "b", "c"}[i]+".log", "=== header, not JSON\n"+l))
			}
			h, err := ReadRaftHistory(paths, ids, from, to)
			require.NoError(t, err)
			var kinds []LeaderChangeKind
			var winners []int
			for _, c := range h.Changes {
				kinds = append(kinds, c.Kind)
				winners = append(winners, c.Winner)
			}
			assert.Equal(t, tt.want, kinds)
			assert.Equal(t, tt.wantWinner, winners)
			assert.Len(t, h.Terms, tt.wantTerms)
		})
	}
}

// Lines outside the window belong to another rollout and must not count.
func TestReadRaftHistoryWindow(t *testing.T) {
	ids := map[string]int{idA: 0}
	p := writeLog(t, "a.log", line("10.000000", idA+" became leader at term 2")+line("40.000000", idA+" became leader at term 3"))
	from := time.Date(2026, 11, 29, 14, 18, 30, 0, time.UTC)
	h, err := ReadRaftHistory([]string{p}, ids, from, from.Add(20*time.Second))
	require.NoError(t, err)
	require.Len(t, h.Changes, 1)
	assert.Equal(t, uint64(3), h.Changes[0].Term)
}

// etcd_server_leader_changes_seen_total counts every transition to a known leader of the current process,
// X → none → X included.
func TestLeaderChangesInIncarnation(t *testing.T) {
	p := writeLog(t, "a.log",
		"=== first process\n"+
			line("01.0", "raft.node: "+idA+" elected leader "+idB+" at term 2")+
			"=== second process\n"+
			line("02.0", "raft.node: "+idA+" elected leader "+idB+" at term 2")+
			line("03.0", "raft.node: "+idA+" lost leader "+idB+" at term 3")+
			line("03.1", "raft.node: "+idA+" elected leader "+idB+" at term 3")+
			line("04.0", "raft.node: "+idA+" changed leader from "+idB+" to "+idC+" at term 4")+
			line("05.0", "raft.node: "+idA+" lost leader "+idC+" at term 5"))
	n, err := leaderChangesInIncarnation(p)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}
