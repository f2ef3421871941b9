"""Each version of this op timed against torch at each size (the Phase 3 benchmark of
`kforge bench`, as a quick pytest run): a version must first return the reference's result
(the timing of a wrong kernel means nothing), then both are timed; the table of means and
speedups is printed at the end of the run.

Passing means the version was checked and timed, not that it is faster than torch: on the cpu
device Triton runs in its interpreter, thousands of times slower than torch.
"""

from __future__ import annotations

import math
from typing import Any


def test_version_is_timed_against_torch(op: Any, version: str, size: str) -> None:
    wrapper = op.wrapper(version)
    args = op.inputs(size, seed=0)
    op.check(op.call(wrapper, args), op.reference(args))
    kernel_ms = op.time_ms(lambda: op.call(wrapper, args))
    torch_ms = op.time_ms(lambda: op.reference(args))
    assert math.isfinite(kernel_ms) and kernel_ms > 0, kernel_ms
    assert math.isfinite(torch_ms) and torch_ms > 0, torch_ms
    op.timings.append(
        {
            "version": version,
            "size": size,
            "label": op.label(size),
            "kernel_ms": kernel_ms,
            "torch_ms": torch_ms,
            "speedup": torch_ms / kernel_ms,
        }
    )
