"""The kernels of bench/timing_fidelity.py: a vector add, a sum reduction and a float32 GEMM,
each written as a `triton`, `cuda`, `torch` and `torch_cuda` kernel (request bodies).

Every kernel takes its inputs from an IOContract, so a kernel's source does not depend on
its size (a `torch_cuda` extension is built once per source, not once per size). The
vector add of the `cuda` and `triton` kinds comes from the integration tests' kernels.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from integration import cuda_kernels, kernels

KINDS = ("triton", "cuda", "torch", "torch_cuda")
REDUCE_N = 1 << 24
GEMM_N = 2048


def _tensor(name: str, shape: list[int], role: str = "input") -> dict[str, Any]:
    return {"name": name, "type": "tensor", "role": role,
            "tensor_spec": {"shape": shape, "dtype": "float32"}}  # fmt: skip


def _int(name: str, value: int, *, meta: bool = False) -> dict[str, Any]:
    return {"name": name, "type": "int", "value": value, "is_meta": meta}


TORCH_ADD = """
import torch

class Model(torch.nn.Module):
    def forward(self, x, y):
        return x + y
"""

TORCH_SUM = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return x.sum().reshape(1)
"""

TORCH_MATMUL = """
import torch

class Model(torch.nn.Module):
    def forward(self, a, b):
        return a @ b
"""

CUDA_SUM = """
extern "C" __global__ void sum_kernel(const float* x, float* out, int n) {
  __shared__ float partial[1024];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = partial[0];
}
"""

# The torch_cuda kinds run the `cuda` kinds' device code (one extension, built once by
# load_inline) behind host functions that allocate the output and launch.
TORCH_CUDA_HOST = """
torch::Tensor add_cuda(torch::Tensor x, torch::Tensor y) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    vector_add<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                         out.data_ptr<float>(), n);
    return out;
}

torch::Tensor sum_cuda(torch::Tensor x) {
    auto out = torch::empty({1}, x.options());
    sum_kernel<<<1, 1024>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
    return out;
}

torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b) {
    int m = a.size(0), k = a.size(1), n = b.size(1);
    auto c = torch::empty({m, n}, a.options());
    dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    matmul<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(),
                            m, n, k);
    return c;
}
"""

TORCH_CUDA_SOURCE = "\n".join(
    [
        "#define TILE 16",
        cuda_kernels.VECTOR_ADD.replace("EXTRA", ""),
        CUDA_SUM,
        cuda_kernels.TILED_MATMUL,
        TORCH_CUDA_HOST,
    ]
)

TORCH_CUDA_PRELUDE = f'''
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""{TORCH_CUDA_SOURCE}"""

ext = load_inline(
    name="kforge_fidelity_ext",
    cpp_sources="""
torch::Tensor add_cuda(torch::Tensor x, torch::Tensor y);
torch::Tensor sum_cuda(torch::Tensor x);
torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b);
""",
    cuda_sources=CUDA_SRC,
    functions=["add_cuda", "sum_cuda", "matmul_cuda"],
)
'''


def _torch_cuda_model(call: str, params: str) -> str:
    return (
        TORCH_CUDA_PRELUDE
        + f"""

class Model(torch.nn.Module):
    def forward(self, {params}):
        return {call}
"""
    )


TRITON_SUM = """
import torch
import triton
import triton.language as tl

@triton.jit
def partial_sums(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(x, axis=0))

@triton.jit
def final_sum(partial_ptr, out_ptr, COUNT: tl.constexpr, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, COUNT, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < COUNT, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))

def triton_sum(x):
    # Two kernels (partial sums, then their sum): deterministic, no atomics.
    block = 4096
    count = triton.cdiv(x.numel(), block)
    partial = torch.empty(count, device=x.device, dtype=torch.float32)
    out = torch.empty(1, device=x.device, dtype=torch.float32)
    partial_sums[(count,)](x, partial, x.numel(), BLOCK=block)
    final_sum[(1,)](partial, out, COUNT=count, BLOCK=1024)
    return out
"""

TRITON_MATMUL = """
import triton
import triton.language as tl

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
"""


def vector_add(kind: str, n: int) -> dict[str, Any]:
    if kind == "triton":
        k = kernels.triton_add()
        k["io"] = kernels.vector_add_io(n, block=1024)
        return k
    if kind == "cuda":
        return cuda_kernels.vector_add(n=n)
    io = {"args": [_tensor("x", [n]), _tensor("y", [n])]}
    source = TORCH_ADD if kind == "torch" else _torch_cuda_model("ext.add_cuda(x, y)", "x, y")
    return {"source_code": source, "kernel_type": kind, "io": io, "metadata": {}}


def reduction(kind: str, n: int = REDUCE_N) -> dict[str, Any]:
    if kind == "triton":
        io = {"args": [_tensor("x", [n])]}
        return {"source_code": TRITON_SUM, "kernel_type": "triton", "io": io,
                "metadata": {"entry_point": "triton_sum"}}  # fmt: skip
    if kind == "cuda":
        io = {
            "args": [_tensor("x", [n]), _tensor("out", [1], "output"), _int("n", n)],
            "launch": {"grid": [1, 1, 1], "block": [1024, 1, 1]},
        }
        return cuda_kernels.cuda_kernel(CUDA_SUM, io, name="sum_kernel")
    io = {"args": [_tensor("x", [n])]}
    source = TORCH_SUM if kind == "torch" else _torch_cuda_model("ext.sum_cuda(x)", "x")
    return {"source_code": source, "kernel_type": kind, "io": io, "metadata": {}}


def gemm(kind: str, n: int = GEMM_N) -> dict[str, Any]:
    if kind == "triton":
        block = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
        io = {
            "args": [
                _tensor("a", [n, n]), _tensor("b", [n, n]), _tensor("c", [n, n], "output"),
                _int("M", n, meta=True), _int("N", n, meta=True), _int("K", n, meta=True),
                *(_int(name, v, meta=True) for name, v in block.items()),
            ],
            "launch": {"grid": {"x": n // 64, "y": n // 64}, "num_warps": 4},
        }  # fmt: skip
        return {"source_code": TRITON_MATMUL, "kernel_type": "triton", "io": io,
                "metadata": {"entry_point": "matmul_kernel"}}  # fmt: skip
    if kind == "cuda":
        return cuda_kernels.tiled_matmul(n, n, n)
    io = {"args": [_tensor("a", [n, n]), _tensor("b", [n, n])]}
    source = TORCH_MATMUL if kind == "torch" else _torch_cuda_model("ext.matmul_cuda(a, b)", "a, b")
    return {"source_code": source, "kernel_type": kind, "io": io, "metadata": {}}
