package planner

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/probes"
)

// MinPatchBefore36 is the oldest 3.5 patch release etcd supports upgrading to 3.6 from: "make sure that all of
// your 3.5 members are updated to 3.5.32 or later" (https://etcd.io/docs/latest/upgrades/upgrade_3_6/, as of
// its July 2026 revision; it said 3.5.26 before, and 3.5.20 earlier still, for the "too many learner member"
// error). The same page asks for `etcdutl check v2store` on every member first (CheckV2Store).
const MinPatchBefore36 = 32

// CheckV2Store refuses rolling a member that runs etcd with --enable-v2 (or ETCD_ENABLE_V2) onto 3.6 or later:
// 3.6 keeps no v2 store and will not start on one that holds v2 data, and etcd's upgrade guide asks for
// `etcdutl check v2store` on each member before 3.6. v2Members names the members whose etcd container enables
// v2 (V2Enabled), by pod name; the first in name order is named.
func CheckV2Store(templateImage string, v2Members []string) error {
	to, ok := ImageVersion(templateImage)
	if !ok {
		return nil
	}
	return checkV2Store(to, v2Members)
}

// checkV2Store is CheckV2Store for a target version already told.
func checkV2Store(to EtcdVersion, v2Members []string) error {
	if len(v2Members) == 0 || to.Major != 3 || to.Minor < 6 {
		return nil
	}
	pods := slices.Sorted(slices.Values(v2Members))
	return fmt.Errorf("%s runs etcd with --enable-v2, and etcd %s keeps no v2 store: run `etcdutl check v2store` (3.5.32 or later) on each member's data dir, remove --enable-v2 and roll on 3.5, then upgrade (https://etcd.io/docs/latest/upgrades/upgrade_3_6/)",
		pods[0], to)
}

// V2Enabled says the etcd container enables the v2 API (--enable-v2, or ETCD_ENABLE_V2, set to true).
func V2Enabled(c *corev1.Container) bool {
	v, err := strconv.ParseBool(EtcdFlagValues(c)["enable-v2"])
	return err == nil && v
}

// CheckVersionPath refuses a member version change that etcd does not support as a rolling change: skipping
// a minor version either way, leaving 3.5 from a patch older than MinPatchBefore36, or going down a minor from
// before 3.6 (etcd's downgrade API, which the rollout drives for a one-minor downgrade, exists from 3.6).
// Patch changes within a minor are always fine. The error says what to do instead.
func CheckVersionPath(from, to EtcdVersion) error {
	switch {
	case from.Major != to.Major:
		return fmt.Errorf("etcd %s -> %s changes the major version: not a rolling upgrade etcd supports", from, to)
	case to.Minor > from.Minor+1:
		return fmt.Errorf("etcd %s -> %s skips a minor version: etcd upgrades one minor at a time; roll to the newest %d.%d patch first",
			from, to, from.Major, from.Minor+1)
	case to.Minor < from.Minor-1:
		return fmt.Errorf("etcd %s -> %s goes down more than one minor version: etcd downgrades one minor at a time; roll to %d.%d first",
			from, to, from.Major, from.Minor-1)
	case to.Minor < from.Minor && (from.Major < 3 || (from.Major == 3 && from.Minor < 6)):
		return fmt.Errorf("etcd %s -> %s is a downgrade from before 3.6: etcd's downgrade API, which lowers the cluster version so that older members may rejoin, exists from 3.6 on; restore a %d.%d snapshot instead, or keep %d.%d",
			from, to, to.Major, to.Minor, from.Major, from.Minor)
	case from.Major == 3 && from.Minor == 5 && to.Minor == 6 && from.Patch < MinPatchBefore36:
		return fmt.Errorf("etcd %s -> %s: etcd supports upgrading to 3.6 only from 3.5.%d or later "+
			"(https://etcd.io/docs/latest/upgrades/upgrade_3_6/); roll every member to the newest 3.5 patch first", from, to, MinPatchBefore36)
	}
	return nil
}

// ErrVersionPath is wrapped (with ErrBlocked) when the template's etcd version cannot be rolled onto what the
// members run: unlike other blocked states it does not pass by waiting.
var ErrVersionPath = errors.New("unsupported etcd version change")

// CheckImagePath refuses a template image that cannot be rolled onto what some member runs now (memberImages:
// the etcd container image of each pod, by pod name). A template image whose version cannot be told (pinned
// only by digest, or tagged "latest") is refused when it replaces a member's image: nobody can say whether
// the change crosses a minor version, which needs a snapshot before its point of no return and etcd's version
// checks (ErrVersionUnknown). A member image without a version is not judged here: the engine asks the member.
// The error names the first member, in name order, that blocks it.
func CheckImagePath(templateImage string, memberImages map[string]string) error {
	pods := make([]string, 0, len(memberImages))
	for pod := range memberImages {
		pods = append(pods, pod)
	}
	sort.Strings(pods)
	to, ok := ImageVersion(templateImage)
	if !ok {
		for _, pod := range pods {
			if memberImages[pod] != templateImage {
				return unknownTemplateVersion(templateImage, pod, memberImages[pod])
			}
		}
		return nil
	}
	for _, pod := range pods {
		from, ok := ImageVersion(memberImages[pod])
		if !ok {
			continue
		}
		if err := CheckVersionPath(from, to); err != nil {
			return fmt.Errorf("the pod template's image %s cannot be rolled onto %s, which runs %s: %w", templateImage, pod, memberImages[pod], err)
		}
	}
	return nil
}

// CheckVersionPaths is CheckImagePath for one observation: the members not yet at the update revision are
// the ones a rollout would move, judged by the version they report (their image tag while they do not
// answer). It also refuses template flags the target version does not accept (checkTemplateFlags). The
// engine runs it itself before its first disruption, because a preview may have judged an older template
// (in the drop-in shape Check can run before the new template is applied) and the CLI has no Check at all.
func CheckVersionPaths(st ClusterState) error {
	members := make([]MemberState, 0, len(st.Members))
	for _, m := range st.Members {
		if m.Revision != st.UpdateRevision {
			members = append(members, m)
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Pod < members[j].Pod })
	if err := checkVersionsKnown(st, members); err != nil {
		if errors.Is(err, ErrBlocked) {
			return err // a hold: the version is told once the member's pod is back
		}
		return fmt.Errorf("%w: %w: %w", ErrBlocked, ErrVersionPath, err)
	}
	to, ok := TemplateVersion(st)
	if ok {
		for _, m := range members {
			from, byTag, known := MemberVersion(m)
			if !known {
				continue
			}
			if err := CheckVersionPath(from, to); err != nil {
				runs := fmt.Sprintf("runs %s (etcd %s by its own word)", m.Image, from)
				if byTag {
					runs = fmt.Sprintf("runs %s (not answering: version read from the tag)", m.Image)
				}
				return fmt.Errorf("%w: %w: the pod template's image %s cannot be rolled onto %s, which %s: %v", ErrBlocked, ErrVersionPath, st.TemplateImage, m.Pod, runs, err)
			}
		}
	}
	var v2 []string
	for _, m := range st.Members {
		if m.V2Enabled && m.Revision != st.UpdateRevision {
			v2 = append(v2, m.Pod)
		}
	}
	if err := checkV2Store(to, v2); ok && err != nil {
		return fmt.Errorf("%w: %w: %v", ErrBlocked, ErrVersionPath, err)
	}
	return checkTemplateFlags(st)
}

// checkTemplateFlags refuses template settings the version the members roll to does not accept. That version
// is the template image's tag; for an image without one, the version a member on the same image reports.
func checkTemplateFlags(st ClusterState) error {
	to, ok := TemplateVersion(st)
	if !ok {
		return nil
	}
	if err := CheckFlags(st.TemplateSettings, to); err != nil {
		return fmt.Errorf("%w: %w (%w): %w", ErrBlocked, ErrVersionPath, ErrFlagRefused, err)
	}
	return nil
}

// ErrVersionUnknown is wrapped (with ErrVersionPath) when a roll changes the members' image and the etcd
// version on one side of the change cannot be told: whether it crosses a minor version (a snapshot before
// the point of no return, etcd's version checks) is then unknown, and a guess is not made.
var ErrVersionUnknown = errors.New("etcd version cannot be told")

// checkVersionsKnown refuses a roll whose version change cannot be judged: the template's version cannot be
// told while it replaces a member's image, or a member to roll has no version anybody can tell (it does not
// answer and its image carries no tag) while the roll crosses a minor version for the others. members are
// the ones still to roll, in name order.
func checkVersionsKnown(st ClusterState, members []MemberState) error {
	to, ok := TemplateVersion(st)
	if !ok {
		for _, m := range members {
			if !m.PodExists {
				return podlessVersion(m)
			}
			if m.Image != st.TemplateImage {
				return unknownTemplateVersion(st.TemplateImage, m.Pod, m.Image)
			}
		}
		return nil
	}
	crosses := false
	for _, m := range members {
		if from, _, known := MemberVersion(m); known && from.MajorMinor() != to.MajorMinor() {
			crosses = true
		}
	}
	if cluster, known := ParseVersion(st.ClusterVersion); known && cluster.MajorMinor() != to.MajorMinor() {
		crosses = true
	}
	for _, m := range members {
		if _, _, known := MemberVersion(m); !known && crosses {
			if !m.PodExists {
				return podlessVersion(m)
			}
			return fmt.Errorf("%w: %s does not answer and its image %s carries no version tag, while the roll to etcd %s changes the minor version for the others: a member of another minor may not rejoin; bring %s up (or tag its image with its version) and run again",
				ErrVersionUnknown, m.Pod, m.Image, to, m.Pod)
		}
	}
	return nil
}

// podlessVersion holds a roll whose version change cannot be judged yet because member m has no pod (deleted,
// not recreated yet): the pod the StatefulSet controller recreates tells its version, so waiting cures it.
// Refusing it as untold (ErrVersionUnknown) failed runs that a look a moment later would have let through
// (the schedule checker's seeds 18226, 22728 and 24012 of the long mode: a member's pod deleted by someone
// else during a 3.5 -> 3.6 roll of images pinned by tag and digest).
func podlessVersion(m MemberState) error {
	return Blocked("%s has no pod, so its etcd version cannot be told yet; holding until the StatefulSet controller recreates it", m.Pod)
}

// unknownTemplateVersion is the refusal of a template image whose version cannot be told.
func unknownTemplateVersion(templateImage, pod, podImage string) error {
	return fmt.Errorf("%w: the pod template's image %s carries no version tag, so whether rolling %s off %s crosses a minor version cannot be told: tag the image with its version (etcd:v3.6.8@sha256:… keeps the digest pin) and run again",
		ErrVersionUnknown, templateImage, pod, podImage)
}

// JudgeProbes is the probe shapes of etcd container c that turn a roll's hiccup into an outage
// (internal/probes), as Observe judges the live template's into ClusterState.ProbeWarnings: a preview of a
// template about to be applied judges that one.
func JudgeProbes(c *corev1.Container) []ProbeFinding { return probes.Judge(c) }

// EtcdContainer picks the container that runs etcd: by name, then by command or image, else the only one.
func EtcdContainer(cs []corev1.Container) *corev1.Container {
	for i := range cs {
		if cs[i].Name == "etcd" {
			return &cs[i]
		}
	}
	for i := range cs {
		if (len(cs[i].Command) > 0 && path.Base(cs[i].Command[0]) == "etcd") || strings.Contains(cs[i].Image, "etcd") {
			return &cs[i]
		}
	}
	if len(cs) == 1 {
		return &cs[0]
	}
	return nil
}
