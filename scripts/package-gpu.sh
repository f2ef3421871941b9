#!/usr/bin/env bash
# Builds the release binary and the CUDA C ABI library, and puts stripped copies in
# build/gpu/ (kforge, libkforge_cuda.so and libkforge_sandbox.so, which the server finds next
# to the executable),
# small enough to travel to the GPU host with the working tree (the device tool's `carry`),
# plus build/gpu/wheels: the MCP Python SDK and the OpenAPI validator (pinned in
# python/requirements.txt) and what they need, as wheels for the GPU host's Python, which has
# no internet to install them from.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
# Without PostgreSQL: libpq cannot be linked statically (docs/deployment.md), and the GPU host
# has no Debian libraries. The next `cmake --preset release` (make build) turns it back on.
cmake --preset release -DKFORGE_WITH_POSTGRESQL=OFF >/dev/null
cmake --build --preset release -j "$(nproc)" --target kforge kforge_cuda_abi kforge_sandbox_abi >/dev/null
if ldd build/release/bin/kforge | grep -q libpq; then
  echo "package-gpu: build/release/bin/kforge still links libpq" >&2
  exit 1
fi
mkdir -p build/gpu
strip -o build/gpu/kforge build/release/bin/kforge
strip --strip-unneeded -o build/gpu/libkforge_cuda.so build/release/lib/libkforge_cuda.so
strip --strip-unneeded -o build/gpu/libkforge_sandbox.so build/release/lib/libkforge_sandbox.so
ls -la build/gpu/kforge build/gpu/libkforge_cuda.so build/gpu/libkforge_sandbox.so
gpu_python="${GPU_PYTHON_VERSION:-3.12}"
mcp_pin="$(grep -E '^(mcp|openapi-spec-validator)==' python/requirements.txt | tr '\n' ' ')"
if [[ ! -f "build/gpu/wheels/.pin" || "$(cat build/gpu/wheels/.pin)" != "$mcp_pin $gpu_python" ]]; then
  rm -rf build/gpu/wheels
  "${KFORGE_VENV:-$HOME/.cache/kforge/venv}/bin/python" -m pip download -q --only-binary=:all: \
    --python-version "$gpu_python" --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d build/gpu/wheels $mcp_pin
  echo "$mcp_pin $gpu_python" > build/gpu/wheels/.pin
fi
du -sh build/gpu/wheels
