#!/usr/bin/env python3
"""Runs one GitHub Actions job on this machine, as the runner would run it.

    gha.py JOB.yml WORKDIR [--root DIR] [--github KEY=VALUE]... [--secret K=V]...
           [--var K=V]... [--job ID]

JOB.yml is a workflow (its job ID, or its only job) or a bare job (`env`,
`steps`). Steps are `run:` steps and `uses:` steps: `./PATH` and
`OWNER/REPO/actions/NAME@REF` run ROOT/PATH or ROOT/actions/NAME (composite
actions: inputs with their defaults, `${{ }}` expressions, GITHUB_OUTPUT,
GITHUB_ENV, GITHUB_STEP_SUMMARY, GITHUB_ACTION_PATH, outputs); any other
`uses:` (actions/checkout) does nothing. Expressions are substituted into
`run:` text before it runs, as GitHub does: an action that pastes an input
into a script is open to injection here too.

WORKDIR gets the job's files (github_env, step_summary, runner_temp/) and
result.json: {"status", "steps": {id: {"outcome", "outputs"}}, "masks"}.
Exits with the job's status (0 or the first failed step's).
"""
import json
import os
import re
import subprocess
import sys

import yaml

from expressions import evaluate, substitute, truthy

STEP_TIMEOUT = 240


def parse_file_commands(path):
    """KEY=VALUE and KEY<<DELIM ... DELIM lines, as GITHUB_ENV and GITHUB_OUTPUT hold them."""
    values = {}
    if not os.path.exists(path):
        return values
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        m = re.match(r"^([^=<]+)<<(.+)$", line)
        if m:
            key, delim, body = m.group(1), m.group(2), []
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            i += 1
            values[key] = "\n".join(body)
        elif "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
        else:
            raise SystemExit(f"gha.py: a file command line without '=': {line!r}")
    return values


class Job:
    def __init__(self, root, workdir, github, secrets, variables):
        self.root, self.workdir = root, workdir
        self.github = github
        self.secrets, self.vars = secrets, variables
        self.env_file = os.path.join(workdir, "github_env")
        self.summary = os.path.join(workdir, "step_summary")
        self.runner_temp = os.path.join(workdir, "runner_temp")
        os.makedirs(self.runner_temp, exist_ok=True)
        open(self.env_file, "a").close()
        open(self.summary, "a").close()
        self.failed = False
        self.status = 0
        self.masks = []
        self.counter = 0

    def base_env(self, job_env):
        env = dict(os.environ)
        env.update({
            "GITHUB_ACTIONS": "true", "CI": "true",
            "GITHUB_SERVER_URL": self.github.get("server_url", "https://github.com"),
            "GITHUB_REPOSITORY": self.github.get("repository", "acme/shop"),
            "GITHUB_RUN_ID": self.github.get("run_id", "1"),
            "GITHUB_WORKSPACE": self.workdir,
            "GITHUB_ENV": self.env_file, "GITHUB_STEP_SUMMARY": self.summary,
            "RUNNER_TEMP": self.runner_temp,
        })
        env.update(job_env)
        env.update(parse_file_commands(self.env_file))
        return env

    def context(self, env, steps, inputs=None):
        return {"github": self.github, "env": env, "steps": steps, "inputs": inputs or {},
                "secrets": self.secrets, "vars": self.vars, "runner": {"temp": self.runner_temp},
                "job": {"status": "failure" if self.failed else "success"}}

    def should_run(self, condition, ctx, failed):
        status = {"failed": failed}
        if condition is None:
            return not failed
        text = str(condition).strip()
        if text.startswith("${{") and text.endswith("}}"):
            text = text[3:-2]
        if not re.search(r"\b(always|success|failure|cancelled)\s*\(", text):
            text = f"success() && ({text})"
        return truthy(evaluate(text, ctx, status))

    def run_script(self, shell, script, env):
        self.counter += 1
        path = os.path.join(self.workdir, f"step-{self.counter}.sh")
        with open(path, "w", encoding="utf-8") as f:
            f.write(script)
        output = os.path.join(self.workdir, f"output-{self.counter}")
        open(output, "w").close()
        env = dict(env, GITHUB_OUTPUT=output)
        shells = {"bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail", path],
                  "sh": ["sh", "-e", path], "python": ["python3", path]}
        if shell not in shells:
            raise SystemExit(f"gha.py: shell {shell!r} is not supported")
        proc = subprocess.Popen(shells[shell], env=env, cwd=self.workdir, stdout=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True, errors="replace")
        for line in proc.stdout:
            if line.startswith("::add-mask::"):
                self.masks.append(line[len("::add-mask::"):].rstrip("\n"))
            sys.stdout.write(line)
            sys.stdout.flush()
        try:
            status = proc.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            status = 124
        return status, parse_file_commands(output)

    def step_env(self, base, step, ctx):
        env = dict(base)
        for key, value in (step.get("env") or {}).items():
            env[key] = substitute(str(value), ctx)
        return env

    def run_steps(self, steps, job_env, inputs=None, action_path=None):
        """Runs STEPS; returns their steps context and whether one failed."""
        results, failed, first_status = {}, False, 0
        for index, step in enumerate(steps):
            sid = step.get("id", f"__{index}")
            env = self.base_env(job_env)
            if action_path:
                env["GITHUB_ACTION_PATH"] = action_path
            ctx = self.context(env, results, inputs)
            if not self.should_run(step.get("if"), ctx, failed):
                results[sid] = {"outcome": "skipped", "conclusion": "skipped", "outputs": {}}
                continue
            env = self.step_env(env, step, ctx)
            ctx["env"] = env
            if "run" in step:
                shell = step.get("shell", "bash")
                status, outputs = self.run_script(shell, substitute(step["run"], ctx), env)
            elif "uses" in step:
                status, outputs = self.uses(step, env, ctx)
            else:
                raise SystemExit(f"gha.py: a step without run or uses: {step}")
            ok = status == 0 or bool(step.get("continue-on-error"))
            outcome = "success" if status == 0 else "failure"
            results[sid] = {"outcome": outcome, "conclusion": "success" if ok else "failure",
                            "outputs": outputs}
            if not ok and not failed:
                failed, first_status = True, status
        return results, failed, first_status

    def uses(self, step, env, ctx):
        ref = step["uses"]
        if ref.startswith("./"):
            path = os.path.join(self.root, ref[2:])
        else:
            m = re.match(r"^[^/]+/[^/@]+/(actions/[^@]+)@.+$", ref)
            if not m:
                return 0, {}  # actions/checkout and the like: nothing to do here
            path = os.path.join(self.root, m.group(1))
        action = yaml.safe_load(open(os.path.join(path, "action.yml"), encoding="utf-8"))
        assert action["runs"]["using"] == "composite", ref
        given = {k: substitute(str(v), ctx) for k, v in (step.get("with") or {}).items()}
        inputs = {}
        for name, spec in (action.get("inputs") or {}).items():
            if name in given:
                inputs[name] = given[name]
            elif "default" in spec:
                inputs[name] = substitute(str(spec["default"]), self.context(env, {}))
            elif spec.get("required"):
                print(f"::error::Input required and not supplied: {name}")
                return 1, {}
            else:
                inputs[name] = ""
        for name in given:
            if name not in inputs:
                print(f"::warning::Unexpected input(s) '{name}'")
        # A composite action's steps see the caller's environment (step env included).
        results, failed, status = self.run_steps(action["runs"]["steps"], env, inputs, path)
        actx = self.context(self.base_env(env), results, inputs)
        outputs = {k: substitute(str(v.get("value", "")), actx)
                   for k, v in (action.get("outputs") or {}).items()}
        return (status or 1) if failed else 0, outputs


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        raise SystemExit(__doc__)
    job_file, workdir = args[0], os.path.abspath(args[1])
    opts = {"--root": [], "--github": [], "--secret": [], "--var": [], "--job": []}
    rest = args[2:]
    for flag, value in zip(rest[::2], rest[1::2]):
        opts[flag].append(value)
    pairs = lambda key: dict(v.split("=", 1) for v in opts[key])  # noqa: E731
    root = os.path.abspath(opts["--root"][0] if opts["--root"] else ".")
    os.makedirs(workdir, exist_ok=True)
    doc = yaml.safe_load(open(job_file, encoding="utf-8"))
    if "jobs" in doc:
        jobs = doc["jobs"]
        job = jobs[opts["--job"][0]] if opts["--job"] else next(iter(jobs.values()))
    else:
        job = doc
    github = {"server_url": "https://github.com", "repository": "acme/shop", "run_id": "1"}
    github.update(pairs("--github"))
    runner = Job(root, workdir, github, pairs("--secret"), pairs("--var"))
    ctx = runner.context(runner.base_env({}), {})
    job_env = {k: substitute(str(v), ctx) for k, v in (job.get("env") or {}).items()}
    results, failed, status = runner.run_steps(job["steps"], job_env)
    with open(os.path.join(workdir, "result.json"), "w", encoding="utf-8") as f:
        json.dump({"status": status if failed else 0, "steps": results, "masks": runner.masks}, f)
    sys.exit((status or 1) if failed else 0)


if __name__ == "__main__":
    main()
