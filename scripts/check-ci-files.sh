#!/usr/bin/env bash
# Checks the CI integrations and the Kubernetes manifests against published
# schemas: the GitHub Actions (actions/*/action.yml) with check-jsonschema's
# vendor.github-actions, the GitLab CI/CD component (templates/*.yml: its
# `spec` header and its jobs, one document each) with vendor.gitlab-ci, and
# deploy/kubernetes with kubernetes-validate --strict for Kubernetes
# $KUBERNETES_VERSION (each manifest, and kustomize's output when kubectl is
# there). Installs the validators itself. Exit 0 when all pass.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/lib.sh
KUBERNETES_VERSION=${KUBERNETES_VERSION:-1.30.0}
bin=$(ensure_ci_validators)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin/check-jsonschema" --builtin-schema vendor.github-actions actions/*/action.yml

# check-jsonschema reads one YAML document a file: the component is two.
"$bin/python" - "$tmp" templates/*.yml <<'PY'
import json, os, sys, yaml
out = sys.argv[1]
for path in sys.argv[2:]:
    for i, doc in enumerate(yaml.safe_load_all(open(path))):
        name = os.path.basename(path).replace(".yml", f".{i}.json")
        json.dump(doc, open(os.path.join(out, name), "w"))
PY
"$bin/check-jsonschema" --builtin-schema vendor.gitlab-ci "$tmp"/*.json

manifests=()
for f in deploy/kubernetes/*.yaml; do
  [ "$(basename "$f")" = kustomization.yaml ] || manifests+=("$f")
done
"$bin/kubernetes-validate" --quiet --strict -k "$KUBERNETES_VERSION" "${manifests[@]}"
if command -v kubectl >/dev/null; then
  kubectl kustomize deploy/kubernetes >"$tmp/rendered.yaml"
  "$bin/kubernetes-validate" --quiet --strict -k "$KUBERNETES_VERSION" "$tmp/rendered.yaml"
fi
echo "CI files and manifests valid (Kubernetes $KUBERNETES_VERSION)"
