"""`cuda` kernel sources and request bodies shared by the CUDA integration tests and benches."""

from __future__ import annotations

from typing import Any

VECTOR_ADD = """
extern "C" __global__ void vector_add(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + y[i]EXTRA;
}
"""

# A shared-memory tiled matmul C = A @ B (row-major, M x K times K x N); TILE is a meta
# argument, i.e. a -DTILE=... compile option.
TILED_MATMUL = """
extern "C" __global__ void matmul(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    int ak = t + threadIdx.x;
    int bk = t + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (row < m && ak < k) ? a[row * k + ak] : 0.0f;
    bs[threadIdx.y][threadIdx.x] = (col < n && bk < k) ? b[bk * n + col] : 0.0f;
    __syncthreads();
    for (int i = 0; i < TILE; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = acc;
}
"""

NAIVE_MATMUL = """
extern "C" __global__ void matmul_ref(const float* a, const float* b, float* c,
                                      int m, int n, int k) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m || col >= n) return;
  double acc = 0.0;
  for (int i = 0; i < k; ++i) acc += (double)a[row * k + i] * (double)b[i * n + col];
  c[row * n + col] = (float)acc;
}
"""

OUT_OF_BOUNDS = """
extern "C" __global__ void vector_add(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i + (1ll << 34)] = x[i] + y[i];
}
"""

INFINITE_LOOP = """
extern "C" __global__ void vector_add(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  // clock64() is opaque to the compiler and never goes back, so this never ends.
  long long start = clock64();
  while (clock64() >= start) { }
  if (i < n) out[i] = x[i] + y[i];
}
"""

SYNTAX_ERROR = """
extern "C" __global__ void vector_add(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x
  if (i < n) out[i] = x[i] + y[i];
}
"""

TORCH_MATMUL_REF = """
import torch

class Model(torch.nn.Module):
    def forward(self, a, b):
        return a @ b
"""

TORCH_ADD_REF = """
import torch

class Model(torch.nn.Module):
    def forward(self, x, y):
        return x + y
"""


def vector_add_io(n: int = 1 << 16, block: int = 256) -> dict[str, Any]:
    tensor = {"shape": [n], "dtype": "float32"}
    return {
        "args": [
            {"name": "x", "type": "tensor", "tensor_spec": tensor},
            {"name": "y", "type": "tensor", "tensor_spec": tensor},
            {"name": "out", "type": "tensor", "role": "output", "tensor_spec": tensor},
            {"name": "n", "type": "int", "value": n},
        ],
        "launch": {"grid": {"x": (n + block - 1) // block}, "block": {"x": block}},
    }


def cuda_kernel(
    source: str,
    io: dict[str, Any],
    name: str = "vector_add",
    compile_options: list[str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"kernel_name": name}
    if compile_options is not None:
        metadata["compile_options"] = compile_options
    return {"source_code": source, "kernel_type": "cuda", "io": io, "metadata": metadata}


def vector_add(extra: str = "", n: int = 1 << 16, source: str = VECTOR_ADD) -> dict[str, Any]:
    return cuda_kernel(source.replace("EXTRA", extra), vector_add_io(n))


def matmul_io(m: int, n: int, k: int, tile: int | None = 16) -> dict[str, Any]:
    args: list[dict[str, Any]] = [
        {"name": "a", "type": "tensor", "tensor_spec": {"shape": [m, k], "dtype": "float32"}},
        {"name": "b", "type": "tensor", "tensor_spec": {"shape": [k, n], "dtype": "float32"}},
        {
            "name": "c",
            "type": "tensor",
            "role": "output",
            "tensor_spec": {"shape": [m, n], "dtype": "float32"},
        },
        {"name": "m", "type": "int", "value": m},
        {"name": "n", "type": "int", "value": n},
        {"name": "k", "type": "int", "value": k},
    ]
    t = tile or 16
    if tile is not None:
        args.append({"name": "TILE", "type": "int", "value": tile, "is_meta": True})
    return {
        "args": args,
        "launch": {"grid": [(n + t - 1) // t, (m + t - 1) // t], "block": [t, t]},
    }


def tiled_matmul(m: int = 256, n: int = 192, k: int = 320) -> dict[str, Any]:
    return cuda_kernel(TILED_MATMUL, matmul_io(m, n, k), name="matmul", compile_options=["-O3"])


def naive_matmul(m: int = 256, n: int = 192, k: int = 320) -> dict[str, Any]:
    return cuda_kernel(NAIVE_MATMUL, matmul_io(m, n, k, tile=None), name="matmul_ref")
