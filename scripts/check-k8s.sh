#!/usr/bin/env bash
# Validates the Kubernetes manifests (deploy/k8s/): each kustomization (the fleet, each GPU
# type's node set, the cpu node) rendered by kustomize, and secret.yaml, with kubeconform,
# strict, offline, against the Kubernetes JSON schemas. All are pinned and cached under
# ~/.cache/kforge:
#   - kustomize and kubeconform, built with Go from the Go module proxy (`go install`) into bin/; with no Go on
#     the machine (Debian 12's golang is 1.19, too old), Go $go_version itself comes from the
#     same proxy (its golang.org/toolchain module, the zip `go` fetches for GOTOOLCHAIN),
#     checked against a pinned SHA-256, into go-$go_version/;
#   - the schemas, from the kubernetes-validate wheel on PyPI (downloaded with pip, not
#     installed; only its schema directory for $k8s_version is kept) into k8s-schemas/.
# An argument names another directory of manifests (the default: deploy/k8s).
# Re-running it when all are cached takes about a second. Prints "k8s manifests: ok".
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kforge"
venv="${KFORGE_VENV:-$HOME/.cache/kforge/venv}"
kubeconform_version="v0.8.0"
kustomize_version="v5.7.1"
go_version="1.26.8"
go_zip_sha256="30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7"  # linux-amd64
validate_version="1.37.0"  # kubernetes-validate: schemas of Kubernetes up to this version
k8s_version="1.37.0"       # what the manifests are validated for

bin="$cache/bin/kubeconform-$kubeconform_version"
kustomize="$cache/bin/kustomize-$kustomize_version"
if [[ ! -x "$bin" || ! -x "$kustomize" ]]; then
  go_bin="$(command -v go || true)"
  [[ -z "$go_bin" && -x /usr/local/go/bin/go ]] && go_bin=/usr/local/go/bin/go
  # kubeconform needs Go 1.22 or newer; an older one (Debian 12's 1.19) is passed over.
  if [[ -n "$go_bin" ]]; then
    minor="$(GOTOOLCHAIN=local "$go_bin" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
    [[ -n "$minor" && "$minor" -ge 22 ]] || go_bin=""
  fi
  if [[ -z "$go_bin" ]]; then
    go_root="$cache/go-$go_version"
    if [[ ! -x "$go_root/bin/go" ]]; then
      [[ "$(uname -m)" == x86_64 ]] || { echo "check-k8s: no Go, and no pinned Go for $(uname -m) (install Go 1.22 or newer)" >&2; exit 1; }
      echo "check-k8s: fetching Go $go_version from the Go module proxy (about 70 MB)"
      tmp="$(mktemp -d)"
      curl -fsSL -o "$tmp/go.zip" \
        "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$go_version.linux-amd64.zip"
      echo "$go_zip_sha256  $tmp/go.zip" | sha256sum -c --quiet -
      "$venv/bin/python" - "$tmp/go.zip" "$tmp/x" <<'PY'
import os, sys, zipfile

with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
PY
      mkdir -p "$cache"
      rm -rf "$go_root"
      mv "$tmp/x/golang.org/toolchain@v0.0.1-go$go_version.linux-amd64" "$go_root"
      rm -rf "$tmp"
    fi
    go_bin="$go_root/bin/go"
  fi
  echo "check-k8s: building kubeconform $kubeconform_version and kustomize $kustomize_version with $("$go_bin" version)"
  tmp="$(mktemp -d)"
  for module in "github.com/yannh/kubeconform/cmd/kubeconform@$kubeconform_version" \
    "sigs.k8s.io/kustomize/kustomize/v5@$kustomize_version"; do
    GOBIN="$tmp" GOFLAGS=-mod=mod GOTOOLCHAIN=local "$go_bin" install "$module"
  done
  mkdir -p "$cache/bin"
  mv "$tmp/kubeconform" "$bin"
  mv "$tmp/kustomize" "$kustomize"
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

# Every kustomization, rendered; the top directory's manifests that no kustomization lists
# (secret.yaml, applied by hand) as they are.
manifests="${1:-$here/deploy/k8s}"
rendered="$(mktemp -d)"
trap 'rm -rf "$rendered"' EXIT
while IFS= read -r kustomization; do
  dir="$(dirname "$kustomization")"
  name="$(realpath --relative-to="$manifests" "$dir" | tr / _)"
  "$kustomize" build "$dir" >"$rendered/$name.yaml" || { echo "check-k8s: kustomize build $dir failed" >&2; exit 1; }
done < <(find "$manifests" -name kustomization.yaml | sort)
plain=()
for f in "$manifests"/*.yaml; do
  [[ "$(basename "$f")" == kustomization.yaml ]] && continue
  grep -qx "  - $(basename "$f")" "$manifests/kustomization.yaml" 2>/dev/null || plain+=("$f")
done
"$bin" -strict -summary -kubernetes-version "$k8s_version" \
  -schema-location "$schemas/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
  "$rendered" "${plain[@]}"
echo "k8s manifests: ok"
