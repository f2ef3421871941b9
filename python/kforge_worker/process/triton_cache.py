"""A Triton cache that reads through read-only layers (TRITON_CACHE_MANAGER).

A jailed process writes only its own cache (TRITON_CACHE_DIR, inside its private scratch
directory): a cache another job can write is a way to plant code in it. What trusted code
compiled before any job ran (the zygote's warm-up kernels and launchers) is shared read-only:
the directories in TRITON_KFORGE_READONLY_DIRS (colon-separated) are searched after the
process's own cache and are never written.
"""

from __future__ import annotations

import json
import os

from triton.runtime.cache import FileCacheManager

READONLY_ENV = "TRITON_KFORGE_READONLY_DIRS"


def _readonly_dirs() -> list[str]:
    return [d for d in os.environ.get(READONLY_ENV, "").split(":") if d]


# Triton has no type information: FileCacheManager is Any to mypy.
class LayeredCacheManager(FileCacheManager):  # type: ignore[misc]
    """FileCacheManager over TRITON_CACHE_DIR, falling back to read-only layers."""

    def _layer_path(self, filename: str) -> str | None:
        for base in _readonly_dirs():
            path = os.path.join(base, self.key, filename)
            if os.path.exists(path):
                return path
        return None

    def get_file(self, filename: str) -> str | None:
        own = super().get_file(filename)
        return own if own is not None else self._layer_path(filename)

    def get_group(self, filename: str) -> dict[str, str] | None:
        own: dict[str, str] | None = super().get_group(filename)
        if own is not None:
            return own
        path = self._layer_path(f"__grp__{filename}")
        if path is None:
            return None
        try:
            with open(path) as f:
                children = json.load(f).get("child_paths")
        except (OSError, ValueError):
            return None
        if not isinstance(children, dict):
            return None
        return {str(k): str(v) for k, v in children.items() if os.path.exists(str(v))}
