"""Where a warm child's start-up goes: the zygote's warm-up, then a forked child's steps, each
under cProfile (the functions that took the most cumulative time, per step).

A GPU child's warm-up (python/kforge_worker/process/warmup.py `warm_child`) took 2.1-2.5 s on an
H100; `/stats` names the steps, this says what each step spends its time on. It mimics the
worker: a zygote process imports torch and triton and runs `warm_zygote` with its Triton cache
in a directory of its own; each child is forked from it, gets a fresh private Triton cache with
the zygote's as the read-only layer (process/triton_cache.py), and runs `warm_child`.

    python bench/child_warmup_profile.py [--device cuda:0] [--children 2] [--top 12]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--min-ms", type=float, default=100.0, help="profile steps at least this long")
    args = ap.parse_args()

    from kforge_worker.__main__ import prepare_environment

    prepare_environment("cpu" if args.device == "cpu" else "cuda")  # as the worker does
    root = Path(tempfile.mkdtemp(prefix="kforge-warmup-"))
    zygote_cache = root / "zygote-triton"
    os.environ["TRITON_CACHE_DIR"] = str(zygote_cache)
    started = time.perf_counter()
    import torch
    import triton  # noqa: F401

    from kforge_worker.core.devinfo import parse_device
    from kforge_worker.process.warmup import WarmupReport, warm_child, warm_zygote

    imported = time.perf_counter() - started
    device = parse_device(args.device)
    arch = None
    if device.is_cuda:
        # What the supervisor passes as --arch (it reads the GPU without a CUDA context here).
        arch = int(os.environ.get("KFORGE_ARCH", "90"))
    zygote = warm_zygote(device, arch)
    print(f"zygote: imports {imported * 1e3:.0f} ms, warm-up {zygote.total_ms:.0f} ms")
    print(f"  steps {zygote.steps_ms}")
    if zygote.errors:
        print(f"zygote warm-up errors: {zygote.errors}")
    if device.is_cuda and torch.cuda.is_initialized():
        print("CUDA was initialised before the fork: the children cannot use the GPU")
        return 1

    for n in range(args.children):
        pid = os.fork()
        if pid == 0:
            os.environ["TRITON_CACHE_DIR"] = str(root / f"child-{n}")
            os.environ["TRITON_KFORGE_READONLY_DIRS"] = str(zygote_cache)
            os.environ["TRITON_CACHE_MANAGER"] = (
                "kforge_worker.process.triton_cache:LayeredCacheManager"
            )
            profiles: dict[str, pstats.Stats] = {}
            original = WarmupReport.run

            def profiled(  # type: ignore[no-untyped-def]
                self: WarmupReport, name: str, step, _orig=original, profiles=profiles
            ) -> None:
                prof = cProfile.Profile()
                prof.enable()
                try:
                    _orig(self, name, step)
                finally:
                    prof.disable()
                if self.steps_ms.get(name, 0.0) >= args.min_ms:
                    profiles[name] = pstats.Stats(prof)

            WarmupReport.run = profiled  # type: ignore[method-assign]
            report, _ = warm_child(device)
            print(f"\nchild {n}: warm-up {report.total_ms:.0f} ms {report.steps_ms}")
            if report.errors:
                print(f"child {n} errors: {report.errors}")
            for name, stats in profiles.items():
                out = io.StringIO()
                stats.stream = out  # type: ignore[attr-defined]
                stats.sort_stats("cumulative").print_stats(args.top)
                lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
                body = [ln for ln in lines if "/" in ln or "{" in ln][: args.top]
                print(f"  step {name} ({report.steps_ms[name]:.0f} ms), top by cumulative time:")
                for ln in body:
                    print(f"    {ln[:170]}")
            sys.stdout.flush()
            os._exit(0)
        os.waitpid(pid, 0)
    del torch
    return 0


if __name__ == "__main__":
    sys.exit(main())
