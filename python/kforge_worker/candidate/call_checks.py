"""What the candidate process watches around the candidate's calls: the Triton launches it makes
(a launch hook on a GPU, only around correctness calls; the interpreter's run on the cpu), the
tensor arguments it must leave unchanged (a copy before the call, or a BitsDigest where the
device has no room for one) and returned outputs that alias an input. All of it is the
candidate process's claim, which the judge bounds and checks (docs/worker-protocol.md).
"""

from __future__ import annotations

from typing import Any

import torch

from kforge_worker.candidate.binding import Invocation
from kforge_worker.check.compare import BitsDigest, bits_digest, same_bits
from kforge_worker.core.devinfo import is_device_oom
from kforge_worker.core.inputs import BoundArg

# Triton launches in this process (a launch-enter hook installed before any user code).
LAUNCHES = [0]


def _count_launch(*_: Any) -> None:
    LAUNCHES[0] += 1


def install_launch_counter() -> None:
    """Counts Triton kernel launches of the interpreter (GPU launches are counted by a
    launch hook, only around correctness calls: see counting_launches)."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return
    run = InterpretedFunction.run

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        LAUNCHES[0] += 1
        return run(self, *args, **kwargs)

    InterpretedFunction.run = counted


class counting_launches:
    """Counts GPU Triton launches inside the block (the hook costs host time per launch, so
    it is never on while timing)."""

    def __enter__(self) -> None:
        try:
            import triton

            triton.knobs.runtime.launch_enter_hook.add(_count_launch)
        except (ImportError, AttributeError):
            pass

    def __exit__(self, *exc: object) -> None:
        try:
            import triton

            triton.knobs.runtime.launch_enter_hook.remove(_count_launch)
        except (ImportError, AttributeError):
            pass


def snapshot(args: list[BoundArg]) -> list[torch.Tensor | BitsDigest | None]:
    """What each tensor argument a call must leave unchanged was before it (other values as
    None), to compare with after the call here instead of sending the inputs back to the
    judge: a copy, or where the device has no room for one its BitsDigest."""
    return [_before(a.value) if isinstance(a.value, torch.Tensor) else None for a in args]


def _before(value: torch.Tensor) -> torch.Tensor | BitsDigest:
    try:
        return value.clone()
    except RuntimeError as e:
        if not is_device_oom(e):
            raise
        torch.cuda.empty_cache()  # the failed copy's memory, for the call that follows
        return bits_digest(value)


def unchanged(before: torch.Tensor | BitsDigest, after: Any) -> bool:
    if not isinstance(after, torch.Tensor):
        return False
    if isinstance(before, BitsDigest):
        return bits_digest(after) == before
    return same_bits(before, after)


def aliases(inv: Invocation, described: list[dict[str, Any]], values: list[Any]) -> list[list[str]]:
    """[output, input] pairs where a returned output shares memory with an input (their byte
    spans overlap: the inputs may all be views of one region, so storages cannot tell)."""
    if inv.outputs:  # declared output buffers are the harness's own tensors
        return []
    inputs = [(a.name, _span(a.value)) for a in inv.read_only if isinstance(a.value, torch.Tensor)]
    pairs = []
    for d, value in zip(described, values, strict=True):
        if isinstance(value, torch.Tensor):
            lo, hi = _span(value)
            owner = next((n for n, (a, b) in inputs if lo < b and a < hi), None)
            if owner is not None:
                pairs.append([str(d["name"]), owner])
    return pairs


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes a tensor's elements occupy: [first, past the last)."""
    if t.numel() == 0:
        return t.data_ptr(), t.data_ptr()
    extent = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride(), strict=True))
    low = t.data_ptr() - sum(
        (size - 1) * -stride for size, stride in zip(t.shape, t.stride(), strict=True) if stride < 0
    )
    return low, low + (extent + 1) * t.element_size()
