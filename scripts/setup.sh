#!/usr/bin/env bash
# Installs what kforge needs on a fresh Debian 12 machine, idempotently.
#   scripts/setup.sh serve   what building and serving need (`make serve`, `make install`):
#     1. Debian packages: the compiler tool chain and the C++ libraries (libpq for the
#        PostgreSQL store; not the server),
#     2. a Python venv with torch, triton and the worker's packages (outside the checkout, so
#        every clone reuses it): $KFORGE_VENV, default ~/.cache/kforge/venv, and the client.
#   scripts/setup.sh image   what serving needs, plus what `make image` and `make image-test`
#     need: mmdebstrap and umoci (the image from Debian's packages), podman and runc (its
#     smoke test).
#   scripts/setup.sh [test]  what serving needs, plus what every `make test` stage needs: the PostgreSQL
#     server (multi-node test), GoogleTest and Google Benchmark, clang (format, tidy,
#     libFuzzer), promtool, chromium (the web UI's browser tests), and 3. the Node tooling of
#     the MCP tests in tests/mcp-node and of the UI tests in tests/ui (npm ci, pinned by their
#     lockfiles). Go for kubeconform comes with scripts/check-k8s.sh.
# Re-running it when everything is present takes about a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${KFORGE_VENV:-$HOME/.cache/kforge/venv}"
mode="${1:-test}"
[[ "$mode" == serve || "$mode" == image || "$mode" == test ]] ||
  { echo "setup: the mode is serve, image or test, not '$mode'" >&2; exit 2; }

apt_packages=(
  build-essential cmake ninja-build ccache pkg-config
  libboost1.81-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libsqlite3-dev zlib1g-dev libssl-dev libxxhash-dev libpq-dev libseccomp-dev
  python3 python3-venv curl
)
if [[ "$mode" == image ]]; then
  apt_packages+=(mmdebstrap umoci podman runc uidmap)
fi
if [[ "$mode" == test ]]; then
  apt_packages+=(
    postgresql
    libgtest-dev libgmock-dev libbenchmark-dev
    clang-format clang-tidy clang libclang-rt-14-dev
    prometheus  # for promtool (`promtool check metrics` on GET /metrics, tests/integration/test_metrics.py)
    chromium    # the web UI's browser tests (tests/integration/test_ui.py; playwright-core drives it)
  )
fi

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python: prefer a python3 that has venv support; pyenv's python3 is fine too.
python_bin="${KFORGE_BOOTSTRAP_PYTHON:-python3}"
requirements="$here/python/requirements.txt"
stamp="$venv/.kforge-requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating the Python venv in $venv"
  mkdir -p "$(dirname "$venv")"
  "$python_bin" -m venv "$venv"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "setup: installing Python packages into $venv (torch and triton: a few GB the first time)"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$requirements"
  echo "$want" > "$stamp"
fi
# The Python client (clients/python), editable, so `import kforge_client` / `kernel_eval_client`
# is this checkout's (reinstalled when the venv's points at another clone).
client_src="$here/clients/python/src"
client_at="$("$venv/bin/python" -c 'import kforge_client, os; print(os.path.dirname(os.path.dirname(kforge_client.__file__)))' 2>/dev/null || true)"
if [[ "$client_at" != "$client_src" ]]; then
  echo "setup: installing the Python client (clients/python) into $venv, editable"
  "$venv/bin/python" -m pip install -q --no-deps -e "$here/clients/python"
fi
if [[ "$mode" == serve || "$mode" == image ]]; then
  echo "setup: ok for ${mode/image/serving and images} (venv $venv)"
  exit 0
fi
# Node: the MCP conformance suite and the TypeScript SDK client, reinstalled only when
# tests/mcp-node/package-lock.json changes.
node_dir="$here/tests/mcp-node"
node_stamp="$node_dir/node_modules/.kforge-lock.sha256"
node_want="$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)"
# The UI tests' playwright-core (it drives Debian's chromium; it downloads no browser).
ui_dir="$here/tests/ui"
ui_stamp="$ui_dir/node_modules/.kforge-lock.sha256"
ui_want="$(sha256sum "$ui_dir/package-lock.json" | cut -d' ' -f1)"
if [[ ! -f "$node_stamp" || "$(cat "$node_stamp")" != "$node_want" ||
      ! -x "$node_dir/node_modules/.bin/node" ||
      ! -f "$ui_stamp" || "$(cat "$ui_stamp")" != "$ui_want" ]]; then
  if ! command -v npm >/dev/null; then
    echo "setup: installing Debian packages: nodejs npm"
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  if [[ ! -f "$node_stamp" || "$(cat "$node_stamp")" != "$node_want" ||
        ! -x "$node_dir/node_modules/.bin/node" ]]; then
    echo "setup: installing the MCP test tooling into tests/mcp-node (npm ci)"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$node_want" > "$node_stamp"
  fi
  if [[ ! -f "$ui_stamp" || "$(cat "$ui_stamp")" != "$ui_want" ]]; then
    echo "setup: installing the UI test tooling into tests/ui (npm ci)"
    (cd "$ui_dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
    echo "$ui_want" > "$ui_stamp"
  fi
fi
echo "setup: ok (venv $venv)"
