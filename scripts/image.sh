#!/usr/bin/env bash
# `make image`: kforge's container image, built without pulling any base image (only Debian's
# packages and PyPI's wheels are reached):
#   1. a Debian 12 root file system from Debian's packages (mmdebstrap): Python, the compiler
#      Triton builds its launchers with, libpq for the PostgreSQL store;
#   2. a venv at /opt/kforge/venv with the worker's packages (python/requirements.txt less the
#      test tools: torch, triton, numpy, the CUDA 13 wheels, CuPy), installed offline from a
#      wheelhouse kept outside the checkout ($KFORGE_WHEELHOUSE, default
#      ~/.cache/kforge/wheelhouse, filled from PyPI once);
#   3. kforge's install tree (`cmake --install`) at /opt/kforge, kforge on PATH;
#   4. packed as an OCI image (umoci), two layers: the system and venv, then kforge itself (a
#      rebuild after a code change sends only the second).
# One image serves both device kinds: on a GPU host the NVIDIA container toolkit mounts the
# driver's libraries and the GPUs' device nodes (docs/deployment.md).
#
# Output (OUT, default build/image): OUT/oci, an OCI image layout holding kforge:<version> and
# kforge:latest, and OUT/kforge-<version>-oci.tar, the layout as one tar (`podman load -i`,
# `skopeo copy oci-archive:...`).
# Usage: scripts/image.sh [BUILD_DIR (build/release)] [OUT (build/image)]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$(realpath "${1:-$repo/build/release}")"
out="$(realpath -m "${2:-$repo/build/image}")"
wheelhouse="${KFORGE_WHEELHOUSE:-$HOME/.cache/kforge/wheelhouse}"
python="${KFORGE_VENV:-$HOME/.cache/kforge/venv}/bin/python"
suite=bookworm
version="$(sed -n 's/.*kVersion = "\(.*\)";/\1/p' "$repo/apps/kforge/version.h")"
[[ -n "$version" ]] || { echo "image: no kVersion in apps/kforge/version.h" >&2; exit 1; }
[[ -f "$build/cmake_install.cmake" ]] || {
  echo "image: $build is not a built CMake tree (make build-server)" >&2
  exit 1
}
[[ $(id -u) -eq 0 ]] || { echo "image: run as root (mmdebstrap and umoci keep file owners)" >&2; exit 1; }
for tool in mmdebstrap umoci; do
  command -v "$tool" >/dev/null || { echo "image: $tool is missing (scripts/setup.sh image)" >&2; exit 1; }
done

# What the image's Python gets: the worker's packages, not the test tools.
requirements="$out/requirements.txt"
mkdir -p "$out" "$wheelhouse"
grep -vE '^(pytest|ruff|httpx|mcp|openapi-spec-validator)==' "$repo/python/requirements.txt" >"$requirements"
echo "image: the worker's wheels into $wheelhouse (from PyPI once)"
# For the image's Python (Debian 12's 3.11) on this machine's platform.
"$python" -m pip download -q --only-binary=:all: --python-version 3.11 --implementation cp \
  -d "$wheelhouse" -r "$requirements"

stage="$(mktemp -d /var/tmp/kforge-image.XXXXXX)"
cleanup() {
  mountpoint -q "$stage/rootfs/tmp/wheelhouse" 2>/dev/null && umount "$stage/rootfs/tmp/wheelhouse"
  rm -rf "$stage"
}
trap cleanup EXIT

echo "image: the system ($suite from Debian's packages) and the venv"
packages=python3,python3-venv,python3-dev,gcc,libc6-dev,libpq5,ca-certificates,tini
# The hooks run on this host with the root file system in "$1"; the wheelhouse is bound in
# read-only for pip, and gone before the tar is made. Commands in the root get a clean
# environment (none of this shell's PIP_* settings).
in_root="env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8"
mmdebstrap --quiet --variant=minbase --include="$packages" \
  --customize-hook='mkdir -p "$1/tmp/wheelhouse" "$1/opt/kforge"' \
  --customize-hook="mount --bind -o ro '$wheelhouse' \"\$1/tmp/wheelhouse\"" \
  --customize-hook="cp '$requirements' \"\$1/tmp/requirements.txt\"" \
  --customize-hook="chroot \"\$1\" $in_root python3 -m venv /opt/kforge/venv" \
  --customize-hook="chroot \"\$1\" $in_root /opt/kforge/venv/bin/python -m pip install -q --no-index --no-cache-dir --find-links /tmp/wheelhouse -r /tmp/requirements.txt" \
  --customize-hook="chroot \"\$1\" $in_root /opt/kforge/venv/bin/python -m pip uninstall -q -y pip" \
  --customize-hook='umount "$1/tmp/wheelhouse" && rmdir "$1/tmp/wheelhouse" && rm "$1/tmp/requirements.txt"' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/usr/share/doc/* "$1"/usr/share/man/*' \
  "$suite" "$stage/system.tar"

echo "image: packing (umoci)"
oci="$out/oci"
rm -rf "$oci" "$out"/kforge-*-oci.tar
umoci init --layout "$oci"
umoci new --image "$oci:$version"
umoci unpack --image "$oci:$version" "$stage/bundle" >/dev/null
tar -C "$stage/bundle/rootfs" --numeric-owner -xf "$stage/system.tar"
rm "$stage/system.tar"
umoci repack --refresh-bundle --history.created_by "mmdebstrap $suite ($packages) and /opt/kforge/venv" \
  --image "$oci:$version" "$stage/bundle"
# The second layer: kforge's install tree and its place on PATH.
cmake --install "$build" --prefix "$stage/bundle/rootfs/opt/kforge" >/dev/null
strip "$stage/bundle/rootfs/opt/kforge/bin/kforge"
strip --strip-unneeded "$stage/bundle/rootfs/opt/kforge"/lib/*.so
ln -sf /opt/kforge/bin/kforge "$stage/bundle/rootfs/usr/local/bin/kforge"
mkdir -p "$stage/bundle/rootfs/var/lib/kforge"
umoci repack --history.created_by "cmake --install (kforge $version)" --image "$oci:$version" "$stage/bundle"
umoci config --image "$oci:$version" \
  --config.entrypoint=/usr/bin/tini --config.entrypoint=-- --config.entrypoint=/opt/kforge/bin/kforge \
  --config.cmd serve \
  --config.env KFORGE_PYTHON=/opt/kforge/venv/bin/python \
  --config.env KFORGE_HOST=0.0.0.0 --config.env KFORGE_PORT=8000 \
  --config.env KFORGE_DATA_DIR=/var/lib/kforge --config.env HOME=/var/lib/kforge \
  --config.env KFORGE_SANDBOX=required \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.exposedports 8000/tcp --config.volume /var/lib/kforge --config.workingdir /var/lib/kforge \
  --config.stopsignal SIGTERM \
  --config.label org.opencontainers.image.title=kforge \
  --config.label "org.opencontainers.image.version=$version" \
  --architecture amd64 --os linux --no-history
umoci tag --image "$oci:$version" latest
umoci gc --layout "$oci"
tar -C "$oci" -cf "$out/kforge-$version-oci.tar" .
echo "image: $oci (kforge:$version, kforge:latest), $out/kforge-$version-oci.tar ($(du -sh "$out/kforge-$version-oci.tar" | cut -f1))"
