//go:build integration

// The harness's integration tests run against the cluster of `make cluster-up` (make test-harness brings it
// up). They fail, never skip, when it is not up.
package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// flavours are the two production shapes of tests/manifests. The mTLS one also runs with a readinessProbe
// on /readyz, so both readiness modes of the member daemon are exercised.
var flavours = []struct {
	name string
	spec harness.EtcdSpec
}{
	{"http", harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless"}},
	{"mtls", harness.EtcdSpec{Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer", TLS: true,
		Readiness: memberapi.ReadyOnProbe}},
}

func createEtcd(t *testing.T, spec harness.EtcdSpec) (*harness.Cluster, *harness.Etcd) {
	t.Helper()
	start := time.Now()
	c := harness.Connect(t)
	ns := c.Namespace(t)
	t.Logf("namespace %s ready in %s", ns, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start = time.Now()
	e, err := c.CreateEtcd(ctx, ns, spec)
	require.NoError(t, err)
	t.Logf("%s/%s: %d healthy members in %s", ns, e.Spec.Name, e.Spec.Replicas, time.Since(start).Round(time.Millisecond))
	return c, e
}

// Through client-go port-forward (the product's dialer) the etcd v3 client sees one leader and three voters.
func TestMembersReachableThroughPortForward(t *testing.T) {
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			c, e := createEtcd(t, f.spec)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dialer, err := memberdial.NewPortForward(c.Config)
			require.NoError(t, err)
			defer dialer.Close()

			leaders := map[uint64]int{}
			selfLeader := 0
			for i := range e.Spec.Replicas {
				hostport, err := dialer.Endpoint(ctx, e.Namespace, e.PodName(i), memberapi.DefaultClientPort)
				require.NoError(t, err)
				cli, err := e.NewClient(hostport)
				require.NoError(t, err)
				st, err := cli.Status(ctx, hostport)
				require.NoError(t, err, "status of %s through %s", e.PodName(i), hostport)
				leaders[st.Leader]++
				if st.Leader == st.Header.MemberId {
					selfLeader++
				}
				list, err := cli.MemberList(ctx)
				require.NoError(t, err)
				voters := 0
				for _, m := range list.Members {
					if !m.IsLearner {
						voters++
					}
				}
				assert.Equal(t, 3, voters, "voting members seen through %s", e.PodName(i))
				require.NoError(t, cli.Close())
			}
			assert.Len(t, leaders, 1, "every member names the same leader")
			assert.Equal(t, 1, selfLeader, "exactly one member is the leader")

			// kwok's Exec rule: `kubectl exec` runs etcdctl on this host against the member (with its
			// client certificate in mTLS mode).
			out, _, err := e.Exec(ctx, 1, "etcdctl", "endpoint", "health")
			require.NoError(t, err)
			assert.Contains(t, out, "is healthy")
		})
	}
}

// Deleting a pod brings its member back, with its data, with no manual step.
func TestDeletedPodComesBackWithItsData(t *testing.T) {
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			c, e := createEtcd(t, f.spec)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cli, err := e.Client(ctx)
			require.NoError(t, err)
			defer cli.Close()
			_, err = cli.Put(ctx, "before-delete", "kept")
			require.NoError(t, err)

			before, err := e.Member(ctx, 1)
			require.NoError(t, err)
			oldID, err := e.Status(ctx, 1)
			require.NoError(t, err)
			oldPod, err := e.Pod(ctx, 1)
			require.NoError(t, err)
			start := time.Now()
			require.NoError(t, c.Kube.CoreV1().Pods(e.Namespace).Delete(ctx, e.PodName(1), metav1.DeleteOptions{}))
			_, err = e.WaitPodRecreated(ctx, 1, oldPod.UID)
			require.NoError(t, err)
			t.Logf("%s deleted and back, Ready, in %s", e.PodName(1), time.Since(start).Round(time.Millisecond))

			after, err := e.Member(ctx, 1)
			require.NoError(t, err)
			assert.NotEqual(t, before.PID, after.PID, "a new process runs for the new pod")
			assert.Equal(t, before.DataDir, after.DataDir)
			require.NoError(t, e.WaitHealthy(ctx))
			newID, err := e.Status(ctx, 1)
			require.NoError(t, err)
			assert.Equal(t, oldID.MemberID, newID.MemberID, "the same etcd member, from its own data dir")

			// A serializable read is answered from the member's own store, not the leader's.
			one, err := e.Client(ctx, 1)
			require.NoError(t, err)
			defer one.Close()
			got, err := one.Get(ctx, "before-delete", clientv3.WithSerializable())
			require.NoError(t, err)
			require.Len(t, got.Kvs, 1, "the key written before the deletion")
			assert.Equal(t, "kept", string(got.Kvs[0].Value))
		})
	}
}

// A template change under partition 3 moves updateRevision and recreates nothing; partition 2 recreates
// exactly etcd-2, at updateRevision, with a restarted member process.
func TestPartitionGatesTheRoll(t *testing.T) {
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			_, e := createEtcd(t, f.spec)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			uids := podUIDs(ctx, t, e)
			members, err := e.Members(ctx)
			require.NoError(t, err)
			sts, err := e.StatefulSet(ctx)
			require.NoError(t, err)
			oldRev := sts.Status.UpdateRevision

			newRev, err := e.SetTemplateAnnotation(ctx, "example.com/config-hash", "2")
			require.NoError(t, err)
			assert.NotEqual(t, oldRev, newRev)
			// The controller deletes in the same sync that computes the revision; watch a while longer anyway.
			assert.Never(t, func() bool { return !assert.ObjectsAreEqual(uids, podUIDs(ctx, t, e)) },
				time.Second, 100*time.Millisecond, "no pod is recreated while partition = replicas")
			sts, err = e.StatefulSet(ctx)
			require.NoError(t, err)
			assert.Equal(t, int32(0), sts.Status.UpdatedReplicas)

			start := time.Now()
			require.NoError(t, e.SetPartition(ctx, 2))
			pod2, err := e.WaitPodRecreated(ctx, 2, uids[2])
			require.NoError(t, err)
			t.Logf("partition 2: %s recreated and Ready in %s", pod2.Name, time.Since(start).Round(time.Millisecond))
			assert.Equal(t, newRev, pod2.Labels[appsv1.ControllerRevisionHashLabelKey])
			after := podUIDs(ctx, t, e)
			assert.Equal(t, uids[:2], after[:2], "etcd-0 and etcd-1 are untouched")
			m2, err := e.Member(ctx, 2)
			require.NoError(t, err)
			assert.NotEqual(t, members[2].PID, m2.PID, "the member process of %s was restarted", pod2.Name)
			assert.Equal(t, string(pod2.UID), m2.PodUID)
			require.NoError(t, e.WaitRolledOut(ctx, time.Minute))
		})
	}
}

func podUIDs(ctx context.Context, t *testing.T, e *harness.Etcd) []types.UID {
	t.Helper()
	out := make([]types.UID, e.Spec.Replicas)
	for i := range out {
		p, err := e.Pod(ctx, i)
		require.NoError(t, err)
		out[i] = p.UID
	}
	return out
}
