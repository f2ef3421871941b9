#!/usr/bin/env python3
"""clang-tidy over kforge's C++ sources, in parallel and with a result cache (make tidy*).

    scripts/tidy.py BUILD_DIR [--jobs N] [--changed REF] [--shard K/N | --shard auto/N]
                    [--layer DIR]... [FILE...]

The sources are src/**/*.cc and apps/**/*.cc (the Beast session/server TUs are left out: the
analyzer reports false positives inside Asio's coroutines). With no selection every source is
checked; --changed REF picks the sources changed since the merge base with REF and those that
include a changed header; --shard K/N every N-th source from the K-th (auto/N: K is the commit
count of HEAD modulo N, so consecutive commits check consecutive shards and every N commits
cover all of them); --layer DIR the sources under src/kforge/DIR. Selections add up.

A clean result is remembered in $KFORGE_TIDY_CACHE (default ~/.cache/kforge/tidy) under a hash of
the preprocessed TU, its compile command, .clang-tidy and the clang-tidy version, so a source is
re-checked only when something it reads changed. Findings are never cached. Exit status 1 when
any source has a finding; the last line is "tidy: N sources, C from cache, F with findings".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
EXCLUDED = ("src/kforge/frontends/http/http_session.cc", "src/kforge/frontends/http/http_server.cc")


@dataclass(frozen=True)
class Outcome:
    source: str
    cached: bool
    ok: bool
    output: str


def git(*args: str) -> list[str]:
    out = subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line]


def all_sources() -> list[str]:
    files = git("ls-files", "-co", "--exclude-standard", "--", "src/*.cc", "apps/*.cc")
    return sorted(f for f in files if f not in EXCLUDED and (ROOT / f).is_file())


def changed_sources(ref: str, sources: list[str]) -> set[str]:
    found = subprocess.run(
        ["git", "merge-base", ref, "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        print(f"tidy: --changed {ref}: no merge base with HEAD, so no changed sources", flush=True)
        return set()
    base = found.stdout.strip()
    changed = set(git("diff", "--name-only", base, "--", "src", "apps"))
    changed |= set(git("ls-files", "-mo", "--exclude-standard", "--", "src", "apps"))
    picked = {f for f in sources if f in changed}
    headers = [h.removeprefix("src/") for h in changed if h.endswith(".h")]
    for source in sources:
        if source in picked or not headers:
            continue
        text = (ROOT / source).read_text(errors="replace")
        if any(f'#include "{h}"' in text for h in headers):
            picked.add(source)
    return picked


def shard_sources(spec: str, sources: list[str]) -> set[str]:
    k_text, sep, n_text = spec.partition("/")
    if not sep or not n_text.isdigit() or int(n_text) < 1:
        raise SystemExit(f"tidy: --shard must be K/N or auto/N, got {spec!r}")
    n = int(n_text)
    if k_text == "auto":
        k = int(git("rev-list", "--count", "HEAD")[0]) % n
    elif k_text.isdigit() and int(k_text) < n:
        k = int(k_text)
    else:
        raise SystemExit(f"tidy: --shard K must be auto or 0..{n - 1}, got {k_text!r}")
    print(f"tidy: shard {k}/{n}", flush=True)
    return set(sources[k::n])


def compile_commands(build: Path) -> dict[str, list[str]]:
    path = build / "compile_commands.json"
    if not path.is_file():
        raise SystemExit(f"tidy: {path} missing: configure the tidy build first (make tidy does)")
    commands: dict[str, list[str]] = {}
    for entry in json.loads(path.read_text()):
        args = entry.get("arguments") or shlex.split(entry["command"])
        file = Path(entry["directory"], entry["file"]).resolve()
        commands[str(file)] = args
    return commands


def preprocess_args(args: list[str], source: Path) -> list[str]:
    """The compile command of `source` turned into one that writes its preprocessed text."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if arg in ("-c", "-MD", "-MMD") or arg == str(source):
            continue
        out.append(arg)
    return [*out, "-E", "-P", "-C", str(source)]  # -C: a NOLINT comment changes the key


def cache_key(args: list[str], source: Path, build: Path, salt: str) -> str | None:
    pre = subprocess.run(preprocess_args(args, source), cwd=build, capture_output=True, check=False)
    if pre.returncode != 0:
        return None  # let clang-tidy report it
    digest = hashlib.sha256(salt.encode())
    digest.update(" ".join(args).encode())
    digest.update(pre.stdout)
    return digest.hexdigest()


def check(
    source: str, build: Path, commands: dict[str, list[str]], cache: Path, salt: str
) -> Outcome:
    path = (ROOT / source).resolve()
    args = commands.get(str(path))
    if args is None:
        return Outcome(source, False, False, f"{source}: not in {build}/compile_commands.json\n")
    key = cache_key(args, path, build, salt)
    if key and (cache / key).exists():
        return Outcome(source, True, True, "")
    run = subprocess.run(
        ["clang-tidy", "-p", str(build), "--quiet", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    ok = run.returncode == 0
    if ok and key:
        cache.mkdir(parents=True, exist_ok=True)
        (cache / key).write_text(source + "\n")
    # clang-tidy prints "N warnings generated." for the suppressed third-party ones: noise.
    lines = [ln for ln in (run.stdout + run.stderr).splitlines() if "warnings generated" not in ln]
    return Outcome(source, False, ok, "\n".join(lines) + ("\n" if lines else ""))


def run_all(check_one: Callable[[T], Outcome], items: list[T], jobs: int) -> tuple[int, int]:
    """Checks the items `jobs` at a time, printing each finding; (from cache, with findings)."""
    cached = failed = 0
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for outcome in pool.map(check_one, items):
            cached += outcome.cached
            if not outcome.ok:
                failed += 1
                sys.stdout.write(outcome.output)
                sys.stdout.flush()
    return cached, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("files", nargs="*")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--changed", metavar="REF")
    parser.add_argument("--shard", metavar="K/N")
    parser.add_argument("--layer", action="append", default=[], metavar="DIR")
    opts = parser.parse_intermixed_args()

    sources = all_sources()
    picked: set[str] = set()
    for file in opts.files:
        rel = os.path.relpath(Path(file).resolve(), ROOT)
        if rel not in sources:
            raise SystemExit(f"tidy: {file} is not one of the checked sources (src/, apps/ *.cc)")
        picked.add(rel)
    if opts.changed:
        picked |= changed_sources(opts.changed, sources)
    if opts.shard:
        picked |= shard_sources(opts.shard, sources)
    for layer in opts.layer:
        prefix = f"src/kforge/{layer.strip('/')}/"
        layer_sources = {s for s in sources if s.startswith(prefix)}
        if not layer_sources:
            raise SystemExit(f"tidy: --layer {layer}: no sources under {prefix}")
        picked |= layer_sources
    selected = opts.files or opts.changed or opts.shard or opts.layer
    todo = sorted(picked) if selected else sources

    build = opts.build.resolve()
    commands = compile_commands(build)
    version = subprocess.run(
        ["clang-tidy", "--version"], capture_output=True, text=True, check=False
    ).stdout
    salt = version + (ROOT / ".clang-tidy").read_text()
    cache = Path(os.environ.get("KFORGE_TIDY_CACHE", Path.home() / ".cache/kforge/tidy"))

    cached, failed = run_all(lambda s: check(s, build, commands, cache, salt), todo, opts.jobs)
    print(f"tidy: {len(todo)} sources, {cached} from cache, {failed} with findings")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
