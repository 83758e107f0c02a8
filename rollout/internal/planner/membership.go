package planner

import (
	"net/url"
	"slices"
	"strings"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberlist"
)

// ListedAs is m's entry in etcd's member list: by the member ID m answered with, else by a peer URL whose host
// is m's pod (etcd-1.etcd.db.svc names pod etcd-1), else by etcd's member name. The member name is whatever
// --name says, which need not be the pod's name; a match on it alone is the last resort.
func ListedAs(s ClusterState, m MemberState) (memberlist.Member, bool) {
	if m.MemberID != 0 {
		for _, info := range s.Membership {
			if info.ID == m.MemberID {
				return info, true
			}
		}
	}
	for _, info := range s.Membership {
		if slices.ContainsFunc(info.PeerURLs, func(u string) bool { return PeerURLNamesPod(u, m.Pod) }) {
			return info, true
		}
	}
	for _, info := range s.Membership {
		if info.Name == m.Pod {
			return info, true
		}
	}
	return memberlist.Member{}, false
}

// PeerURLNamesPod says a peer URL's host is pod's own DNS name under the StatefulSet's governing service
// (pod.service...), the stable name a StatefulSet gives each pod.
func PeerURLNamesPod(peerURL, pod string) bool {
	u, err := url.Parse(peerURL)
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(u.Hostname(), ".")
	return first == pod
}

// AboveAtUpdateRevision says every member above ordinal is at the update revision: lowering the partition to
// ordinal then recreates that one pod only.
func AboveAtUpdateRevision(st ClusterState, ordinal int) bool {
	for _, m := range st.Members[ordinal+1:] {
		if m.Revision != st.UpdateRevision {
			return false
		}
	}
	return true
}
