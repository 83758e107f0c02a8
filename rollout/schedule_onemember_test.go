package rollout

import "math/rand/v2"

// oneMemberStream seeds the draw of one-member schedules (schedule.OneMember).
const oneMemberStream = 0x1e1

// drawOneMember makes one schedule in eight whose members keep their data a one-member etcd (issue 34): three
// in four of them accept the write outage (Config.AcceptWriteOutage), so their runs restart the only member
// after a verified snapshot (invariant s), and every disruption's quorum rule (b) gives way to the consent;
// the others must disrupt nothing. Every event strikes etcd-0. It draws from a stream of its own, so every
// other draw of a seed stays as it was.
func drawOneMember(seed uint64, s *schedule) {
	rng := rand.New(rand.NewPCG(seed, oneMemberStream))
	if s.Ephemeral || rng.IntN(8) > 0 {
		return
	}
	s.OneMember, s.AcceptOutage = true, rng.IntN(4) > 0
	s.Members, s.Leader, s.Updated, s.SlowLearner = 1, 0, nil, ""
	for i := range s.Events {
		s.Events[i].Pod, s.Events[i].ThenCrashPod = 0, 0
	}
}
