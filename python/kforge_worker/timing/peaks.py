"""The device's measured peaks for the roofline: memory bandwidth and GEMM FLOP/s.

Run once per GPU by the server, in a process of its own that imports no user code
(`python -m kforge_worker measure-peaks --device cuda:N --out FILE`), before the device
takes jobs; the server caches the result in <data-dir>/cache/peaks-<gpu uuid>.json and
adds `roofline` to every GPU result from it (docs/architecture.md "Roofline").

- bandwidth: a device-to-device copy of COPY_BYTES; bytes moved = 2 x COPY_BYTES (read and
  write), the best of COPY_REPS timed copies (CUDA events);
- FLOP/s: torch.matmul (cuBLAS) of GEMM_SIZE^3, 2 x M x N x K FLOPs, in fp32 (TF32 off),
  tf32, fp16 and bf16, the best of GEMM_REPS timed calls each.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import torch

COPY_BYTES = 1 << 30
COPY_REPS = 20
GEMM_SIZE = 8192
GEMM_REPS = 10
WARMUP_REPS = 3


def _best_ms(fn: Callable[[], object], reps: int) -> float:
    for _ in range(WARMUP_REPS):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def bandwidth_gb_s(device: torch.device) -> float:
    src = torch.ones(COPY_BYTES // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    ms = _best_ms(lambda: dst.copy_(src), COPY_REPS)
    return 2 * COPY_BYTES / (ms * 1e-3) / 1e9


def gemm_flop_s(device: torch.device, dtype: torch.dtype, *, tf32: bool = False) -> float:
    n = GEMM_SIZE
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        ms = _best_ms(lambda: torch.matmul(a, b, out=out), GEMM_REPS)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2.0 * n * n * n / (ms * 1e-3)


def measure(device: torch.device) -> dict[str, Any]:
    """The peaks object the server caches and reports (/health, results' `roofline`)."""
    props = torch.cuda.get_device_properties(device)
    flops = {
        "fp32": gemm_flop_s(device, torch.float32),
        "tf32": gemm_flop_s(device, torch.float32, tf32=True),
        "fp16": gemm_flop_s(device, torch.float16),
        "bf16": gemm_flop_s(device, torch.bfloat16),
    }
    return {
        "version": 1,
        "gpu_name": props.name,
        "gpu_uuid": str(getattr(props, "uuid", "")),
        "measured_at": int(time.time()),
        "torch_version": torch.__version__,
        "bandwidth_gb_s": bandwidth_gb_s(device),
        "flop_s": flops,
        "method": {
            "bandwidth": f"best of {COPY_REPS} device-to-device copies of {COPY_BYTES} bytes "
            "(read + write bytes counted)",
            "flop_s": f"best of {GEMM_REPS} torch.matmul (cuBLAS) of {GEMM_SIZE}^3",
        },
    }


def main(device_text: str, out_path: str | None) -> int:
    device = torch.device(device_text)
    torch.cuda.set_device(device)
    peaks = measure(device)
    text = json.dumps(peaks, indent=2)
    if out_path:
        with open(out_path, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0
