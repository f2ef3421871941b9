"""Setup for the kernel library's tests (tests/kernels).

They run every version of every op of kernels/ against its torch reference on one device:
KFORGE_TEST_DEVICE (default cpu: torch on the CPU, Triton in its interpreter, which must be
chosen before triton is imported, hence the first lines; cuda:0 on the GPU host, where
scripts/gpu-check.sh runs them).
"""

from __future__ import annotations

import os

DEVICE = os.environ.get("KFORGE_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"
else:
    os.environ.pop("TRITON_INTERPRET", None)
