"""A tensor's elements as the integers of their bits (compare.same_bits, the fused
comparison's digests, the link's scalar checks).

Its own module so that compare.py and fused_compare.py, which both read tensors as bits, do
not import each other.
"""

from __future__ import annotations

import torch

_BITS_VIEW: dict[int, torch.dtype] = {
    1: torch.uint8,
    2: torch.int16,
    4: torch.int32,
    8: torch.int64,
}


def bits_view(t: torch.Tensor) -> torch.Tensor | None:
    """`t`'s elements as integers of the same size (a view), or None for complex dtypes and
    sizes with no such integer."""
    view = _BITS_VIEW.get(t.element_size())
    return None if view is None or t.is_complex() else t.view(view)
