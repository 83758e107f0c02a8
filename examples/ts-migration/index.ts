// A stack as the platform teams have it before migrating: the etcd StatefulSet applied with
// @pulumi/kubernetes and rolled by the Job-based EtcdRollingUpgrade class, with something that waits for the
// rollout through the class's public `job` member. Migrating changes only the import line below to
//     import { EtcdRollingUpgrade } from "pulumi-etcd-rollout";
// (README, "Migrating from the Job-based class"; tests/e2e/migration_test.go runs both).
import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import { EtcdRollingUpgrade } from "./old-etcd-rolling-upgrade";
import { etcdService, etcdStatefulSet } from "../shared/etcd";

const config = new pulumi.Config();
const namespace = config.require("namespace");
const podRevision = config.get("podRevision") ?? "1";

const provider = new k8s.Provider("cluster", { kubeconfig: config.require("kubeconfig") });
const svc = new k8s.core.v1.Service("etcd-headless", etcdService(namespace), { provider });
const stsArgs = etcdStatefulSet({ namespace, podRevision, nodeName: config.get("nodeName") });
const sts = new k8s.apps.v1.StatefulSet("etcd", stsArgs, { provider, dependsOn: svc });

const versionHash = crypto.createHash("sha256").update(JSON.stringify(stsArgs.spec)).digest("hex").slice(0, 16);

const upgrade = new EtcdRollingUpgrade("etcd", {
    stsName: "etcd",
    namespace,
    serviceName: "etcd-headless",
    versionHash,
    cooldownSeconds: 1,
    dependsOnSts: sts,
}, { provider, parent: sts });

// Something that must only change once the rollout is done.
const afterRollout = new k8s.core.v1.ConfigMap("after-rollout", {
    metadata: { name: "after-rollout", namespace },
    data: { podRevision },
}, { provider, dependsOn: [upgrade.job] });

export const afterRolloutName = afterRollout.metadata.name;
