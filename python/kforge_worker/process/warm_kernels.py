"""The tiny Triton kernel the zygote compiles and each child launches once (warm-up).

Import this module only after TRITON_INTERPRET has its final value: @triton.jit decides at
decoration time whether the kernel is compiled or interpreted.
"""

import triton
import triton.language as tl

BLOCK = 128


# A Triton kernel: Triton has no types, and its parameters stay unannotated (Triton reads
# annotations as part of the kernel's signature).
@triton.jit  # type: ignore[untyped-decorator]
def warm_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


SIGNATURE = {
    "x_ptr": "*fp32",
    "y_ptr": "*fp32",
    "out_ptr": "*fp32",
    "n": "i32",
    "BLOCK": "constexpr",
}
