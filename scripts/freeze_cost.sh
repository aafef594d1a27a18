#!/usr/bin/env bash
# What freezes in force cost the requests of a baton process (issue 45):
#
#   scripts/freeze_cost.sh [BINARY]
#
# Starts a redis-server on a free loopback port (never a Redis it did not
# start) and BINARY (default: this tree's dev build, built first) on it;
# then, with 0, 100 and 1,000 recurring freezes in force that never open
# ("0 0 30 2 *" to "0 0 31 2 *", all of `team-a-*`, written straight into
# Redis as the service keeps them, past the checks a freeze made today
# meets), measures:
#
# - CPU per status call on a frozen name, and per acquire + release of one:
#   the process's CPU time (utime + stime, /proc/PID/stat) over a steady
#   stream of requests lasting past two reloads of the list (every 5 s),
#   less what the process spends idle over as long, per request;
# - GET /freezes: median and slowest of 10 calls.
#
# A request unanswered after FREEZE_COST_TIMEOUT seconds (30) is reported
# as such and ends that measurement. Pass an older build (e.g. main's
# target/debug/baton, copied aside) to compare. Knobs: FREEZE_COST_SECONDS
# (12: the length of each stream), FREEZE_COST_RATE (20 requests/s).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_redis
command -v python3 >/dev/null 2>&1 || ensure_packages python3
BIN=${1:-}
if [ -z "$BIN" ]; then
  cargo build --quiet --bin baton
  BIN=$ROOT/target/debug/baton
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-freeze-cost.XXXXXX")
REDIS_PID=
BATON_PID=
cleanup() {
  for pid in "$BATON_PID" "$REDIS_PID"; do
    if [ -n "$pid" ]; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$WORK" --logfile "$WORK/redis.log" &
REDIS_PID=$!
wait_for_redis "$REDIS_PORT"

PORT=$(free_port)
BATON_LISTEN=127.0.0.1:$PORT BATON_REDIS_URL=redis://127.0.0.1:$REDIS_PORT \
  BATON_KEY_PREFIX=cost: BATON_LOG_FORMAT=json "$BIN" >"$WORK/baton.log" 2>&1 &
BATON_PID=$!
wait_for_http "http://127.0.0.1:$PORT/healthz"

python3 - "$PORT" "$REDIS_PORT" "$BATON_PID" <<'PY'
import http.client, json, os, socket, statistics, sys, time, uuid

port, redis_port, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
prefix = "cost:"
timeout = float(os.environ.get("FREEZE_COST_TIMEOUT", "30"))
seconds = float(os.environ.get("FREEZE_COST_SECONDS", "12"))
rate = float(os.environ.get("FREEZE_COST_RATE", "20"))
tick = os.sysconf("SC_CLK_TCK")


def cpu():
    """The process's CPU time so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


def resp(*args):
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def plant(n):
    """n more never-opening freezes, the version raised, the change told."""
    index = prefix + "{freezes}:index"
    cmds = []
    for i in range(n):
        fid = str(uuid.uuid4())
        key = f"{prefix}{{freezes}}:{fid}"
        stored = json.dumps({"id": fid, "match": "team-a-*", "freeze_start": "0 0 30 2 *",
                             "freeze_end": "0 0 31 2 *", "cron_timezone": "UTC",
                             "created_ms": int(time.time() * 1000) + i, "by": "planted"})
        cmds += [resp("SET", key, stored), resp("ZADD", index, "+inf", key)]
    cmds += [resp("SET", prefix + "{freezes}:version", int(time.time() * 1e6)),
             resp("PUBLISH", prefix + "freezes", "put")]
    s = socket.create_connection(("127.0.0.1", redis_port))
    s.sendall(b"".join(cmds))
    want, got = len(cmds), 0
    buf = b""
    while got < want:
        buf += s.recv(65536)
        got = buf.count(b"\r\n")  # every reply here is one line
    s.close()


class Client:
    def __init__(self):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method, path):
        try:
            self.conn.request(method, path, body=b"" if method != "GET" else None)
            r = self.conn.getresponse()
            return r.status, r.read()
        except (socket.timeout, TimeoutError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            return None, b""


def idle_cpu():
    before = cpu()
    time.sleep(seconds)
    return cpu() - before


def stream(client, one):
    """CPU per request of `one` over a steady stream past two reloads."""
    idle = idle_cpu()
    before, start, done = cpu(), time.monotonic(), 0
    while time.monotonic() - start < seconds:
        due = start + done / rate
        if due > time.monotonic():
            time.sleep(due - time.monotonic())
        if not one(client):
            return f"timed out (> {timeout:.0f} s) after {done}"
        done += 1
    used = cpu() - before - idle * (time.monotonic() - start) / seconds
    return f"{max(used, 0) / done * 1000:.2f} ms ({done} requests)"


def status_call(client):
    status, _ = client.call("GET", "/locks/team-a-x")
    return status == 200


def acquire_release(client):
    status, body = client.call("POST", "/locks/team-a-cycle")
    if status != 201:
        return False
    lease = json.loads(body)
    status, _ = client.call("DELETE", f"/locks/team-a-cycle/{lease['id']}")
    return status == 204


def freezes_time(client):
    times = []
    for _ in range(10):
        t = time.monotonic()
        status, _ = client.call("GET", "/freezes")
        if status is None:
            return f"timed out (> {timeout:.0f} s)"
        times.append((time.monotonic() - t) * 1000)
        if times[-1] > 5000 and len(times) >= 2:
            break
    return f"{statistics.median(times):.1f} ms (slowest {max(times):.1f} ms)"


client = Client()
rows, planted = [], 0
for n in (0, 100, 1000):
    plant(n - planted)
    planted = n
    # Told on the channel: every instance reads the list within a second.
    time.sleep(2)
    rows.append((n, stream(client, status_call), stream(client, acquire_release),
                 freezes_time(client)))

print("| freezes in force | CPU per status call (frozen name) | CPU per acquire + release | GET /freezes |")
print("|---|---|---|---|")
for row in rows:
    print("| {} | {} | {} | {} |".format(*row))
PY
