#!/usr/bin/env bash
# `make dist`: a versioned release of kforge from a built tree.
#   dist/kforge-<version>-linux-<arch>.tar.gz   the install tree (bin/kforge, lib/, share/kforge:
#                                               the Python worker and the skills), README, docs
#   dist/kforge_client-<version>-py3-none-any.whl  the Python client, a plain wheel
#   dist/SHA256SUMS                             checksums of both (sha256sum -c SHA256SUMS)
# Usage: scripts/dist.sh [BUILD_DIR (build/release)] [OUT_DIR (dist)] [PYTHON]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$(realpath "${1:-$repo/build/release}")"
out="$(realpath -m "${2:-$repo/dist}")"
python="${3:-${KFORGE_VENV:-$HOME/.cache/kforge/venv}/bin/python}"
version="$(sed -n 's/.*kVersion = "\(.*\)";/\1/p' "$repo/apps/kforge/version.h")"
[[ -n "$version" ]] || { echo "dist: no kVersion in apps/kforge/version.h" >&2; exit 1; }
[[ -f "$build/cmake_install.cmake" ]] || { echo "dist: $build is not a built CMake tree (make build-server)" >&2; exit 1; }
name="kforge-$version-linux-$(uname -m)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cmake --install "$build" --prefix "$stage/$name" >/dev/null
strip "$stage/$name/bin/kforge"
strip --strip-unneeded "$stage/$name"/lib/*.so
mkdir -p "$stage/$name/share/doc/kforge"
cp -r "$repo/README.md" "$repo/docs" "$stage/$name/share/doc/kforge/"
mkdir -p "$out"
rm -f "$out/$name.tar.gz" "$out"/kforge_client-*.whl "$out/SHA256SUMS"
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$out/$name.tar.gz" "$name"
# The client as a wheel, built in a copy so the checkout gains no build/ or egg-info.
cp -r "$repo/clients/python" "$stage/client"
rm -rf "$stage/client"/src/*.egg-info "$stage/client/build"
"$python" -m pip wheel -q --no-deps --no-build-isolation -w "$out" "$stage/client" 2>/dev/null \
  || "$python" -m pip wheel -q --no-deps -w "$out" "$stage/client"
(cd "$out" && sha256sum "$name.tar.gz" kforge_client-*.whl > SHA256SUMS)
echo "dist: $out/$name.tar.gz, $(cd "$out" && ls kforge_client-*.whl), SHA256SUMS"
