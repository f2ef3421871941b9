#!/usr/bin/env bash
# Builds the release binary and the CUDA C ABI library, and puts stripped copies in
# build/gpu/ (kforge and libkforge_cuda.so, which the server finds next to the executable),
# small enough to travel to the GPU host with the working tree (the device tool's `carry`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target kforge kforge_cuda_abi >/dev/null
mkdir -p build/gpu
strip -o build/gpu/kforge build/release/bin/kforge
strip --strip-unneeded -o build/gpu/libkforge_cuda.so build/release/lib/libkforge_cuda.so
ls -la build/gpu/kforge build/gpu/libkforge_cuda.so
