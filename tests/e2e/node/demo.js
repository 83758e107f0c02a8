// `make demo`: the README's main job, through Pulumi. Runs examples/ts-dropin inline with the Automation API
// (the pulumi language hosts are not available here, so this is how its `pulumi up` runs) on the local
// cluster: create the etcd StatefulSet and its EtcdRollingUpgrade, change the pod template, `pulumi preview
// --diff` showing the rollout plan, `pulumi up` rolling it member by member with the engine's progress lines,
// then the rollout's outputs.
//
// usage: node demo.js <exampleDir> <kubeconfig> <namespace>   (the namespace is also the stack name)
// env:   DEMO_BACKEND (file:// URL), DEMO_PLUGINS (JSON plugins.providers), DEMO_WORK_DIR, DEMO_COOLDOWN
//        (seconds), plus pulumi's own (PULUMI_HOME, PULUMI_CONFIG_PASSPHRASE, ...).
"use strict";
const path = require("path");
const { LocalWorkspace } = require("@pulumi/pulumi/automation");
require("ts-node").register({ transpileOnly: true, skipProject: true, compilerOptions: { module: "commonjs", target: "es2020" } });

const bold = (s) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const clock = () => new Date().toISOString().slice(11, 19);
const say = (s) => process.stdout.write(`\n${bold("==> " + s)}\n`);

// progress prints what the engine says about the rollout (its status lines are ephemeral in the CLI's own
// display, so they are taken from the event stream instead) and each resource operation as it ends.
function progress(e) {
    const d = e.diagnosticEvent;
    if (d && d.urn && d.urn.includes("etcd-rollout:index:Rollout") && d.severity !== "debug") {
        process.stdout.write(`  ${clock()}  ${d.message.trim()}\n`);
    }
    const o = e.resOutputsEvent;
    if (o && o.metadata.op !== "same") {
        process.stdout.write(`  ${clock()}  ${o.metadata.op} ${o.metadata.type} ${o.metadata.urn.split("::").pop()}\n`);
    }
}

async function main() {
    const [exampleDir, kubeconfig, namespace] = process.argv.slice(2);
    const started = Date.now();
    // The program is the example's own index.ts, loaded afresh for each operation as `pulumi up` would.
    const program = async () => {
        for (const k of Object.keys(require.cache)) if (k.startsWith(path.resolve(exampleDir))) delete require.cache[k];
        return require(path.resolve(exampleDir, "index.ts"));
    };
    const stack = await LocalWorkspace.createOrSelectStack(
        { stackName: namespace, projectName: "etcd-rollout-ts-dropin", program },
        {
            projectSettings: {
                name: "etcd-rollout-ts-dropin", runtime: "nodejs",
                backend: { url: process.env.DEMO_BACKEND },
                plugins: { providers: JSON.parse(process.env.DEMO_PLUGINS) },
            },
            workDir: process.env.DEMO_WORK_DIR,
        });
    // Only one demo runs at a time: the previous one's stack is destroyed (its namespace, and so its etcd
    // members, go with it; the Rollout's delete touches nothing) and removed.
    for (const old of await stack.workspace.listStacks()) {
        if (old.name === namespace) continue;
        say(`pulumi destroy of the previous demo (stack ${old.name})`);
        const prev = await LocalWorkspace.selectStack({ stackName: old.name, projectName: "etcd-rollout-ts-dropin", program },
            { projectSettings: stack.workspace.projectSettings ? await stack.workspace.projectSettings() : undefined, workDir: process.env.DEMO_WORK_DIR });
        try {
            await prev.destroy({ onEvent: progress });
            await stack.workspace.removeStack(old.name);
        } catch (e) {
            // Not this demo's concern: say so and go on (the stack stays, so the next run tries again).
            process.stdout.write(`  could not destroy stack ${old.name}, left for the next run: ${String(e.message || e).split("\n")[0]}\n`);
        }
    }
    const configure = (podRevision) => stack.setAllConfig({
        kubeconfig: { value: kubeconfig }, namespace: { value: namespace }, createNamespace: { value: "true" },
        podRevision: { value: podRevision }, cooldownSeconds: { value: process.env.DEMO_COOLDOWN || "2" },
    });

    say(`pulumi up: namespace ${namespace}, Service, etcd StatefulSet (3 members, partition-locked), EtcdRollingUpgrade`);
    await configure("1");
    await stack.up({ onEvent: progress });

    say("change the pod template (podRevision 1 -> 2), then pulumi preview --diff: the plan, before anything restarts");
    await configure("2");
    await stack.preview({ diff: true, onOutput: (s) => process.stdout.write(s) });

    say("pulumi up: roll the members one at a time, the leader moved off each one before it restarts");
    const rolled = Date.now();
    const up = await stack.up({ onEvent: progress });
    const rollSeconds = ((Date.now() - rolled) / 1000).toFixed(1);

    say("outputs of the rollout");
    for (const [k, v] of Object.entries(up.outputs)) process.stdout.write(`  ${k.padEnd(20)} ${JSON.stringify(v.value)}\n`);
    process.stdout.write(`\nrolling up took ${rollSeconds} s; the whole demo ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

main().catch((e) => { console.error(String(e && e.message ? e.message : e)); process.exit(1); });
