"""The two call sites of the old TypeScript EtcdRollingUpgrade class, written in Python against
pulumi_etcd_rollout with the same arguments in snake_case (design: the users' old-job-rollout-design, 4.5):

  (a) the main etcd over plain HTTP: stsName "etcd", Service "etcd-headless";
  (b) a keyspace-etcd-group over mTLS: Service "<sts>-peer", the client files /var/lib/etcd-tls/{ca.crt,
      tls.crt,tls.key} of the Secret the group's pods mount.

Each applies its own StatefulSet with pulumi-kubernetes through an explicit provider (skipAwait annotated,
partition = replicas), passes it as depends_on_sts, and hands the rollout that provider with the StatefulSet
as parent. The rollout reaches the cluster through that provider only: no kubeconfig input.
"""
import hashlib
import json

import pulumi
import pulumi_kubernetes as k8s
from pulumi_etcd_rollout import EtcdRollingUpgrade

from etcd_manifests import etcd_service, etcd_statefulset

config = pulumi.Config()
pod_revision = config.get("podRevision") or "1"
node_name = config.get("nodeName")  # local cluster
pod_annotations = config.get_object("podAnnotations")  # local cluster: its fault modes
cooldown_seconds = config.get_int("cooldownSeconds")  # None: the component's default (30 s), as the old calls had


def sha1_json(value) -> str:
    """What the old stacks did with their version inputs: sha1(JSON.stringify(...))."""
    return hashlib.sha1(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


k8s_provider = k8s.Provider("cluster", kubeconfig=config.require("kubeconfig"))


def namespace_of(name: str):
    """The namespace itself (its metadata.name, as the old stacks passed it), or just its name when the
    namespace exists already (createNamespace false)."""
    if config.get_bool("createNamespace") is False:
        return name
    return k8s.core.v1.Namespace(name, metadata={"name": name},
                                 opts=pulumi.ResourceOptions(provider=k8s_provider)).metadata.name


# (a) The main etcd, plain HTTP (tidb-admin in production).
ns = namespace_of(config.require("namespace"))
etcd_svc = k8s.core.v1.Service("etcd-headless", **etcd_service("etcd", "etcd-headless", ns),
                               opts=pulumi.ResourceOptions(provider=k8s_provider))
etcd_args = etcd_statefulset("etcd", "etcd-headless", ns, pod_revision, node_name=node_name,
                             pod_annotations=pod_annotations)
etcd_sts = k8s.apps.v1.StatefulSet("etcd", **etcd_args,
                                   opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[etcd_svc]))

etcd = EtcdRollingUpgrade("etcd",
    sts_name="etcd",
    namespace=ns,
    service_name="etcd-headless",
    version_hash=pulumi.Output.from_input(etcd_args["spec"]["template"]).apply(sha1_json),
    cooldown_seconds=cooldown_seconds,
    depends_on_sts=etcd_sts,
    opts=pulumi.ResourceOptions(provider=k8s_provider, parent=etcd_sts))

# (b) A keyspace-etcd-group, client and peer mTLS (tidb-serverless in production), as InstallKeyspaceEtcdGroup
# applies it: the group's Secret <name>-cluster-secret (ca.crt, tls.crt, tls.key) is mounted at
# /var/lib/etcd-tls, and the rollout dials each member with those very files.
cluster_name = config.get("clusterName") or "freetier"
name = config.get("keyspaceGroup") or "keyspace-etcd-group-0"
keyspace_namespace = config.get("keyspaceNamespace")
namespace = namespace_of(keyspace_namespace) if keyspace_namespace else ns
svc = k8s.core.v1.Service(f"{cluster_name}-{name}-peer", **etcd_service(name, f"{name}-peer", namespace),
                          opts=pulumi.ResourceOptions(provider=k8s_provider))
group_args = etcd_statefulset(name, f"{name}-peer", namespace, pod_revision, tls_secret=f"{name}-cluster-secret",
                              node_name=node_name, pod_annotations=pod_annotations)
sts = k8s.apps.v1.StatefulSet(f"{cluster_name}-{name}", **group_args,
                              opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[svc]))

group = EtcdRollingUpgrade(f"{cluster_name}-{name}",
    sts_name=name,
    namespace=namespace,
    service_name=f"{name}-peer",
    tls={
        "ca_file": "/var/lib/etcd-tls/ca.crt",
        "cert_file": "/var/lib/etcd-tls/tls.crt",
        "key_file": "/var/lib/etcd-tls/tls.key",
    },
    version_hash=pulumi.Output.from_input(group_args["spec"]["template"]).apply(sha1_json),
    cooldown_seconds=cooldown_seconds,
    depends_on_sts=sts,
    opts=pulumi.ResourceOptions(provider=k8s_provider, parent=sts))

for key, rollout in (("etcd", etcd), ("keyspace", group)):
    pulumi.export(f"{key}UpdateRevision", rollout.update_revision)
    pulumi.export(f"{key}MembersRolled", rollout.members_rolled)
    pulumi.export(f"{key}LeaderTransfers", rollout.leader_transfers)
    pulumi.export(f"{key}UnplannedElections", rollout.unplanned_elections)
    pulumi.export(f"{key}FinishedAt", rollout.finished_at)
