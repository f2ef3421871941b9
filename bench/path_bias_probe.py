"""Why a candidate's call reads slower than the same call in the judge (issue 31): one
process times a float32 add of 2^12 ... 2^20 elements with the judge's trial protocol
(timing.GpuTrialRunner: L2 flush, spin, events), its inputs placed

    torch   in torch's own allocations (the reference's, in the judge)
    vmm     in an exportable allocation of core/devmem.py (the judge's regions)
    vmm_ro  in that allocation imported again read-only (how the candidate maps its inputs)

each plain and with `switch`: another process's context runs a small kernel before every
trial, so this context is switched out and back in (the candidate's call always follows a
switch to its context). Prints the median event time (us) per placement and size.

    python bench/path_bias_probe.py [--sizes 12,16,20] [--trials 200] [--device cuda:0]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))


def _other_context(conn: object, device: str) -> None:
    """A second process with a context of its own: a small kernel per message."""
    import torch

    x = torch.zeros(1024, device=device)
    torch.cuda.synchronize()
    while True:
        message = conn.recv()  # type: ignore[attr-defined]
        if message is None:
            return
        x.add_(1.0)
        torch.cuda.synchronize()
        conn.send(True)  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="12,16,20")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()

    import torch

    from kforge_worker.core import devmem
    from kforge_worker.timing.timing import GpuTrialRunner

    device = torch.device(args.device)
    torch.cuda.init()
    ctx = mp.get_context("spawn")
    mine, theirs = ctx.Pipe()
    other = ctx.Process(target=_other_context, args=(theirs, args.device), daemon=True)
    other.start()

    def switch() -> None:
        mine.send(True)
        mine.recv()

    runner = GpuTrialRunner(device, l2_flush=True, spin_us=100.0)
    sizes = args.sizes.split(",")
    print(f"{'placement':<10}{'switch':>8}" + "".join(f"{'2^' + s:>10}" for s in sizes))
    rows: dict[tuple[str, bool], list[float]] = {}
    for log2 in (int(s) for s in sizes):
        n = 1 << log2
        nbytes = n * 4
        block = devmem.allocate(device, 3 * nbytes)
        ro = devmem.import_fd(device, block.export(), block.size, writable=False)
        placements: dict[str, tuple[torch.Tensor, torch.Tensor]] = {
            "torch": (torch.randn(n, device=device), torch.randn(n, device=device)),
        }
        words = block.view.view(torch.float32)
        words[: 2 * n].normal_()
        placements["vmm"] = (words[:n], words[n : 2 * n])
        ro_words = ro.view.view(torch.float32)
        placements["vmm_ro"] = (ro_words[:n], ro_words[n : 2 * n])
        torch.cuda.synchronize()
        for name, (a, b) in placements.items():
            for with_switch in (False, True):

                def call(a: torch.Tensor = a, b: torch.Tensor = b) -> object:
                    return torch.add(a, b)

                before: Callable[[], None] = switch if with_switch else (lambda: None)
                for _ in range(10):
                    runner.run(call)
                samples = []
                for _ in range(args.trials):
                    before()
                    samples.append(runner.run(call).event_ms * 1e3)
                rows.setdefault((name, with_switch), []).append(statistics.median(samples))
        ro.close()
        block.close()
    for (name, with_switch), medians in rows.items():
        print(f"{name:<10}{with_switch!s:>8}" + "".join(f"{m:10.2f}" for m in medians))
    mine.send(None)
    other.join(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
