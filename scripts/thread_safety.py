#!/usr/bin/env python3
"""Clang's thread-safety analysis over every C++ source of src/ and apps/ (make thread-safety).

    scripts/thread_safety.py BUILD_DIR [--jobs N] [--plant FILE]

Each translation unit of BUILD_DIR's compile database that compiles src/ or apps/ (in a unity
build, the unity TUs of their targets: a few large TUs instead of one per file) is compiled
again by clang++ ($KFORGE_CLANGXX, default clang++) with -fsyntax-only -Wthread-safety -Werror
and the build's own warning flags: nothing is generated, so the pass costs the front end only.
Generated sources, tests and benchmarks are left out. The annotations it checks are those of
src/kforge/common/thread_annotations.h.

A clean result is remembered in $KFORGE_THREAD_SAFETY_CACHE (default
~/.cache/kforge/thread-safety) under a hash of the TU as clang preprocesses it, its command and
the clang version, so a TU is re-checked only when something it reads changed. Findings are
never cached. Exit status 1 when any TU has a finding; the last line is
"thread-safety: N translation units, C from cache, F with findings".

--plant FILE checks FILE alone, with the flags of the first selected TU and no cache: the
planted-violation tests (tests/thread_safety) prove through it that the pass refuses a
guarded member touched without its lock.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tidy import Outcome, cache_key, run_all

ROOT = Path(__file__).resolve().parent.parent
# -Wno-unknown-warning-option: a GCC build's -Wno-<GCC-only warning> is not clang's concern.
CHECK_FLAGS = ["-fsyntax-only", "-Wthread-safety", "-Werror", "-Wno-unknown-warning-option"]
SKIPPED_ARGS = ("-c", "-MD", "-MMD")
SKIPPED_WITH_VALUE = ("-o", "-MF", "-MT", "-MQ")


def checked_units(build: Path) -> list[tuple[str, list[str]]]:
    """(source, clang args without an action) for each TU of src/ and apps/ in the database."""
    path = build / "compile_commands.json"
    if not path.is_file():
        raise SystemExit(f"thread-safety: {path} missing: configure the build first")
    clang = os.environ.get("KFORGE_CLANGXX", "clang++")
    units = []
    for entry in json.loads(path.read_text()):
        file = Path(entry["directory"], entry["file"]).resolve()
        if not is_checked(file, build):
            continue
        args = entry.get("arguments") or shlex.split(entry["command"])
        units.append((str(file), clang_args(clang, args, file)))
    return sorted(units)


def is_checked(file: Path, build: Path) -> bool:
    for top in ("src", "apps"):
        if file.is_relative_to(ROOT / top):
            return True
        # A unity TU of a target of src/ or apps/: BUILD/src/.../CMakeFiles/T.dir/Unity/*.cxx
        if file.is_relative_to(build / top) and file.parent.name == "Unity":
            return True
    return False


def clang_args(clang: str, args: list[str], source: Path) -> list[str]:
    out = [clang]
    skip = False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg in SKIPPED_WITH_VALUE:
            skip = True
        elif arg not in SKIPPED_ARGS and arg != str(source):
            out.append(arg)
    return out


def check(source: str, args: list[str], build: Path, cache: Path | None, salt: str) -> Outcome:
    key = cache_key([*args, source], Path(source), build, salt) if cache else None
    if cache and key and (cache / key).exists():
        return Outcome(source, True, True, "")
    run = subprocess.run(
        [*args, *CHECK_FLAGS, source], cwd=build, capture_output=True, text=True, check=False
    )
    ok = run.returncode == 0
    if ok and cache and key:
        cache.mkdir(parents=True, exist_ok=True)
        (cache / key).write_text(source + "\n")
    return Outcome(source, False, ok, run.stdout + run.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--plant", type=Path, metavar="FILE")
    opts = parser.parse_args()

    build = opts.build.resolve()
    units = checked_units(build)
    if not units:
        raise SystemExit(f"thread-safety: no TU of src/ or apps/ in {build}/compile_commands.json")
    if opts.plant:
        outcome = check(str(opts.plant.resolve()), units[0][1], build, None, "")
        sys.stdout.write(outcome.output)
        print(f"thread-safety: {opts.plant} {'passes' if outcome.ok else 'refused'}")
        return 0 if outcome.ok else 1

    version = subprocess.run(
        [units[0][1][0], "--version"], capture_output=True, text=True, check=False
    ).stdout
    salt = version + " ".join(CHECK_FLAGS) + (ROOT / "scripts/thread_safety.py").read_text()
    cache_dir = Path.home() / ".cache/kforge/thread-safety"
    cache = Path(os.environ.get("KFORGE_THREAD_SAFETY_CACHE", cache_dir))

    cached, failed = run_all(lambda u: check(u[0], u[1], build, cache, salt), units, opts.jobs)
    print(
        f"thread-safety: {len(units)} translation units, {cached} from cache, "
        f"{failed} with findings"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
