// EtcdRollingUpgrade owning its StatefulSet: the component applies the manifest with the skipAwait annotation
// and partition = replicas forced, computes versionHash from the pod template, and rolls every template
// change one member at a time.
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import { EtcdRollingUpgrade } from "pulumi-etcd-rollout";
import { clientTLSFiles, etcdService, etcdStatefulSet } from "../shared/etcd"; // shared with examples/ts-dropin

const config = new pulumi.Config();
const namespace = config.require("namespace");
const podRevision = config.get("podRevision") ?? "1";

const provider = new k8s.Provider("cluster", { kubeconfig: config.require("kubeconfig") });
const createNamespace = config.getBoolean("createNamespace") ?? true;
const ns = createNamespace ? [new k8s.core.v1.Namespace(namespace, { metadata: { name: namespace } }, { provider })] : [];
const svc = new k8s.core.v1.Service("etcd-headless", etcdService(namespace), { provider, dependsOn: ns });
const nodeName = config.get("nodeName");
// tls: client and peer mTLS; the Secret etcd-cluster-secret must exist in the namespace.
const tls = config.getBoolean("tls") ?? false;
// etcdVersion ("3.6.8" when unset) and extraArgs (more etcd flags): a version change is a roll like any other.
const etcdVersion = config.get("etcdVersion");
const extraArgs = config.getObject<string[]>("extraArgs");

const upgrade = new EtcdRollingUpgrade("etcd", {
    stsName: config.get("stsName") ?? "etcd",
    namespace,
    serviceName: "etcd-headless",
    cooldownSeconds: config.getNumber("cooldownSeconds") ?? 1,
    readyTimeoutSeconds: config.getNumber("readyTimeoutSeconds"),
    healthTimeoutSeconds: config.getNumber("healthTimeoutSeconds"),
    // "revert" (default): a member that fails on a new template is brought back on the old one; "stop": left as is.
    onFailure: config.get("onFailure"),
    statefulSet: etcdStatefulSet({ namespace, podRevision, nodeName, tls, etcdVersion, extraArgs,
        podAnnotations: config.getObject<{ [key: string]: string }>("podAnnotations") }), // local cluster
    ...(tls ? { tls: clientTLSFiles } : {}),
}, { provider, dependsOn: svc });

export const versionHash = upgrade.versionHash;
export const updateRevision = upgrade.updateRevision;
export const membersRolled = upgrade.membersRolled;
export const leaderTransfers = upgrade.leaderTransfers;
export const unplannedElections = upgrade.unplannedElections;
export const finishedAt = upgrade.finishedAt;
