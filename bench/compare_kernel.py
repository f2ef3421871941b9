"""The judge's comparison of one output: the torch path (compare_torch, then output_spread,
as a trial without the fused kernel runs them) against the fused kernel (compare_fused: both
in one pass), in the same process on the same tensors; the ratio is the figure.

Each size is an fp32 (and an fp16) output with one wrong element near its end, so both paths
do their full work and find the same mismatch. The sizes reach KernelBench level 1's largest
(4096 x 393216 fp32: 1.6 Gi elements, 6.4 GB a tensor).

    python bench/compare_kernel.py [--device cuda:0] [--repeats 3] [--max-gib 6.5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

SIZES = (1 << 20, 1 << 24, 1 << 28, 4096 * 393216)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-gib", type=float, default=6.5, help="largest tensor, in GiB")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args()

    from kforge_worker.__main__ import prepare_environment

    prepare_environment("cpu" if args.device == "cpu" else "cuda")  # interpreter on cpu only
    import torch

    from kforge_worker.check.compare import verify_fused

    device = torch.device(args.device)
    rows = []
    for dtype in (torch.float32, torch.float16):
        problems = verify_fused(device, dtype, False)
        if problems:
            print(f"{dtype}: the fused kernel disagrees with torch: {problems[0]}")
            return 1
        for numel in SIZES:
            gib = numel * torch.empty((), dtype=dtype).element_size() / 2**30
            if gib > args.max_gib:
                continue
            row = _time_both(device, dtype, numel, args.repeats)
            if device.type == "cuda":
                torch.cuda.empty_cache()  # the last size's tensors are gone now
            row["gib"] = round(gib, 3)
            row["fused_gbps"] = round(2 * gib * 2**30 / (row["fused_ms"] / 1e3) / 1e9, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"\ncomparison of one output on {name} (best of {args.repeats}):")
    print(f"{'dtype':8} {'elements':>12} {'GiB':>7} {'torch ms':>10} {'fused ms':>10} {'ratio':>7}")
    for r in rows:
        print(
            f"{r['dtype']:8} {r['elements']:>12} {r['gib']:>7} {r['torch_ms']:>10} "
            f"{r['fused_ms']:>10} {r['ratio']:>6}x"
        )
    if args.json:
        args.json.write_text(json.dumps({"device": name, "rows": rows}, indent=1))
    return 0


def _time_both(device: object, dtype: object, numel: int, repeats: int) -> dict[str, object]:
    """Both paths on one output of `numel` elements with one wrong element near its end."""
    import torch

    from kforge_worker.check.compare import Tolerance, compare_fused, compare_torch, output_spread

    want = torch.randn(numel, device=device, dtype=dtype)
    got = want.clone()
    got[numel - 3] += 1.0
    tol = Tolerance(1e-2, 1e-2)
    torch_s = _best(
        lambda: (compare_torch("o", want, got, tol, False), output_spread(want, got, tol)),
        device,
        repeats,
    )
    fused_s = _best(lambda: compare_fused("o", want, got, tol, False), device, repeats)
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "elements": numel,
        "torch_ms": round(torch_s * 1e3, 3),
        "fused_ms": round(fused_s * 1e3, 3),
        "ratio": round(torch_s / fused_s, 1),
    }


def _best(fn: object, device: object, repeats: int) -> float:
    import torch

    fn()  # loads kernels and caches
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)  # each path synchronises at its end
    return best


if __name__ == "__main__":
    sys.exit(main())
