"""EtcdRollingUpgrade from Python, owning its StatefulSet and reaching the cluster through its own kubeconfig
input (no kubernetes provider passed): it applies the manifest locked, computes versionHash from the pod
template, and rolls every template change one member at a time."""
import pulumi
import pulumi_kubernetes as k8s
from pulumi_etcd_rollout import EtcdRollingUpgrade

from etcd import etcd_service, etcd_statefulset

config = pulumi.Config()
kubeconfig = config.require("kubeconfig")
namespace = config.require("namespace")
pod_revision = config.get("podRevision") or "1"
node_name = config.get("nodeName") or "kwok-node-0"

# The Service is plain pulumi-kubernetes; the StatefulSet is the component's own child.
cluster = k8s.Provider("cluster", kubeconfig=kubeconfig)
depends = []
if config.get_bool("createNamespace") is not False:
    depends.append(k8s.core.v1.Namespace(namespace, metadata={"name": namespace},
                                         opts=pulumi.ResourceOptions(provider=cluster)))
service = k8s.core.v1.Service("etcd-headless", **etcd_service(namespace),
                              opts=pulumi.ResourceOptions(provider=cluster, depends_on=depends))

etcd = EtcdRollingUpgrade(
    "etcd",
    sts_name=config.get("stsName") or "etcd",
    namespace=namespace,
    service_name="etcd-headless",
    cooldown_seconds=1,
    kubeconfig=kubeconfig,
    stateful_set=etcd_statefulset(namespace, pod_revision, node_name),
    opts=pulumi.ResourceOptions(depends_on=[service]),
)

pulumi.export("versionHash", etcd.version_hash)
pulumi.export("updateRevision", etcd.update_revision)
pulumi.export("membersRolled", etcd.members_rolled)
pulumi.export("leaderTransfers", etcd.leader_transfers)
pulumi.export("unplannedElections", etcd.unplanned_elections)
pulumi.export("finishedAt", etcd.finished_at)
