"""The kforge kernel library's ``mha`` op: scaled dot-product attention in Triton, four versions.

Each version file is self-contained (torch and triton only) and defines ``triton_mha`` with the
torch op's interface; manifest.json holds the torch reference, the inputs per size, the
tolerances per dtype and the cost per call (docs/kernel-library.md).
"""

import json
from pathlib import Path

from .v1_baseline import triton_mha as v1_baseline
from .v2_tiling import triton_mha as v2_tiling
from .v3_coalesced import triton_mha as v3_coalesced
from .v4_optimized import triton_mha as v4_optimized

VERSIONS = {
    "v1_baseline": v1_baseline,
    "v2_tiling": v2_tiling,
    "v3_coalesced": v3_coalesced,
    "v4_optimized": v4_optimized,
}
MANIFEST = json.loads((Path(__file__).with_name("manifest.json")).read_text())

__all__ = ["MANIFEST", "VERSIONS", "v1_baseline", "v2_tiling", "v3_coalesced", "v4_optimized"]
