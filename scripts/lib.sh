# shellcheck shell=bash
# Shared helpers for scripts/*.sh and the shell tests. Source it; it defines
# functions only.

# Installs Debian packages that are missing (root, or sudo).
ensure_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Makes sure redis-server is on PATH.
ensure_redis() {
  command -v redis-server >/dev/null 2>&1 || ensure_packages redis-server
}

# Prints a free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Waits until URL answers 200, up to $2 seconds (default 30).
wait_for_http() {
  local url=$1 deadline=$(( $(date +%s) + ${2:-30} ))
  until curl -fsS -o /dev/null "$url" 2>/dev/null; do
    [ "$(date +%s)" -ge "$deadline" ] && { echo "timed out waiting for $url" >&2; return 1; }
    sleep 0.1
  done
}

# Waits until redis-cli -p PORT answers PING, up to 10 seconds.
wait_for_redis() {
  local port=$1
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "redis on port $port did not start" >&2
  return 1
}

# The validators of the CI and Kubernetes files, in a venv of their own:
# prints its bin directory. check-jsonschema carries the CI systems'
# published schemas, kubernetes-validate the Kubernetes API's, offline.
ensure_ci_validators() {
  local venv=${TMPDIR:-/tmp}/baton-ci-venv
  if ! [ -x "$venv/bin/check-jsonschema" ] || ! [ -x "$venv/bin/kubernetes-validate" ]; then
    python3 -m venv "$venv" >&2 &&
      "$venv/bin/pip" install --quiet check-jsonschema==0.39.0 kubernetes-validate==1.37.0 pyyaml >&2 ||
      return 1
  fi
  echo "$venv/bin"
}
