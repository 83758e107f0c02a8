"""The etcd Service and StatefulSet, as the platform's production manifests define them. Lines marked
"local cluster" are what the project's test cluster (make cluster-up) needs on top: its opt-in label for a real
etcd member behind the pod, and its one node (it runs no scheduler)."""

NAME = "etcd"
SERVICE_NAME = "etcd-headless"
REPLICAS = 3


def etcd_service(namespace: str) -> dict:
    return {
        "metadata": {"name": SERVICE_NAME, "namespace": namespace, "labels": {"app.kubernetes.io/name": NAME}},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"app.kubernetes.io/name": NAME},
            "ports": [
                {"name": "client", "port": 2379, "targetPort": "client"},
                {"name": "peer", "port": 2380, "targetPort": "peer"},
            ],
        },
    }


def etcd_statefulset(namespace: str, pod_revision: str, node_name: str = "kwok-node-0") -> dict:
    """The manifest EtcdRollingUpgrade applies; it adds the skipAwait annotation and the partition lock itself."""
    peers = ",".join(f"{NAME}-{i}=http://{NAME}-{i}.{SERVICE_NAME}.$(POD_NAMESPACE).svc:2380" for i in range(REPLICAS))
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": NAME, "namespace": namespace, "labels": {"app.kubernetes.io/name": NAME}},
        "spec": {
            "serviceName": SERVICE_NAME,
            "replicas": REPLICAS,
            "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {
                "metadata": {
                    "labels": {
                        "app.kubernetes.io/name": NAME,
                        "etcd-rollout.test/member": "true",  # local cluster
                    },
                    "annotations": {
                        "etcd-rollout.test/etcd-version": "3.6",  # local cluster
                        "example.etcd-rollout/pod-revision": pod_revision,
                    },
                },
                "spec": {
                    "nodeName": node_name,  # local cluster
                    "terminationGracePeriodSeconds": 30,
                    "automountServiceAccountToken": False,
                    "containers": [{
                        "name": "etcd",
                        "image": "registry.k8s.io/etcd:3.6.8-0",
                        "command": ["etcd"],
                        "args": [
                            "--name=$(POD_NAME)",
                            "--data-dir=/var/lib/etcd/data",
                            "--listen-client-urls=http://0.0.0.0:2379",
                            f"--advertise-client-urls=http://$(POD_NAME).{SERVICE_NAME}.$(POD_NAMESPACE).svc:2379",
                            "--listen-peer-urls=http://0.0.0.0:2380",
                            f"--initial-advertise-peer-urls=http://$(POD_NAME).{SERVICE_NAME}.$(POD_NAMESPACE).svc:2380",
                            "--listen-metrics-urls=http://0.0.0.0:2381",
                            f"--initial-cluster={peers}",
                            "--initial-cluster-state=new",
                            f"--initial-cluster-token={NAME}",
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
                        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
                    }],
                },
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    }
