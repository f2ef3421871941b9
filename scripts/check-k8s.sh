#!/usr/bin/env bash
# Validates the Kubernetes manifests (deploy/k8s/) with kubeconform, strict, offline, against
# the Kubernetes JSON schemas. Both are pinned and cached under ~/.cache/kforge:
#   - kubeconform, built with Go from the Go module proxy (`go install`) into bin/;
#   - the schemas, from the kubernetes-validate wheel on PyPI (downloaded with pip, not
#     installed; only its schema directory for $k8s_version is kept) into k8s-schemas/.
# An argument names another directory of manifests (the default: deploy/k8s).
# Re-running it when both are cached takes well under a second. Prints "k8s manifests: ok".
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kforge"
venv="${KFORGE_VENV:-$HOME/.cache/kforge/venv}"
kubeconform_version="v0.8.0"
validate_version="1.37.0"  # kubernetes-validate: schemas of Kubernetes up to this version
k8s_version="1.37.0"       # what the manifests are validated for

bin="$cache/bin/kubeconform-$kubeconform_version"
if [[ ! -x "$bin" ]]; then
  go_bin="$(command -v go || true)"
  [[ -z "$go_bin" && -x /usr/local/go/bin/go ]] && go_bin=/usr/local/go/bin/go
  if [[ -z "$go_bin" ]]; then
    echo "check-k8s: Go is needed to build kubeconform (install golang)" >&2
    exit 1
  fi
  echo "check-k8s: building kubeconform $kubeconform_version with $("$go_bin" version)"
  tmp="$(mktemp -d)"
  GOBIN="$tmp" GOFLAGS=-mod=mod "$go_bin" install \
    "github.com/yannh/kubeconform/cmd/kubeconform@$kubeconform_version"
  mkdir -p "$cache/bin"
  mv "$tmp/kubeconform" "$bin"
  rm -rf "$tmp"
fi

schemas="$cache/k8s-schemas/kubernetes-validate-$validate_version"
if [[ ! -d "$schemas/v$k8s_version-local-strict" ]]; then
  echo "check-k8s: fetching the Kubernetes JSON schemas (kubernetes-validate $validate_version)"
  tmp="$(mktemp -d)"
  "$venv/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" \
    "kubernetes-validate==$validate_version"
  mkdir -p "$schemas"
  "$venv/bin/python" - "$tmp"/kubernetes_validate-*.whl "$schemas" "v$k8s_version-local-strict" <<'PY'
import json, os, sys, zipfile

wheel, dest, wanted = sys.argv[1:]
prefix = f"kubernetes_validate/kubernetes-json-schema/{wanted}/"
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and n.endswith(".json")]
    if not names:
        sys.exit(f"check-k8s: {wanted} is not in {wheel}")
    os.makedirs(f"{dest}/{wanted}", exist_ok=True)
    for n in names:
        # The schemas name themselves and their shared definitions by https://kubernetes.io
        # addresses; kubeconform must resolve them offline, next to each other.
        schema = json.loads(z.read(n))
        schema.pop("$id", None)
        text = json.dumps(schema).replace('"/api/_definitions.json#', '"_definitions.json#')
        with open(f"{dest}/{wanted}/{n[len(prefix):]}", "w") as f:
            f.write(text)
PY
  rm -rf "$tmp"
fi

"$bin" -strict -summary -kubernetes-version "$k8s_version" \
  -schema-location "$schemas/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
  "${1:-$here/deploy/k8s}"
echo "k8s manifests: ok"
