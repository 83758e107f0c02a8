// The etcd Service and StatefulSet, as the platform's production manifests define them; shared by
// examples/ts-dropin and examples/ts-managed (copy this folder along with either). Lines marked "local cluster"
// are what the project's test cluster (make cluster-up) needs on top: its opt-in label for a
// real etcd member behind the pod, and its one node (it runs no scheduler).
import * as k8s from "@pulumi/kubernetes";

const name = "etcd";
const serviceName = "etcd-headless";
const replicas = 3;

export interface EtcdOptions {
    namespace: string;
    /** Any change to this pod-template annotation rolls the members. */
    podRevision: string;
    /** Client and peer mTLS with the certificates of Secret etcd-cluster-secret mounted at /var/lib/etcd-tls. */
    tls?: boolean;
    nodeName?: string;
    /** Extra pod-template annotations: the local cluster reads its fault modes from them (start-delay,
     *  serve-delay, crash-after; see README's "Local cluster"). */
    podAnnotations?: { [key: string]: string };
    /** The etcd release the members run, as registry.k8s.io/etcd tags it without the "-0" suffix; default
     *  "3.6.8". Changing it is a version change, which the rollout checks and previews like any other roll. */
    etcdVersion?: string;
    /** More etcd flags after the ones above, e.g. "--feature-gates=...": the rollout checks each against
     *  the target version before anything restarts. */
    extraArgs?: string[];
}

/** The minor ("3.6") of an etcd release ("3.6.8"): the local cluster chooses the binary by it. */
function minorOf(version: string): string {
    return version.split(".").slice(0, 2).join(".");
}

/** The rollout's client certificate files where the tls StatefulSet mounts Secret etcd-cluster-secret. */
export const clientTLSFiles = {
    caFile: "/var/lib/etcd-tls/ca.crt",
    certFile: "/var/lib/etcd-tls/client.crt",
    keyFile: "/var/lib/etcd-tls/client.key",
};

export function etcdService(namespace: string): k8s.core.v1.ServiceArgs {
    return {
        metadata: { name: serviceName, namespace, labels: { "app.kubernetes.io/name": name } },
        spec: {
            clusterIP: "None",
            publishNotReadyAddresses: true,
            selector: { "app.kubernetes.io/name": name },
            ports: [
                { name: "client", port: 2379, targetPort: "client" },
                { name: "peer", port: 2380, targetPort: "peer" },
            ],
        },
    };
}

export function etcdStatefulSet(o: EtcdOptions): k8s.apps.v1.StatefulSetArgs {
    const scheme = o.tls ? "https" : "http";
    const etcdVersion = o.etcdVersion ?? "3.6.8";
    const peers = [0, 1, 2].map(i => `${name}-${i}=${scheme}://${name}-${i}.${serviceName}.$(POD_NAMESPACE).svc:2380`);
    const tlsArgs = o.tls ? [
        "--client-cert-auth",
        "--trusted-ca-file=/var/lib/etcd-tls/ca.crt",
        "--cert-file=/var/lib/etcd-tls/server.crt",
        "--key-file=/var/lib/etcd-tls/server.key",
        "--peer-client-cert-auth",
        "--peer-trusted-ca-file=/var/lib/etcd-tls/ca.crt",
        "--peer-cert-file=/var/lib/etcd-tls/peer.crt",
        "--peer-key-file=/var/lib/etcd-tls/peer.key",
    ] : [];
    return {
        metadata: {
            name, namespace: o.namespace, labels: { "app.kubernetes.io/name": name },
            // pulumi-kubernetes must not wait for the roll: the partition lock below holds it back.
            annotations: { "pulumi.com/skipAwait": "true" },
        },
        spec: {
            serviceName,
            replicas,
            podManagementPolicy: "OrderedReady",
            // Locked: a template change rolls nothing until EtcdRollingUpgrade lowers the partition.
            updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: replicas } },
            selector: { matchLabels: { "app.kubernetes.io/name": name } },
            template: {
                metadata: {
                    labels: {
                        "app.kubernetes.io/name": name,
                        "etcd-rollout.test/member": "true", // local cluster
                    },
                    annotations: {
                        "etcd-rollout.test/etcd-version": minorOf(etcdVersion), // local cluster
                        "example.etcd-rollout/pod-revision": o.podRevision,
                        ...(o.podAnnotations ?? {}), // local cluster
                    },
                },
                spec: {
                    nodeName: o.nodeName ?? "kwok-node-0", // local cluster
                    terminationGracePeriodSeconds: 30,
                    automountServiceAccountToken: false,
                    containers: [{
                        name: "etcd",
                        image: `registry.k8s.io/etcd:${etcdVersion}-0`,
                        command: ["etcd"],
                        args: [
                            "--name=$(POD_NAME)",
                            "--data-dir=/var/lib/etcd/data",
                            `--listen-client-urls=${scheme}://0.0.0.0:2379`,
                            `--advertise-client-urls=${scheme}://$(POD_NAME).${serviceName}.$(POD_NAMESPACE).svc:2379`,
                            `--listen-peer-urls=${scheme}://0.0.0.0:2380`,
                            `--initial-advertise-peer-urls=${scheme}://$(POD_NAME).${serviceName}.$(POD_NAMESPACE).svc:2380`,
                            "--listen-metrics-urls=http://0.0.0.0:2381",
                            `--initial-cluster=${peers.join(",")}`,
                            "--initial-cluster-state=new",
                            `--initial-cluster-token=${name}`,
                            ...tlsArgs,
                            ...(o.extraArgs ?? []),
                        ],
                        env: [
                            { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                            { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
                        ],
                        ports: [
                            { name: "client", containerPort: 2379 },
                            { name: "peer", containerPort: 2380 },
                            { name: "metrics", containerPort: 2381 },
                        ],
                        volumeMounts: [
                            { name: "data", mountPath: "/var/lib/etcd" },
                            ...(o.tls ? [{ name: "etcd-tls", mountPath: "/var/lib/etcd-tls", readOnly: true }] : []),
                        ],
                    }],
                    volumes: o.tls ? [{ name: "etcd-tls", secret: { secretName: `${name}-cluster-secret` } }] : undefined,
                },
            },
            volumeClaimTemplates: [{
                metadata: { name: "data" },
                spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
            }],
        },
    };
}
