// Runs one pulumi operation on a TypeScript example through the Automation API with an inline program that
// loads the example's index.ts, exactly as `pulumi up` would run it. One process per operation.
//
// usage: node driver.js <exampleDir> <project> <up|preview|refresh|cancel|destroy> <config JSON>
// env:   E2E_BACKEND (file:// URL), E2E_PLUGINS (JSON plugins.providers; optional), E2E_WORK_DIR, plus pulumi's own.
// Prints one line "E2E-RESULT {json}" with outputs, change summary, step events and the CLI's text.
"use strict";
const path = require("path");
const { LocalWorkspace } = require("@pulumi/pulumi/automation");
require("ts-node").register({ transpileOnly: true, skipProject: true, compilerOptions: { module: "commonjs", target: "es2020" } });

async function main() {
    const [exampleDir, project, op, configJSON] = process.argv.slice(2);
    const program = async () => require(path.resolve(exampleDir, "index.ts"));
    const projectSettings = {
        name: project,
        runtime: "nodejs",
        backend: { url: process.env.E2E_BACKEND },
    };
    // Without E2E_PLUGINS the CLI takes the plugins installed in PULUMI_HOME, as a user's stack does.
    if (process.env.E2E_PLUGINS) projectSettings.plugins = { providers: JSON.parse(process.env.E2E_PLUGINS) };
    const stack = await LocalWorkspace.createOrSelectStack(
        { stackName: "e2e", projectName: project, program },
        { projectSettings, workDir: process.env.E2E_WORK_DIR });
    const config = JSON.parse(configJSON || "null");
    if (config) {
        const all = {};
        for (const [k, v] of Object.entries(config)) all[k] = { value: v };
        await stack.setAllConfig(all);
    }
    // Ctrl-C reaches the pulumi CLI through the process group; the driver waits for it to finish cancelling.
    process.on("SIGINT", () => {});

    let text = "";
    const onOutput = (s) => { text += s; };
    const result = { outputs: {}, summary: {}, steps: [], text: "", error: "" };
    try {
        if (op === "up") {
            const r = await stack.up({ onOutput });
            for (const [k, v] of Object.entries(r.outputs)) result.outputs[k] = v.value;
            result.summary = r.summary.resourceChanges || {};
        } else if (op === "preview") {
            const r = await stack.preview({
                diff: true, onOutput, onError: onOutput, // with --diff the CLI prints diagnostics on stderr
                onEvent: (e) => { if (e.resourcePreEvent) result.steps.push(e.resourcePreEvent.metadata); },
            });
            result.summary = r.changeSummary || {};
        } else if (op === "refresh") {
            const r = await stack.refresh({ onOutput });
            result.summary = r.summary.resourceChanges || {};
        } else if (op === "cancel") {
            // `pulumi cancel`: what docs/usage.md's recovery steps run after a killed `pulumi up` (the file backend
            // keeps the dead run's lock).
            await stack.cancel();
        } else if (op === "destroy") {
            await stack.destroy({ onOutput, continueOnError: true });
        } else {
            throw new Error(`unknown operation ${op}`);
        }
    } catch (e) {
        result.error = String(e && e.message ? e.message : e);
    }
    result.text = text;
    process.stdout.write("E2E-RESULT " + JSON.stringify(result) + "\n");
}

main().catch((e) => { console.error(e); process.exit(1); });
