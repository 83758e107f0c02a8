"""Runs one pulumi operation on a Python example through the Automation API with an inline program that runs
the example's __main__.py, exactly as `pulumi up` would run it. One process per operation.

usage: python driver.py <exampleDir> <project> <up|preview|destroy> <config JSON>
env:   E2E_BACKEND (file:// URL), E2E_PLUGINS (JSON plugins.providers; optional), E2E_WORK_DIR, plus pulumi's own.
Prints one line "E2E-RESULT {json}" with outputs, change summary, step events and the CLI's text.
"""
import json
import os
import runpy
import signal
import sys

from pulumi import automation as auto


def main() -> None:
    example_dir, project, op, config_json = sys.argv[1:5]
    example_dir = os.path.abspath(example_dir)

    def program() -> None:
        sys.path.insert(0, example_dir)
        runpy.run_path(os.path.join(example_dir, "__main__.py"), run_name="__main__")

    # The Python ProjectSettings type has no plugins field, so the project file is written here; the
    # workspace reads it from its work dir.
    # Without E2E_PLUGINS the CLI takes the plugins installed in PULUMI_HOME, as a user's stack does.
    work_dir = os.environ["E2E_WORK_DIR"]
    settings = {"name": project, "runtime": "python", "backend": {"url": os.environ["E2E_BACKEND"]}}
    if os.environ.get("E2E_PLUGINS"):
        settings["plugins"] = {"providers": json.loads(os.environ["E2E_PLUGINS"])}
    with open(os.path.join(work_dir, "Pulumi.yaml"), "w") as f:
        json.dump(settings, f)  # JSON is YAML
    stack = auto.create_or_select_stack(
        stack_name="e2e", project_name=project, program=program,
        opts=auto.LocalWorkspaceOptions(work_dir=work_dir))
    config = json.loads(config_json or "null")
    if config:
        stack.set_all_config({k: auto.ConfigValue(value=v) for k, v in config.items()})
    # Ctrl-C reaches the pulumi CLI through the process group; the driver waits for it to finish cancelling.
    # A handler (not SIG_IGN) so that the CLI, started after this, keeps the default disposition.
    signal.signal(signal.SIGINT, lambda *_: None)

    text: list[str] = []
    result = {"outputs": {}, "summary": {}, "steps": [], "text": "", "error": ""}
    try:
        if op == "up":
            r = stack.up(on_output=text.append)
            result["outputs"] = {k: v.value for k, v in r.outputs.items()}
            result["summary"] = dict(r.summary.resource_changes or {})
        elif op == "preview":
            def on_event(e) -> None:
                if e.resource_pre_event is not None:
                    result["steps"].append(_metadata(e.resource_pre_event.metadata))
            r = stack.preview(diff=True, on_output=text.append, on_event=on_event)
            result["summary"] = {str(k): v for k, v in (r.change_summary or {}).items()}
        elif op == "destroy":
            stack.destroy(on_output=text.append, continue_on_error=True)
        else:
            raise ValueError(f"unknown operation {op}")
    except Exception as e:  # the error is the result; the Go test decides what it means
        result["error"] = str(e)
    result["text"] = "\n".join(text)
    print("E2E-RESULT " + json.dumps(result, default=str), flush=True)


def _metadata(m) -> dict:
    """The step metadata in the engine's JSON shape (the Go test reads it as apitype.StepEventMetadata)."""
    def state(s):
        if s is None:
            return None
        return {"type": s.type, "urn": s.urn, "inputs": s.inputs or {}, "outputs": s.outputs or {}}
    detailed = {}
    for k, d in (m.detailed_diff or {}).items():
        detailed[k] = {"kind": getattr(d.diff_kind, "value", str(d.diff_kind)), "inputDiff": d.input_diff}
    return {"op": getattr(m.op, "value", str(m.op)), "urn": m.urn, "type": m.type,
            "old": state(m.old), "new": state(m.new), "diffs": m.diffs or [], "detailedDiff": detailed}


if __name__ == "__main__":
    main()
