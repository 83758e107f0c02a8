// The old call site of the TypeScript EtcdRollingUpgrade class, unchanged but for its import: the
// StatefulSet is applied with @pulumi/kubernetes through an explicit provider (skipAwait annotated,
// partition = replicas), and the rollout gets that provider and the StatefulSet as its parent.
import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import { EtcdRollingUpgrade } from "pulumi-etcd-rollout"; // was: import { EtcdRollingUpgrade } from "./etcd-rolling-upgrade";
import { etcdService, etcdStatefulSet } from "../shared/etcd"; // shared with examples/ts-managed

const config = new pulumi.Config();
const namespace = config.require("namespace");
const podRevision = config.get("podRevision") ?? "1";
// tls: client and peer mTLS; the Secret etcd-cluster-secret must exist in the namespace.
const tls = config.getBoolean("tls") ?? false;
const createNamespace = config.getBoolean("createNamespace") ?? true;

const provider = new k8s.Provider("cluster", { kubeconfig: config.require("kubeconfig") });
const ns = createNamespace ? [new k8s.core.v1.Namespace(namespace, { metadata: { name: namespace } }, { provider })] : [];
const svc = new k8s.core.v1.Service("etcd-headless", etcdService(namespace), { provider, dependsOn: ns });
const podAnnotations = config.getObject<{ [key: string]: string }>("podAnnotations"); // local cluster
const stsArgs = etcdStatefulSet({ namespace, podRevision, tls, nodeName: config.get("nodeName"), podAnnotations });
const sts = new k8s.apps.v1.StatefulSet("etcd", stsArgs, { provider, dependsOn: svc });

// The old stacks hash the pod template; any change to it is a new version.
const versionHash = crypto.createHash("sha256").update(JSON.stringify(stsArgs.spec)).digest("hex").slice(0, 16);

const etcd = new EtcdRollingUpgrade("etcd", {
    stsName: config.get("stsName") ?? "etcd",
    namespace,
    serviceName: "etcd-headless",
    versionHash,
    cooldownSeconds: config.getNumber("cooldownSeconds") ?? 1,
    readyTimeoutSeconds: config.getNumber("readyTimeoutSeconds"),
    healthTimeoutSeconds: config.getNumber("healthTimeoutSeconds"),
    dependsOnSts: sts,
    ...(tls ? {
        tls: {
            caFile: "/var/lib/etcd-tls/ca.crt",
            certFile: "/var/lib/etcd-tls/client.crt",
            keyFile: "/var/lib/etcd-tls/client.key",
        },
    } : {}),
}, { provider, parent: sts });

export const updateRevision = etcd.updateRevision;
export const membersRolled = etcd.membersRolled;
export const leaderTransfers = etcd.leaderTransfers;
export const unplannedElections = etcd.unplannedElections;
export const finishedAt = etcd.finishedAt;
