"""The Service and StatefulSet of one etcd cluster, as the platform's production manifests define them, for
the two call sites in __main__.py: the Python counterpart of examples/shared/etcd.ts, with the cluster's name,
its governing Service and its TLS Secret as parameters (the main etcd and each keyspace-etcd-group differ in
exactly those). Lines marked "local cluster" are what the project's test cluster (make cluster-up) needs on
top: its opt-in label for a real etcd member behind the pod, and its one node (it runs no scheduler).

The StatefulSet is returned as pulumi-kubernetes arguments (metadata and spec), already in the shape the old
Job-based class required: pulumi.com/skipAwait, and updateStrategy.rollingUpdate.partition = replicas.
"""
from typing import Mapping, Optional

IMAGE = "registry.k8s.io/etcd:3.6.8-0"
REPLICAS = 3
TLS_DIR = "/var/lib/etcd-tls"


def etcd_service(name: str, service_name: str, namespace: str) -> dict:
    """The headless Service that governs the StatefulSet and gives every member its DNS name."""
    return {
        "metadata": {"name": service_name, "namespace": namespace, "labels": {"app.kubernetes.io/name": name}},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"app.kubernetes.io/name": name},
            "ports": [
                {"name": "client", "port": 2379, "targetPort": "client"},
                {"name": "peer", "port": 2380, "targetPort": "peer"},
            ],
        },
    }


def etcd_statefulset(name: str, service_name: str, namespace: str, pod_revision: str,
                     tls_secret: Optional[str] = None, node_name: Optional[str] = None,
                     pod_annotations: Optional[Mapping[str, str]] = None) -> dict:
    """The StatefulSet of a 3-member etcd. With tls_secret, clients and peers speak mTLS with the certificates
    of that Secret mounted at /var/lib/etcd-tls. Any change of pod_revision (a pod-template annotation) is a
    new template, and so a new revision to roll."""
    scheme = "https" if tls_secret else "http"
    peers = ",".join(f"{name}-{i}={scheme}://{name}-{i}.{service_name}.$(POD_NAMESPACE).svc:2380"
                     for i in range(REPLICAS))
    tls_args = [
        "--client-cert-auth",
        f"--trusted-ca-file={TLS_DIR}/ca.crt",
        f"--cert-file={TLS_DIR}/server.crt",
        f"--key-file={TLS_DIR}/server.key",
        "--peer-client-cert-auth",
        f"--peer-trusted-ca-file={TLS_DIR}/ca.crt",
        f"--peer-cert-file={TLS_DIR}/peer.crt",
        f"--peer-key-file={TLS_DIR}/peer.key",
    ] if tls_secret else []
    mounts = [{"name": "data", "mountPath": "/var/lib/etcd"}]
    pod_spec = {
        "nodeName": node_name or "kwok-node-0",  # local cluster
        "terminationGracePeriodSeconds": 30,
        "automountServiceAccountToken": False,
        "containers": [{
            "name": "etcd",
            "image": IMAGE,
            "command": ["etcd"],
            "args": [
                "--name=$(POD_NAME)",
                "--data-dir=/var/lib/etcd/data",
                f"--listen-client-urls={scheme}://0.0.0.0:2379",
                f"--advertise-client-urls={scheme}://$(POD_NAME).{service_name}.$(POD_NAMESPACE).svc:2379",
                f"--listen-peer-urls={scheme}://0.0.0.0:2380",
                f"--initial-advertise-peer-urls={scheme}://$(POD_NAME).{service_name}.$(POD_NAMESPACE).svc:2380",
                "--listen-metrics-urls=http://0.0.0.0:2381",
                f"--initial-cluster={peers}",
                "--initial-cluster-state=new",
                f"--initial-cluster-token={name}",
                *tls_args,
            ],
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            ],
            "ports": [
                {"name": "client", "containerPort": 2379},
                {"name": "peer", "containerPort": 2380},
                {"name": "metrics", "containerPort": 2381},
            ],
            "volumeMounts": mounts,
        }],
    }
    if tls_secret:
        mounts.append({"name": "etcd-tls", "mountPath": TLS_DIR, "readOnly": True})
        pod_spec["volumes"] = [{"name": "etcd-tls", "secret": {"secretName": tls_secret}}]
    return {
        "metadata": {
            "name": name, "namespace": namespace, "labels": {"app.kubernetes.io/name": name},
            # pulumi-kubernetes must not wait for the roll: the partition lock below holds it back.
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "serviceName": service_name,
            "replicas": REPLICAS,
            "podManagementPolicy": "OrderedReady",
            # Locked: a template change rolls nothing until EtcdRollingUpgrade lowers the partition.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": REPLICAS}},
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {
                    "labels": {
                        "app.kubernetes.io/name": name,
                        "etcd-rollout.test/member": "true",  # local cluster
                    },
                    "annotations": {
                        "etcd-rollout.test/etcd-version": "3.6",  # local cluster
                        "example.etcd-rollout/pod-revision": pod_revision,
                        **(pod_annotations or {}),  # local cluster: its fault modes
                    },
                },
                "spec": pod_spec,
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    }
