#!/usr/bin/env bash
# `make image-test`: runs the image `make image` built, as a container (podman), with the
# securityContext the Kubernetes manifests give it, and checks it serves: GET /livez and
# /readyz, GET /health (the jail active, cgroups included), then a real job through the jailed
# worker (POST /compare of a torch add on the cpu device), then a clean stop on SIGTERM.
# Usage: scripts/image-smoke.sh [OUT (build/image)]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "${1:-$repo/build/image}")"
version="$(sed -n 's/.*kVersion = "\(.*\)";/\1/p' "$repo/apps/kforge/version.h")"
oci="$out/oci"
[[ -f "$oci/index.json" ]] || { echo "image-test: no image at $oci (make image)" >&2; exit 1; }
command -v podman >/dev/null || { echo "image-test: podman is missing (scripts/setup.sh image)" >&2; exit 1; }

# runc: crun refuses hosts whose cgroups are hybrid (v1 controllers beside v2, this CI
# machine). Without CAP_SYS_RESOURCE (this CI machine's root lacks it) the container may not
# raise its limits: podman's defaults (nproc 4194304) fail, and so did this shell's own nproc
# (96364) where 32768 passed.
runtime=()
command -v runc >/dev/null && runtime=(--runtime "$(command -v runc)")
nproc="$(ulimit -Hu)"
[[ "$nproc" == unlimited || "$nproc" -gt 32768 ]] && nproc=32768
limits=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc")

tag="localhost/kforge:$version"
podman tag "$(podman pull -q "oci:$oci:$version")" "$tag"

name="kforge-smoke-$$"
# Bound to 0.0.0.0 in the container, the server refuses to start without a token.
token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
auth=(-H "Authorization: Bearer $token")
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# What the jail needs of the container (docs/deployment.md "The container's privileges"):
# the capabilities to make namespaces and mounts and to become the jobs' users, no seccomp
# or AppArmor profile of the runtime's (the jail installs its own filter), and a writable
# cgroup tree for the jobs' cgroups.
podman run -d --name "$name" "${runtime[@]}" "${limits[@]}" \
  -p "127.0.0.1:$port:8000" -e "KFORGE_TOKEN=$token" \
  --cap-drop=all \
  --cap-add=SYS_ADMIN,NET_ADMIN,SETUID,SETGID,SETPCAP,CHOWN,FOWNER,DAC_OVERRIDE,KILL \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --security-opt unmask=/sys/fs/cgroup --cgroupns=private \
  -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
  "$tag" serve --devices cpu --sandbox required >/dev/null

url="http://127.0.0.1:$port"
fail() {
  echo "image-test: $1" >&2
  podman logs --tail 40 "$name" >&2 || true
  exit 1
}
for _ in $(seq 1 240); do
  curl -fsS "$url/livez" >/dev/null 2>&1 && break
  podman container exists "$name" && [[ "$(podman inspect -f '{{.State.Running}}' "$name")" == true ]] ||
    fail "the container stopped before answering /livez"
  sleep 0.5
done
curl -fsS "$url/livez" >/dev/null || fail "no answer on /livez"
for _ in $(seq 1 240); do
  curl -fsS "$url/readyz" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "$url/readyz" >/dev/null || fail "not ready within 120 s"
health="$(curl -fsS "${auth[@]}" "$url/health")"
python3 - "$health" <<'EOF' || fail "/health: the jail is not complete"
import json, sys
sandbox = json.loads(sys.argv[1])["sandbox"]
assert sandbox["jailing"] is True, sandbox
assert "error" not in sandbox["cgroups"], sandbox["cgroups"]
EOF
body='{"ref_kernel": {"kernel_type": "torch", "source_code": "import torch\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n        return a + b\ndef get_inputs():\n    return [torch.randn(4096), torch.randn(4096)]\ndef get_init_inputs():\n    return []\n"},
 "custom_kernel": {"kernel_type": "torch", "source_code": "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return torch.add(a, b)\ndef get_inputs():\n    return [torch.randn(4096), torch.randn(4096)]\ndef get_init_inputs():\n    return []\n"},
 "num_correct_trials": 2, "measure_performance": true}'
answer="$(curl -fsS "${auth[@]}" -X POST -H 'Content-Type: application/json' --data "$body" --max-time 300 "$url/compare")" ||
  fail "POST /compare failed"
python3 - "$answer" <<'EOF' || fail "the job's answer is not a correct, timed compare"
import json, sys
res = json.loads(sys.argv[1])["kernel_exec_result"]
assert res["correctness"] is True, res
assert res["metadata"]["device"] == "cpu", res["metadata"]
print(f"image-test: /compare correct on the jailed cpu worker, runtime {res['runtime']:.4f} ms")
EOF
podman stop -t 60 "$name" >/dev/null
code="$(podman inspect -f '{{.State.ExitCode}}' "$name")"
[[ "$code" == 0 || "$code" == 143 ]] || fail "exit code $code after SIGTERM"
echo "image-test: ok ($tag: /livez, /readyz, /health with the jail, a job, a clean stop)"
