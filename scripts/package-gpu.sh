#!/usr/bin/env bash
# Builds the release binary and puts a stripped copy in build/gpu/kforge, small enough to
# travel to the GPU host with the working tree (the device tool's `carry`).
set -euo pipefail
cd "$(dirname "$0")/.."
make build >/dev/null
mkdir -p build/gpu
strip -o build/gpu/kforge build/release/bin/kforge
ls -la build/gpu/kforge
