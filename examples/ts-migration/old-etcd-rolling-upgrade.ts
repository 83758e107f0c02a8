// A stand-in of the Job-based EtcdRollingUpgrade class that stacks ran before pulumi-etcd-rollout: the same
// constructor, options and public `job` member, and the same children under the same Kubernetes names
// (ServiceAccount, Role and RoleBinding `${stsName}-rollout`, ConfigMaps `${stsName}-rollout-config-<hash8>`
// and `etcd-rollout-script`, Job `${stsName}-rollout-<hash8>`), so that a stack built with it is what the
// migration starts from. Only the script differs: the local cluster runs no containers (kwok completes a
// Job's pod), so the stand-in ships a placeholder instead of the users' rollout.sh.
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";

export interface EtcdTLSConfig {
    caFile: string;
    certFile: string;
    keyFile: string;
}

export interface EtcdRollingUpgradeArgs {
    stsName: string;
    namespace: pulumi.Input<string>;
    serviceName: string;
    clientPort?: number;
    tls?: EtcdTLSConfig;
    versionHash: pulumi.Input<string>;
    cooldownSeconds?: number;
    readyTimeoutSeconds?: number;
    healthTimeoutSeconds?: number;
    dependsOnSts: pulumi.Input<pulumi.Resource>;
}

export class EtcdRollingUpgrade extends pulumi.ComponentResource {
    public readonly job: k8s.batch.v1.Job;

    constructor(name: string, args: EtcdRollingUpgradeArgs, opts?: pulumi.ComponentResourceOptions) {
        super("pool:rolling-upgrade:EtcdRollingUpgrade", name, {}, opts);
        const parent = { parent: this };
        const namespace = args.namespace;
        const base = `${args.stsName}-rollout`;
        const hash8 = pulumi.output(args.versionHash).apply(h => h.slice(0, 8));

        const sa = new k8s.core.v1.ServiceAccount(`${name}-rollout`, {
            metadata: { name: base, namespace },
        }, parent);
        const role = new k8s.rbac.v1.Role(`${name}-rollout`, {
            metadata: { name: base, namespace },
            rules: [
                { apiGroups: ["apps"], resources: ["statefulsets"], verbs: ["get", "list", "watch", "patch"] },
                { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
                { apiGroups: [""], resources: ["pods/exec"], verbs: ["create", "get"] },
            ],
        }, parent);
        new k8s.rbac.v1.RoleBinding(`${name}-rollout`, {
            metadata: { name: base, namespace },
            roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: role.metadata.name },
            subjects: [{ kind: "ServiceAccount", name: sa.metadata.name, namespace }],
        }, parent);

        const tlsLines = args.tls ? [
            "tls:",
            "  enabled: true",
            `  caFile: ${args.tls.caFile}`,
            `  certFile: ${args.tls.certFile}`,
            `  keyFile: ${args.tls.keyFile}`,
        ] : ["tls:", "  enabled: false"];
        const config = new k8s.core.v1.ConfigMap(`${name}-rollout-config`, {
            metadata: { name: pulumi.interpolate`${base}-config-${hash8}`, namespace },
            data: {
                "config.yaml": pulumi.all([namespace]).apply(([ns]) => [
                    `stsName: ${args.stsName}`,
                    `namespace: ${ns}`,
                    `serviceName: ${args.serviceName}`,
                    `clientPort: ${args.clientPort ?? 2379}`,
                    ...tlsLines,
                    `cooldownSeconds: ${args.cooldownSeconds ?? 30}`,
                    `readyTimeoutSeconds: ${args.readyTimeoutSeconds ?? 300}`,
                    `healthTimeoutSeconds: ${args.healthTimeoutSeconds ?? 60}`,
                    "",
                ].join("\n")),
            },
        }, parent);
        const script = new k8s.core.v1.ConfigMap(`${name}-rollout-script`, {
            metadata: { name: "etcd-rollout-script", namespace },
            data: { "rollout.sh": "#!/bin/sh\n# stand-in: the users' rollout.sh is not part of this repository\nexit 0\n" },
        }, parent);

        this.job = new k8s.batch.v1.Job(`${name}-rollout`, {
            metadata: { name: pulumi.interpolate`${base}-${hash8}`, namespace },
            spec: {
                backoffLimit: 0,
                ttlSecondsAfterFinished: 604800,
                template: {
                    spec: {
                        serviceAccountName: sa.metadata.name,
                        restartPolicy: "OnFailure",
                        nodeName: new pulumi.Config().get("nodeName"), // local cluster: it runs no scheduler
                        containers: [{
                            name: "rollout",
                            image: "alpine/k8s:1.30.4",
                            command: ["sh", "/scripts/rollout.sh"],
                            volumeMounts: [
                                { name: "config", mountPath: "/config" },
                                { name: "script", mountPath: "/scripts" },
                            ],
                        }],
                        volumes: [
                            { name: "config", configMap: { name: config.metadata.name } },
                            { name: "script", configMap: { name: script.metadata.name } },
                        ],
                    },
                },
            },
        }, { parent: this, dependsOn: args.dependsOnSts });
        this.registerOutputs({ job: this.job });
    }
}
