#!/usr/bin/env python3
"""Runs the job of a GitLab CI/CD component on this machine, as GitLab would.

    gitlab.py COMPONENT.yml WORKDIR [--input KEY=VALUE]... [--env KEY=VALUE]...

COMPONENT.yml is `spec: inputs` (with defaults, `type: boolean|number|string`),
`---`, then the jobs. Inputs are interpolated as GitLab does it, into the
values (and keys) of the parsed YAML, never into its text: `$[[ inputs.x ]]`
alone keeps the input's type, inside a longer string it is rendered as text.
The (only) job then runs in WORKDIR: its `variables` expanded as the runner
expands them (`$VAR`, `${VAR}`, `$$`; unknown ones are empty; `expand: false`
leaves a value as it is), `before_script` and `script` in one `sh -e`,
`after_script` in another. The script lines are the component's own: an
input that reached them as text would run here as it would in GitLab.
Writes WORKDIR/job.sh and exits with the script's status.
"""
import os
import re
import subprocess
import sys

import yaml

INTERPOLATION = re.compile(r"\$\[\[\s*inputs\.([A-Za-z0-9_-]+)\s*\]\]")
RESERVED = {"default", "include", "stages", "variables", "workflow", "spec"}


def inputs_of(spec, given):
    values = {}
    for name, rule in (spec or {}).items():
        rule = rule or {}
        if name in given:
            raw = given[name]
            kind = rule.get("type", "string")
            if kind == "boolean":
                if raw not in ("true", "false"):
                    raise SystemExit(f"`{name}` input: provided value is not a boolean")
                value = raw == "true"
            elif kind == "number":
                value = float(raw) if "." in raw else int(raw)
            else:
                value = raw
        elif "default" in rule:
            value = rule["default"]
        else:
            raise SystemExit(f"`{name}` input: required value has not been provided")
        if "options" in rule and value not in rule["options"]:
            raise SystemExit(f"`{name}` input: `{value}` cannot be used because it is not in the list of allowed options")
        values[name] = value
    for name in given:
        if name not in values:
            raise SystemExit(f"unknown input name provided: `{name}`")
    return values


def interpolate(node, values):
    if isinstance(node, dict):
        return {interpolate(k, values): interpolate(v, values) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate(v, values) for v in node]
    if isinstance(node, str):
        whole = INTERPOLATION.fullmatch(node.strip())
        if whole:
            return values[whole.group(1)]

        def text(m):
            value = values[m.group(1)]
            return ("true" if value else "false") if isinstance(value, bool) else str(value)
        return INTERPOLATION.sub(text, node)
    return node


def expand(value, env):
    """The runner's expansion of a variable's value."""
    def one(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1) or m.group(2), "")
    return re.sub(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", one, value)


def render_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def run(lines, env, workdir, name):
    path = os.path.join(workdir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return subprocess.run(["sh", "-e", path], env=env, cwd=workdir, stdin=subprocess.DEVNULL,
                          timeout=240, check=False).returncode


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        raise SystemExit(__doc__)
    component, workdir = args[0], os.path.abspath(args[1])
    given, ci = {}, {}
    for flag, pair in zip(args[2::2], args[3::2]):
        key, value = pair.split("=", 1)
        {"--input": given, "--env": ci}[flag][key] = value
    header, body = list(yaml.safe_load_all(open(component, encoding="utf-8")))
    values = inputs_of(header["spec"]["inputs"], given)
    jobs = {k: v for k, v in interpolate(body, values).items()
            if k not in RESERVED and not str(k).startswith(".")}
    assert len(jobs) == 1, f"one job expected, got {list(jobs)}"
    job = next(iter(jobs.values()))
    os.makedirs(workdir, exist_ok=True)
    env = dict(os.environ, GITLAB_CI="true", CI="true", **ci)
    for key, value in (job.get("variables") or {}).items():
        if isinstance(value, dict):
            raw, expanded = render_value(value.get("value")), value.get("expand", True)
        else:
            raw, expanded = render_value(value), True
        env[key] = expand(raw, env) if expanded else raw
    status = run(list(job.get("before_script") or []) + list(job["script"]), env, workdir, "job.sh")
    if job.get("after_script"):
        run(job["after_script"], env, workdir, "after.sh")
    sys.exit(status)


if __name__ == "__main__":
    main()
