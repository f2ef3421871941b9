"""Each version of this op against its torch reference (the manifest's ``reference``) at each
size, with the manifest's tolerance for the dtype: what `kforge bench` checks in its Phase 3
correctness jobs, runnable with pytest alone (conftest.py says how and with which settings).

A version passes at a size when its file imports (its Triton code is compiled at the first
call), its wrapper returns a tensor of the reference's shape and dtype, and the values match in
every trial (fresh inputs each).
"""

from __future__ import annotations

from typing import Any


def test_version_matches_torch(op: Any, version: str, size: str) -> None:
    wrapper = op.wrapper(version)
    for trial in range(op.trials):
        args = op.inputs(size, seed=trial)
        expected = op.reference(args)
        op.check(op.call(wrapper, args), expected)
