package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// LeaderChangeKind tells how a new Raft leader came to be, which is the whole point of the benchmark: a
// transfer (ours, or etcd's own hand-over on SIGTERM) stalls writes for milliseconds, an election for seconds.
type LeaderChangeKind string

const (
	// ChangePlanned is a transfer asked for through the MoveLeader API (the engine's, or job-like's).
	ChangePlanned LeaderChangeKind = "planned"
	// ChangeHandover is the transfer etcd makes by itself when its leader gets SIGTERM.
	ChangeHandover LeaderChangeKind = "handover"
	// ChangeElection is a real election: the winner campaigned (pre-candidate, candidate) because it stopped
	// hearing from a leader, not because a leader sent it MsgTimeoutNow.
	ChangeElection LeaderChangeKind = "election"
)

// LeaderChange is one term won, as the members' logs tell it.
type LeaderChange struct {
	Time   time.Time        `json:"time"`
	Term   uint64           `json:"term"`
	Winner int              `json:"winner"` // ordinal
	From   int              `json:"from"`   // ordinal of the leader that sent MsgTimeoutNow; -1 for an election
	Kind   LeaderChangeKind `json:"kind"`
}

// RaftHistory is what the members' logs say happened between two instants.
type RaftHistory struct {
	Changes []LeaderChange `json:"changes"`
	// PreCandidates counts "became pre-candidate" lines: campaigns, won or not. With pre-vote a lost
	// pre-campaign does not raise the term and disturbs nobody, so it is reported, not counted as an election.
	PreCandidates int `json:"preCandidates"`
	// Terms is every term in which some member became candidate or leader; its size should equal the change
	// of the raft term over the window (the cross-check of log parsing against the Status RPC).
	Terms []uint64 `json:"terms"`
}

// Count returns the number of changes of kind.
func (h RaftHistory) Count(kind LeaderChangeKind) int {
	n := 0
	for _, c := range h.Changes {
		if c.Kind == kind {
			n++
		}
	}
	return n
}

// logLine is the part of etcd's zap JSON log the classifier needs.
type logLine struct {
	TS  time.Time `json:"ts"`
	Msg string    `json:"msg"`
}

var (
	reBecameLeader    = regexp.MustCompile(`^([0-9a-f]+) became leader at term (\d+)$`)
	reBecameCandidate = regexp.MustCompile(`^([0-9a-f]+) became candidate at term (\d+)$`)
	reTimeoutNow      = regexp.MustCompile(`^([0-9a-f]+) \[term (\d+)\] received MsgTimeoutNow from ([0-9a-f]+) `)
	rePreCandidate    = regexp.MustCompile(` became pre-candidate at term `)
	// raft's node logs "elected leader" after a spell without one and "changed leader from" for a direct switch.
	reNewLeader = regexp.MustCompile(`^raft\.node: [0-9a-f]+ (elected leader [0-9a-f]+|changed leader from [0-9a-f]+ to [0-9a-f]+) at term \d+$`)
)

// memberEvents is one member's log between two instants, reduced to what classification needs.
type memberEvents struct {
	ordinal   int
	leaderAt  map[uint64]time.Time // term -> when this member became leader
	timeout   map[uint64]string    // term it campaigns for -> id of the leader that sent MsgTimeoutNow
	shutdowns []time.Time          // "received signal; shutting down"
	candTerms []uint64
	preCands  int
}

// readMemberLog reads the zap JSON lines of path with a timestamp in [from, to]. Lines that are not JSON
// (the member daemon's headers, panics) are skipped.
func readMemberLog(path string, ordinal int, from, to time.Time) (memberEvents, error) {
	ev := memberEvents{ordinal: ordinal, leaderAt: map[uint64]time.Time{}, timeout: map[uint64]string{}}
	f, err := os.Open(path)
	if err != nil {
		return ev, fmt.Errorf("reading member log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 256*1024), 4*1024*1024)
	for sc.Scan() {
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' {
			continue
		}
		var l logLine
		if json.Unmarshal(b, &l) != nil || l.TS.Before(from) || l.TS.After(to) {
			continue
		}
		switch {
		case l.Msg == "received signal; shutting down":
			ev.shutdowns = append(ev.shutdowns, l.TS)
		case rePreCandidate.MatchString(l.Msg):
			ev.preCands++
		}
		if m := reBecameLeader.FindStringSubmatch(l.Msg); m != nil {
			ev.leaderAt[parseUint(m[2])] = l.TS
		} else if m := reBecameCandidate.FindStringSubmatch(l.Msg); m != nil {
			ev.candTerms = append(ev.candTerms, parseUint(m[2]))
		} else if m := reTimeoutNow.FindStringSubmatch(l.Msg); m != nil {
			ev.timeout[parseUint(m[2])+1] = m[3]
		}
	}
	if err := sc.Err(); err != nil {
		return ev, fmt.Errorf("reading %s: %w", path, err)
	}
	return ev, nil
}

func parseUint(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

// handoverWindow is how long after its SIGTERM a leader's transfer still counts as etcd's shutdown hand-over
// (etcd gives it ReqTimeout = 5s + 2 election timeouts).
const handoverWindow = 8 * time.Second

// classify turns the members' events into leader changes. ids maps a member's hex raft ID to its ordinal.
func classify(members []memberEvents, ids map[string]int) RaftHistory {
	var h RaftHistory
	terms := map[uint64]bool{}
	shutdowns := map[int][]time.Time{}
	for _, m := range members {
		shutdowns[m.ordinal] = m.shutdowns
		h.PreCandidates += m.preCands
		for _, t := range m.candTerms {
			terms[t] = true
		}
	}
	for _, m := range members {
		for term, at := range m.leaderAt {
			terms[term] = true
			c := LeaderChange{Time: at, Term: term, Winner: m.ordinal, From: -1, Kind: ChangeElection}
			if fromID, ok := m.timeout[term]; ok {
				from, known := ids[fromID]
				if !known {
					from = -1
				}
				c.From, c.Kind = from, ChangePlanned
				for _, s := range shutdowns[from] {
					if !at.Before(s) && at.Sub(s) < handoverWindow {
						c.Kind = ChangeHandover
					}
				}
			}
			h.Changes = append(h.Changes, c)
		}
	}
	sort.Slice(h.Changes, func(i, j int) bool { return h.Changes[i].Time.Before(h.Changes[j].Time) })
	for t := range terms {
		h.Terms = append(h.Terms, t)
	}
	sort.Slice(h.Terms, func(i, j int) bool { return h.Terms[i] < h.Terms[j] })
	return h
}

// ReadRaftHistory reads the logs of one cluster's members (by ordinal) between from and to.
func ReadRaftHistory(logs []string, ids map[string]int, from, to time.Time) (RaftHistory, error) {
	var members []memberEvents
	for ordinal, path := range logs {
		ev, err := readMemberLog(path, ordinal, from, to)
		if err != nil {
			return RaftHistory{}, fmt.Errorf("member %d: %w", ordinal, err)
		}
		members = append(members, ev)
	}
	return classify(members, ids), nil
}

// leaderChangesInIncarnation counts the "raft.node: <self> elected leader" and "changed leader from" lines of the member's current
// process (after the daemon's last start header): what etcd_server_leader_changes_seen_total of that process
// should say. The benchmark compares the two as a check that it reads the logs right.
func leaderChangesInIncarnation(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading member log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 256*1024), 4*1024*1024)
	n := 0
	for sc.Scan() {
		b := sc.Bytes()
		if strings.HasPrefix(string(b), "=== ") {
			n = 0
			continue
		}
		if len(b) == 0 || b[0] != '{' {
			continue
		}
		var l logLine
		if json.Unmarshal(b, &l) != nil {
			continue
		}
		// etcd counts every transition to a known leader, including X → none → X, and so does this.
		if reNewLeader.MatchString(l.Msg) {
			n++
		}
	}
	return n, sc.Err()
}
