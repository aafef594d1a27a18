#!/usr/bin/env python3
"""Where a server's CPU per uncontended lock cycle goes, by layer: the tables
of scripts/profile.sh, from what it measured.

    profile_layers.py LABEL=DIR [...]

Each DIR (one server: baton, a floor) holds
  figures.env      cycles= (under callgrind), user_us= and sys_us= (CPU per
                   cycle without valgrind, /proc utime and stime);
  callgrind.out    callgrind's dump over those cycles (--collect-systime=nsec,
                   --compress-strings=no, --compress-pos=no);
  syscalls.csv     optional: `perf stat -x, -e 'syscalls:sys_enter_*'` over
                   perf_cycles= cycles at full speed;
  kernel.txt       optional: `perf script -F ip,sym` of `perf record -e
                   cpu-clock -g` at full speed.
It prints markdown tables: the user CPU by layer (each layer's share of the
instructions times the user CPU per cycle: as if every layer ran at the same
instructions per second), the kernel CPU by system call (perf's share of
kernel samples times the kernel CPU per cycle), the largest modules of each
layer, and which layer makes each system call.

How an instruction finds its layer:
 1. the source file of the instruction (line tables see through inlining: an
    async state machine of hyper inlined into tokio's poll is hyper's);
 2. else the function's name (its crate and module);
 3. else (the standard library, libc's malloc, free and memcpy, containers,
    the http crate's header map and extensions, futures combinators) the
    layer of its callers, shared in proportion to what each call site cost,
    up the call graph until a layer is found.
"""

import collections
import re
import sys

LAYERS = [
    ("http", "HTTP: hyper, hyper-util, h2, axum's router"),
    ("accept", "baton's accept loop: baton::http::server (connection limits, timers)"),
    ("middleware", "middleware: tower, tower-http, baton::http (request id, trace, deadline, metrics, parked)"),
    ("bodies", "bodies: serde, serde_json, axum's extractors, baton::routes::{json,extract}"),
    ("handlers", "handlers: baton::routes, baton::domain"),
    ("engine", "engine invocation: baton::engine (FCALL arguments, replies)"),
    ("redis", "Redis client: redis-rs"),
    ("logging", "logging and metrics: tracing*, metrics*, baton::telemetry"),
    ("runtime", "runtime: tokio, mio"),
    ("floor", "the floor's own code (examples/floor.rs)"),
    ("other", "other (baton's startup, config; unattributed)"),
]

CRATES = {
    "http": ["hyper", "hyper_util", "h2", "httparse", "httpdate", "axum", "axum_core", "matchit"],
    "middleware": ["tower", "tower_http", "tower_layer", "tower_service"],
    "bodies": ["serde", "serde_json", "serde_path_to_error", "serde_core", "percent_encoding",
               "form_urlencoded", "serde_urlencoded", "itoa", "ryu", "zmij"],
    "redis": ["redis", "combine", "arcstr", "sha1_smol", "crc16"],
    "logging": ["tracing", "tracing_core", "tracing_subscriber", "tracing_log", "tracing_serde",
                "sharded_slab", "thread_local", "nu_ansi_term", "metrics",
                "metrics_exporter_prometheus", "metrics_util", "quanta", "matchers",
                "regex_automata"],
    "runtime": ["tokio", "mio", "tokio_util"],
}
CRATE_LAYER = {c: layer for layer, crates in CRATES.items() for c in crates}
# Module paths that refine a crate's layer, longest first.
MODULES = [
    ("axum::extract", "bodies"), ("axum_core::extract", "bodies"), ("axum::json", "bodies"),
    ("axum::body", "http"), ("tokio_util::codec", "redis"),
    ("baton::http::server", "accept"), ("baton::http", "middleware"), ("baton::startup", "middleware"),
    ("baton::routes::json", "bodies"), ("baton::routes::extract", "bodies"),
    ("baton::routes", "handlers"), ("baton::domain", "handlers"),
    ("baton::engine", "engine"), ("baton::telemetry", "logging"),
    ("baton", "other"), ("floor", "floor"),
]
# Registry crates whose modules belong to another layer than the crate.
REFINED = [
    (re.compile(r"/axum(-core)?-[0-9][^/]*/src/(extract|json)"), "bodies"),
    # redis-rs frames its connection with tokio-util's codec (baton does not).
    (re.compile(r"/tokio-util-[0-9][^/]*/src/codec/"), "redis"),
]
# The crate's own files.
FILES = [
    (re.compile(r"(^|/)src/http/server\.rs$"), "accept"),
    (re.compile(r"(^|/)src/(http/|startup\.rs)"), "middleware"),
    (re.compile(r"(^|/)src/routes/(json|extract)\.rs$"), "bodies"),
    (re.compile(r"(^|/)src/(routes|domain)/"), "handlers"),
    (re.compile(r"(^|/)src/engine/"), "engine"),
    (re.compile(r"(^|/)src/telemetry/"), "logging"),
    (re.compile(r"(^|/)src/[a-z_]+\.rs$"), "other"),
    (re.compile(r"(^|/)examples/floor\.rs$"), "floor"),
]
REGISTRY = re.compile(r"/registry/src/[^/]+/([A-Za-z0-9_.\-]+?)-\d+\.\d+\.\d+[^/]*/")
# Crates every layer uses (containers, buffers, ids, futures combinators, the
# http crate's request, header map and extensions): their cost counts for
# whoever called them (a header the request-id layer sets is the middleware's).
STD = {"core", "alloc", "std", "hashbrown", "bytes", "http", "http_body", "http_body_util", "futures_util", "futures_core", "futures_task",
       "futures_channel", "pin_project_lite", "slab", "uuid", "getrandom", "rand", "rand_core",
       "rand_chacha", "smallvec", "indexmap", "memchr", "once_cell", "parking_lot",
       "parking_lot_core", "lock_api", "socket2", "libc"}
# The crates a demangled name mentions, in order: `<hyper::X as tower::Y>::f` is hyper's.
ROOT = re.compile(r"(?:^|[<(\[&, *])([A-Za-z_][A-Za-z0-9_]*)::")
MODULE_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:::[a-z_][a-z0-9_]*)*")


def module_of(path_text, crate):
    """`crate::module` (baton: two modules deep), the detail shown under a layer."""
    segments = MODULE_PATH.match(path_text).group(0).split("::")
    depth = 3 if crate == "baton" else 2
    return "::".join([crate] + segments[1:depth])


def file_layer(path, cache={}):
    """(layer, detail) of a source file, or None."""
    if path in cache:
        return cache[path]
    found = None
    m = REGISTRY.search(path)
    if m:
        crate = m.group(1).replace("-", "_")
        layer = CRATE_LAYER.get(crate)
        for pattern, refined in REFINED:
            if pattern.search(path):
                layer = refined
        if layer:
            rest = path[m.end():]
            rest = rest[4:] if rest.startswith("src/") else rest
            module = rest.split("/")[0].removesuffix(".rs")
            found = (layer, crate if module in ("lib", "") else f"{crate}::{module}")
    elif not path.startswith(("/rustc/", "/rust/", "./", "???")):
        # The crate's own files (the standard library's and libc's aside).
        for pattern, layer in FILES:
            m = pattern.search(path)
            if m:
                if layer == "floor":
                    found = (layer, "floor")
                else:
                    rest = path[path.rindex("src/", 0, m.end()) + 4:].removesuffix(".rs")
                    found = (layer, "::".join(["baton"] + rest.split("/")[:2]))
                break
    cache[path] = found
    return found


def name_layer(name, cache={}):
    """(layer, detail) of a function by its crate and module, or None."""
    if name in cache:
        return cache[name]
    found = None
    for m in ROOT.finditer(name):
        crate = m.group(1)
        if crate in STD or len(crate) == 1:
            continue
        rest = name[m.start(1):]
        layer = None
        for prefix, refined in MODULES:
            if rest.startswith(prefix + "::"):
                layer = refined
                break
        else:
            layer = CRATE_LAYER.get(crate)
        if layer:
            found = (layer, module_of(rest, crate))
            break
    cache[name] = found
    return found


class Dump:
    """The costs of one callgrind dump (uncompressed names and positions).

    Functions are told apart by name alone (Rust's demangled names carry
    their concrete types where they matter, e.g. drop_in_place<T>)."""

    def __init__(self, path):
        self.events = []
        # function -> {source file: [costs]}
        self.self_cost = collections.defaultdict(dict)
        # callee -> [(caller, call-site file, [inclusive costs])]
        self.callers = collections.defaultdict(list)
        self.parse(path)

    def costs(self, fields):
        values = [int(v) for v in fields]
        return values + [0] * (len(self.events) - len(values))

    def parse(self, path):
        fl = fi = fn = cfn = None
        in_call = False
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                if line[0].isdigit():
                    cost = self.costs(line.split()[1:])
                    if in_call:
                        # The line after calls= is the call's inclusive cost.
                        in_call = False
                        self.callers[cfn].append((fn, fi, cost))
                    else:
                        slot = self.self_cost[fn]
                        old = slot.get(fi)
                        slot[fi] = cost if old is None else [a + b for a, b in zip(old, cost)]
                    continue
                key, _, value = line.partition("=")
                if key == "fl":
                    fl = fi = value
                elif key in ("fi", "fe"):
                    fi = value
                elif key == "fn":
                    fn = value
                    fi = fl
                elif key == "cfn":
                    cfn = value
                elif key == "calls":
                    in_call = True
                elif line.startswith("events:"):
                    self.events = line.split(":", 1)[1].split()
                elif line[0] in "+-*" or key in ("jump", "jcnd"):
                    raise SystemExit(f"{path}: run callgrind with --compress-pos=no, without --collect-jumps")

    def index(self, event):
        return self.events.index(event) if event in self.events else None

    def attribute(self, event, tag_of=None, transparent=()):
        """Cost of `event` per (tag, layer, detail).

        The tag is `tag_of(function)` of the function where the cost arose
        (None without `tag_of`; with it, costs tagged None are left out).
        Layers in `transparent` pass the cost on to their callers, unless no
        caller above has a layer of its own: a system call is made by whoever
        asked tokio to write, not by tokio."""
        i = self.index(event)
        if i is None:
            return {}
        mass = collections.Counter()
        pending = collections.Counter()
        for fn, files in self.self_cost.items():
            tag = tag_of(fn) if tag_of else None
            if tag_of and tag is None:
                continue
            for path, cost in files.items():
                if not cost[i]:
                    continue
                found = (path and file_layer(path)) or name_layer(fn or "")
                if found and found[0] not in transparent:
                    mass[(tag, *found)] += cost[i]
                else:
                    pending[(fn, tag, found)] += cost[i]
        for _ in range(200):
            if not pending:
                break
            moved = collections.Counter()
            for (callee, tag, fallback), amount in pending.items():
                sites = [(caller, path, cost[i]) for caller, path, cost in self.callers.get(callee, [])
                         if caller != callee and cost[i] > 0]
                total = sum(c for _, _, c in sites)
                if total == 0:
                    mass[(tag, *(fallback or ("other", "unattributed")))] += amount
                    continue
                for caller, path, c in sites:
                    share = amount * c / total
                    found = (path and file_layer(path)) or name_layer(caller or "")
                    if found and found[0] not in transparent:
                        mass[(tag, *found)] += share
                    else:
                        moved[(caller, tag, fallback or found)] += share
            pending = moved
        for (_, tag, fallback), amount in pending.items():
            mass[(tag, *(fallback or ("other", "unattributed")))] += amount
        return mass


SYSCALL = re.compile(r"^(?:__GI_)?_*(?:libc_)?([a-z_0-9]+?)(?:64)?(?:_nocancel)?$")
# Served by the vDSO without valgrind: no system call at full speed.
VDSO = {"clock_gettime", "gettimeofday", "time", "getcpu"}


def syscall_name(fn):
    name = (fn or "?").split("@")[0]
    m = SYSCALL.match(name)
    name = m.group(1) if m else name
    return None if name in VDSO else name


# The system call a kernel sample is in: the frame just above do_syscall_64.
SYSCALL_PREFIXES = ("__x64_sys_", "__ia32_sys_", "__do_sys_", "__se_sys_", "__sys_", "ksys_", "do_")
SYSCALL_WORK = {"syscall_trace_enter", "syscall_exit_work", "exit_to_user_mode_loop",
                "syscall_exit_to_user_mode", "exit_to_user_mode_prepare"}


def kernel_split(path):
    """Kernel samples of a `perf script -F ip,sym` by system call."""
    split = collections.Counter()
    with open(path, errors="replace") as f:
        for sample in f.read().split("\n\n"):
            frames = [line.split(None, 1) for line in sample.strip().splitlines()]
            frames = [(fr[0], fr[1] if len(fr) > 1 else "") for fr in frames if fr]
            if not frames or not frames[0][0].startswith("ffffffff"):
                continue
            names = [name for _, name in frames]
            if "do_syscall_64" not in names:
                split["outside system calls (interrupts, faults, scheduling)"] += 1
                continue
            above = [n for n in names[:names.index("do_syscall_64")] if n != "x64_sys_call"]
            handler = above[-1] if above else "do_syscall_64"
            if handler in SYSCALL_WORK or handler == "do_syscall_64" or handler.startswith("["):
                split["system call entry and exit work"] += 1
                continue
            for prefix in SYSCALL_PREFIXES:
                if handler.startswith(prefix):
                    handler = handler[len(prefix):]
                    break
            split[handler] += 1
    return split


def syscall_counts(path):
    counts = {}
    with open(path) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) > 2 and fields[2].startswith("syscalls:sys_enter_") and fields[0].isdigit():
                counts[fields[2][len("syscalls:sys_enter_"):]] = int(fields[0])
    return counts


def read_env(path):
    with open(path) as f:
        return {k: v for k, _, v in (line.strip().partition("=") for line in f) if k}


def main(args):
    import os
    servers = []
    for arg in args:
        label, _, folder = arg.partition("=")
        env = read_env(os.path.join(folder, "figures.env"))
        at = lambda name: os.path.join(folder, name)
        servers.append({
            "label": label,
            "dump": Dump(at("callgrind.out")),
            "cycles": float(env["cycles"]),
            "user": float(env["user_us"]),
            "sys": float(env["sys_us"]),
            "kernel": kernel_split(at("kernel.txt")) if os.path.exists(at("kernel.txt")) else None,
            "calls": syscall_counts(at("syscalls.csv")) if os.path.exists(at("syscalls.csv")) else None,
            "perf_cycles": float(env.get("perf_cycles", 0) or 0),
        })
    if not servers:
        raise SystemExit(__doc__)
    labels = [s["label"] for s in servers]
    names = dict(LAYERS)
    for s in servers:
        layers = collections.Counter()
        details = collections.Counter()
        for (_, layer, detail), c in s["dump"].attribute("Ir").items():
            layers[layer] += c
            details[(layer, detail)] += c
        s["layers"], s["details"], s["total"] = layers, details, sum(layers.values())

    def cell(s, amount):
        share = amount / s["total"] if s["total"] else 0
        ir = amount / s["cycles"]
        return f"{s['user'] * share:.1f} µs ({ir:,.0f} instr, {share:.0%})" if ir >= 1 else "—"

    # The first server beside the second: which layer holds the gap.
    gap = len(servers) > 1
    first, second = servers[0], servers[-1 if len(servers) < 2 else 1]

    def difference(amount_of):
        a = amount_of(first) / first["cycles"]
        b = amount_of(second) / second["cycles"]
        return [f"{a - b:+,.0f} instr"] if gap else []

    rows = []
    for key, _ in LAYERS:
        if any(s["layers"][key] for s in servers):
            rows.append([names[key]] + [cell(s, s["layers"][key]) for s in servers]
                        + difference(lambda s: s["layers"][key]))
    rows.append(["user space, all (/proc utime; callgrind instructions)"] + [
        f"{s['user']:.1f} µs ({s['total'] / s['cycles']:,.0f} instr)" for s in servers]
        + difference(lambda s: s["total"]))
    rows.append(["kernel, all (/proc stime; by system call below)"] + [f"{s['sys']:.1f} µs" for s in servers]
                + ([f"{first['sys'] - second['sys']:+.1f} µs"] if gap else []))
    rows.append(["CPU per cycle (/proc utime + stime)"] + [f"{s['user'] + s['sys']:.1f} µs" for s in servers]
                + ([f"{first['user'] + first['sys'] - second['user'] - second['sys']:+.1f} µs"] if gap else []))
    table(["layer: CPU per uncontended lock cycle (instructions, share of user space)"] + labels
          + ([f"{first['label']} - {second['label']}"] if gap else []), rows)

    if any(s["kernel"] for s in servers):
        print()
        keys = collections.Counter()
        for s in servers:
            total = sum((s["kernel"] or {}).values())
            for k, v in (s["kernel"] or {}).items():
                keys[k] = max(keys[k], v / total if total else 0)
        rows = []
        for key, share in keys.most_common():
            if share < 0.005:
                continue
            row = [key]
            for s in servers:
                split = s["kernel"] or {}
                total = sum(split.values())
                part = split.get(key, 0) / total if total else 0
                calls = (s["calls"] or {}).get(key)
                per = f"; {calls / s['perf_cycles']:.2f} calls" if calls and s["perf_cycles"] else ""
                row.append(f"{s['sys'] * part:.1f} µs ({part:.0%}){per}" if part else "—")
            rows.append(row)
        rows.append(["all system calls per cycle (perf stat)"] + [
            f"{sum(s['calls'].values()) / s['perf_cycles']:.2f}" if s["calls"] and s["perf_cycles"] else "—"
            for s in servers])
        table(["kernel: CPU per cycle by system call (perf samples; calls per cycle)"] + labels, rows)

    # The largest modules of each layer, in any of the servers.
    print()
    order = {key: n for n, (key, _) in enumerate(LAYERS)}
    biggest = collections.Counter()
    for s in servers:
        for key, amount in s["details"].items():
            biggest[key] = max(biggest[key], amount / s["cycles"])
    shown = sorted((k for k, v in biggest.items() if v >= 500), key=lambda k: (order[k[0]], -biggest[k]))
    rows = [[f"{layer}: {detail}"] + [cell(s, s["details"][(layer, detail)]) for s in servers]
            for layer, detail in shown]
    table(["module (500 instructions per cycle or more in one of them)"] + labels, rows)

    print()
    made = collections.defaultdict(lambda: [0.0] * len(servers))
    for n, s in enumerate(servers):
        for (tag, layer, _), c in s["dump"].attribute("sysCount", syscall_name, {"runtime", "accept"}).items():
            made[(tag, layer)][n] += c / s["cycles"]
    rows = [[f"{tag} ({layer})"] + [f"{c:.2f}" if c else "—" for c in counts]
            for (tag, layer), counts in sorted(made.items(), key=lambda kv: -max(kv[1]))
            if max(counts) >= 0.01]
    table(["system call (the layer that asked for it): calls per cycle under callgrind"] + labels, rows)


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
