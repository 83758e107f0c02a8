package provider

import (
	"context"
	"strings"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// lastRun is the state of a rollout whose last run rolled etcd-2 to rev-a: history Read must keep.
func lastRun(overrides map[string]property.Value) property.Map {
	m := state(nil).AsMap()
	m["membersRolled"] = property.New([]property.Value{property.New("etcd-2")})
	m["leaderTransfers"] = property.New(1.0)
	for k, v := range overrides {
		m[k] = v
	}
	return property.NewMap(m)
}

// outdated is a locked cluster at updateRevision rev-b whose members from ordinal `from` up are still at rev-a.
func outdated(from int) rollout.ClusterState {
	s := healthyState("rev-b", 0)
	for i := from; i < len(s.Members); i++ {
		s.Members[i].Revision = "rev-a"
	}
	return s
}

func lowered(s rollout.ClusterState, partition int) rollout.ClusterState {
	s.Partition = partition
	return s
}

func TestRefreshRecordsWhatIsLive(t *testing.T) {
	tests := []struct {
		name         string
		uid          string
		live         rollout.ClusterState
		wantComplete bool
		wantRevision string
		wantUID      string
		wantPlan     []string // every line must be in the plan, in this order
		wantWarning  string
	}{
		{name: "every member at updateRevision, partition locked", uid: "uid-1", live: healthyState("rev-a", 0),
			wantComplete: true, wantRevision: "rev-a", wantUID: "uid-1"},
		{name: "members not at updateRevision", uid: "uid-1", live: outdated(1),
			wantRevision: "rev-b", wantUID: "uid-1", wantPlan: []string{"roll etcd-2", "roll etcd-1", "re-lock partition at 3"},
			wantWarning: "2 member(s) not at updateRevision rev-b (etcd-1, etcd-2)"},
		{name: "partition lowered by someone else", uid: "uid-1", live: lowered(healthyState("rev-a", 0), 1),
			wantRevision: "rev-a", wantUID: "uid-1", wantPlan: []string{"lock partition at 3"},
			wantWarning: "partition 1 is below replicas 3"},
		{name: "partition lowered and members rolling on their own", uid: "uid-1", live: lowered(outdated(1), 2),
			wantRevision: "rev-b", wantUID: "uid-1", wantPlan: []string{"lock partition at 3", "roll etcd-2"},
			wantWarning: "partition 2 is below replicas 3"},
		{name: "partition lowered while the controller recreates a pod", uid: "uid-1", live: func() rollout.ClusterState {
			s := lowered(outdated(2), 2)
			s.Members[2] = rollout.MemberState{Ordinal: 2, Pod: "etcd-2", Problem: "pod does not exist"}
			return s
		}(), wantRevision: "rev-b", wantUID: "uid-1", wantPlan: []string{"lock partition at 3", "blocked: rollout blocked"},
			wantWarning: "partition 2 is below replicas 3"},
		{name: "member at updateRevision but not healthy", uid: "uid-1", live: func() rollout.ClusterState {
			s := healthyState("rev-a", 0)
			s.Members[2].Healthy, s.Members[2].Problem = false, "not caught up"
			return s
		}(), wantRevision: "rev-a", wantUID: "uid-1", wantPlan: []string{"wait for etcd-2 to be healthy"}},
		{name: "StatefulSet with another UID: state kept", uid: "uid-other", live: outdated(0),
			wantComplete: true, wantRevision: "rev-a", wantUID: "uid-1",
			wantWarning: "has UID uid-other, but this rollout was run on UID uid-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := recordLogs(t)
			f := &fakeCluster{uid: tt.uid, state: tt.live}
			resp, err := server(t, f.deps()).Read(p.ReadRequest{Urn: rolloutURN, ID: "db/etcd",
				Properties: lastRun(nil), Inputs: inputs(nil)})
			require.NoError(t, err)

			assert.Equal(t, "db/etcd", resp.ID, "the resource is kept")
			out := resp.Properties
			assert.Equal(t, tt.wantComplete, out.Get("complete").AsBool())
			assert.Equal(t, tt.wantRevision, out.Get("updateRevision").AsString())
			assert.Equal(t, tt.wantUID, out.Get("statefulSetUid").AsString())
			plan := planOf(out)
			if len(tt.wantPlan) == 0 {
				assert.Empty(t, plan)
			} else {
				assert.True(t, inOrder(plan, tt.wantPlan), "plan %q should hold %q in order", plan, tt.wantPlan)
				assert.True(t, strings.HasPrefix(plan[0], tt.wantPlan[0]), "plan %q starts with %q", plan, tt.wantPlan[0])
			}
			// The last run's history is not something Read observes.
			assert.Equal(t, []string{"etcd-2"}, stringsOf(out.Get("membersRolled")))
			assert.Equal(t, 1.0, out.Get("leaderTransfers").AsNumber())
			assert.Equal(t, "2026-11-29T12:00:00Z", out.Get("finishedAt").AsString())

			assert.Zero(t, f.runs, "a refresh never runs the rollout")
			assert.True(t, resp.Inputs.Get("kubeconfig").Secret(), "the kubeconfig input stays a secret")
			assert.Equal(t, "v1", resp.Inputs.Get("versionHash").AsString(), "the program's inputs are kept")
			if tt.wantWarning != "" {
				assert.True(t, containsAny(logs.messages(), tt.wantWarning), "warning %q in %q", tt.wantWarning, logs.messages())
			}
			for _, m := range logs.messages() {
				assert.NotContains(t, m, "/tmp/kubeconfig")
			}
		})
	}
}

// A StatefulSet that is gone is answered with an empty ID, which makes the engine drop the resource from the
// state, as it does for any deleted Kubernetes object.
func TestRefreshDropsARolloutWhoseStatefulSetIsGone(t *testing.T) {
	logs := recordLogs(t)
	for name, deps := range map[string]func(*fakeCluster) Deps{
		"by UID lookup":            (*fakeCluster).deps,
		"by the facts Check reads": func(f *fakeCluster) Deps { return withFacts(f, etcdStatefulSet()) },
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeCluster{uid: "", state: healthyState("rev-a", 0)}
			resp, err := server(t, deps(f)).Read(p.ReadRequest{Urn: rolloutURN, ID: "db/etcd", Properties: lastRun(nil), Inputs: inputs(nil)})
			require.NoError(t, err)
			assert.Empty(t, resp.ID)
			assert.Zero(t, f.runs)
			assert.True(t, containsAny(logs.messages(), "StatefulSet db/etcd no longer exists"))
		})
	}
}

func TestRefreshFailsWhenTheClusterCannotBeRead(t *testing.T) {
	f := &fakeCluster{uid: "uid-1", lookupErr: assert.AnError}
	_, err := server(t, f.deps()).Read(p.ReadRequest{Urn: rolloutURN, ID: "db/etcd", Properties: lastRun(nil), Inputs: inputs(nil)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading StatefulSet db/etcd")
}

// etcdStatefulSet is a live StatefulSet as an import finds it; args are the etcd container's arguments.
func etcdStatefulSet(args ...string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(int32(3)),
			ServiceName: "etcd-headless",
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(3))}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.5-0", Command: []string{"etcd"}, Args: args},
			}}},
		},
		Status: appsv1.StatefulSetStatus{UpdateRevision: "etcd-7c9f", CurrentRevision: "etcd-7c9f"},
	}
}

// withFacts serves sts (with the fake's UID; none when the fake has no UID) to Read's StatefulSet lookup.
func withFacts(f *fakeCluster, sts *appsv1.StatefulSet) Deps {
	deps := f.deps()
	deps.ReadFacts = func(context.Context, *rest.Config, string, string) (clusterFacts, error) {
		if f.uid == "" {
			return clusterFacts{}, nil
		}
		s := sts.DeepCopy()
		s.UID = types.UID(f.uid)
		return clusterFacts{StatefulSet: s}, nil
	}
	return deps
}

func TestImport(t *testing.T) {
	tests := []struct {
		name       string
		id         string
		uid        string
		sts        *appsv1.StatefulSet
		live       rollout.ClusterState
		wantInputs map[string]any
		wantPlan   []string
		wantErr    string
	}{
		{name: "plain HTTP cluster", id: "db/etcd", uid: "uid-9",
			sts:  etcdStatefulSet("--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://$(POD_NAME).etcd-headless:2379"),
			live: healthyState("etcd-7c9f", 1),
			wantInputs: map[string]any{"stsName": "etcd", "namespace": "db", "serviceName": "etcd-headless",
				"versionHash": "etcd-7c9f", "tls": nil, "clientPort": nil}},
		{name: "mTLS cluster on another port", id: "db/etcd", uid: "uid-9",
			sts: etcdStatefulSet("--listen-client-urls", "https://0.0.0.0:2389", "--cert-file=/var/lib/etcd-tls/tls.crt",
				"--key-file=/var/lib/etcd-tls/tls.key", "--trusted-ca-file=/var/lib/etcd-tls/ca.crt"),
			live: healthyState("etcd-7c9f", 1),
			wantInputs: map[string]any{"serviceName": "etcd-headless", "clientPort": 2389.0,
				"tls": map[string]string{"caFile": "/var/lib/etcd-tls/ca.crt", "certFile": "/var/lib/etcd-tls/tls.crt", "keyFile": "/var/lib/etcd-tls/tls.key"}}},
		{name: "mTLS cluster started by a shell script", id: "db/etcd", uid: "uid-9",
			sts: func() *appsv1.StatefulSet {
				s := etcdStatefulSet()
				c := &s.Spec.Template.Spec.Containers[0]
				c.Args = nil
				c.Command = []string{"/bin/sh", "-c", "exec etcd --name ${HOSTNAME} --listen-client-urls https://0.0.0.0:2389 " +
					"--cert-file=/tls/tls.crt --key-file /tls/tls.key --trusted-ca-file='/tls/ca.crt'"}
				return s
			}(),
			live: healthyState("etcd-7c9f", 1),
			wantInputs: map[string]any{"clientPort": 2389.0,
				"tls": map[string]string{"caFile": "/tls/ca.crt", "certFile": "/tls/tls.crt", "keyFile": "/tls/tls.key"}}},
		{name: "members outdated at import", id: "db/etcd", uid: "uid-9", sts: etcdStatefulSet(),
			live: outdated(2), wantInputs: map[string]any{"versionHash": "etcd-7c9f"}, wantPlan: []string{"roll etcd-2"}},
		{name: "not namespace/name", id: "etcd", uid: "uid-9", sts: etcdStatefulSet(), wantErr: "the ID of a Rollout is <namespace>/<StatefulSet name>"},
		{name: "too many segments", id: "db/etcd/x", uid: "uid-9", sts: etcdStatefulSet(), wantErr: "not \"db/etcd/x\""},
		{name: "StatefulSet not found", id: "db/etcd", uid: "", sts: etcdStatefulSet(), wantErr: "nothing to import"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{uid: tt.uid, state: tt.live}
			resp, err := server(t, withFacts(f, tt.sts)).Read(p.ReadRequest{Urn: rolloutURN, ID: tt.id})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.id, resp.ID)
			for k, want := range tt.wantInputs {
				got, ok := resp.Inputs.GetOk(k)
				if want == nil {
					assert.False(t, ok && !got.IsNull(), "input %s should be unset, is %v", k, got)
					continue
				}
				require.True(t, ok, "input %s", k)
				if m, isMap := want.(map[string]string); isMap {
					for mk, mv := range m {
						assert.Equal(t, mv, got.AsMap().Get(mk).AsString(), "%s.%s", k, mk)
					}
					continue
				}
				switch w := want.(type) {
				case string:
					assert.Equal(t, w, got.AsString(), "input %s", k)
				case float64:
					assert.Equal(t, w, got.AsNumber(), "input %s", k)
				}
			}
			_, hasKubeconfig := resp.Inputs.GetOk("kubeconfig")
			assert.False(t, hasKubeconfig)

			out := resp.Properties
			assert.Equal(t, "uid-9", out.Get("statefulSetUid").AsString())
			assert.Equal(t, len(tt.wantPlan) == 0, out.Get("complete").AsBool())
			assert.True(t, inOrder(planOf(out), tt.wantPlan), "plan %q should hold %q", planOf(out), tt.wantPlan)
			assert.Empty(t, stringsOf(out.Get("membersRolled")), "an import rolled nothing")
			assert.Zero(t, f.runs, "an import never runs the rollout")
			require.Len(t, f.configs, 1)
			assert.Equal(t, "etcd-headless", f.configs[0].ServiceName, "members are observed through the live governing Service")
		})
	}
}

func TestImportedInputsPassCheck(t *testing.T) {
	f := &fakeCluster{uid: "uid-9", state: healthyState("etcd-7c9f", 0)}
	s := server(t, withFacts(f, etcdStatefulSet("--listen-client-urls=http://0.0.0.0:2379")))
	read, err := s.Read(p.ReadRequest{Urn: rolloutURN, ID: "db/etcd"})
	require.NoError(t, err)
	// `pulumi import` checks the inputs it read against themselves; a failure there is a provider bug.
	checked, err := s.Check(p.CheckRequest{Urn: rolloutURN, State: read.Inputs, Inputs: read.Inputs})
	require.NoError(t, err)
	assert.Empty(t, checked.Failures)
}

// inOrder says whether every line of want starts a line of plan, in the same order.
func inOrder(plan, want []string) bool {
	i := 0
	for _, line := range plan {
		if i < len(want) && strings.HasPrefix(line, want[i]) {
			i++
		}
	}
	return i == len(want)
}

func containsAny(msgs []string, part string) bool {
	for _, m := range msgs {
		if strings.Contains(m, part) {
			return true
		}
	}
	return false
}
