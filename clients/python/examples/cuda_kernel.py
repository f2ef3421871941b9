"""Evaluate raw CUDA kernels with a launch configuration: a vector add (the source's only
__global__ function, so it needs no kernel_name), a tiled matrix multiply, and one kernel of a
file with several, named by metadata.kernel_name with compiler options.

Run against a kforge server: python cuda_kernel.py [http://host:8000]
A server without a GPU still compiles the kernels (NVRTC) and reports that there is no CUDA
device to run them on; with --expect-gpu the example also requires them to be correct.
"""

import os
import sys

from kernel_eval_client import (
    IOContractBuilder,
    KernelCode,
    KernelEvalClient,
    KernelType,
    create_randn_spec,
)

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
SERVER_URL = (ARGS or [os.environ.get("KERNEL_EVAL_URL", "http://localhost:8000")])[0]
EXPECT_GPU = "--expect-gpu" in sys.argv

VECTOR_ADD = """
__global__ void vector_add(float* a, float* b, float* c, int n) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) {
        c[tid] = a[tid] + b[tid];
    }
}
"""

MATMUL = """
#define TILE 16

__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        As[threadIdx.y][threadIdx.x] =
            (row < M && t * TILE + threadIdx.x < K) ? A[row * K + t * TILE + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] =
            (col < N && t * TILE + threadIdx.y < K) ? B[(t * TILE + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) sum += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = sum;
}
"""

SEVERAL = """
__global__ void kernel_add(float* a, float* b, float* c, int n) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) c[tid] = a[tid] + b[tid];
}

__global__ void kernel_scale(const float* input, float* output, float scale, int n) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) output[tid] = input[tid] * scale;
}
"""


def report(name: str, result: dict) -> bool:
    """Prints the outcome; True when it is what this server can give."""
    exec_result = result["kernel_exec_result"]
    if result["status"] != "success" or not exec_result["compiled"]:
        print(f"{name}: compilation failed: {exec_result.get('compilation_error')}")
        return False
    print(f"{name}: compiled successfully")
    if exec_result["correctness"]:
        print(f"  Runtime: {exec_result['runtime']:.4f} ms")
        return True
    print(f"  Not run: {exec_result.get('validation_error')}")
    return not EXPECT_GPU


def main() -> int:
    client = KernelEvalClient(SERVER_URL)
    ok = True

    n, block = 1 << 16, 256
    contract = (
        IOContractBuilder()
        .add_input_tensor("a", create_randn_spec([n], "float32", seed=42))
        .add_input_tensor("b", create_randn_spec([n], "float32", seed=43))
        .add_output_tensor("c", [n], "float32")
        .add_scalar("n", "int", n)
        .set_grid((n + block - 1) // block)
        .set_block(block)
        .build()
    )
    kernel = KernelCode(source_code=VECTOR_ADD, kernel_type=KernelType.CUDA, io=contract)
    ok &= report("vector_add", client.evaluate(kernel, num_trials=50))

    m = n_cols = k = 128
    contract = (
        IOContractBuilder()
        .add_input_tensor("A", create_randn_spec([m, k], "float32", seed=100))
        .add_input_tensor("B", create_randn_spec([k, n_cols], "float32", seed=101))
        .add_output_tensor("C", [m, n_cols], "float32")
        .add_scalar("M", "int", m)
        .add_scalar("N", "int", n_cols)
        .add_scalar("K", "int", k)
        .set_grid((n_cols + 15) // 16, (m + 15) // 16)
        .set_block(16, 16)
        .build()
    )
    kernel = KernelCode(source_code=MATMUL, kernel_type=KernelType.CUDA, io=contract)
    result = client.evaluate(kernel, num_trials=20)
    ok &= report("matmul_tiled", result)
    runtime = result["kernel_exec_result"]["runtime"]
    if runtime > 0:
        print(f"  Performance: {2 * m * n_cols * k / 1e9 / (runtime / 1e3):.1f} GFLOPS")

    contract = (
        IOContractBuilder()
        .add_input_tensor("input", create_randn_spec([1024], "float32", seed=200))
        .add_output_tensor("output", [1024], "float32")
        .add_scalar("scale", "float", 2.5)
        .add_scalar("n", "int", 1024)
        .set_grid(4)
        .set_block(256)
        .build()
    )
    kernel = KernelCode(
        source_code=SEVERAL,
        kernel_type=KernelType.CUDA,
        io=contract,
        metadata={"kernel_name": "kernel_scale", "compiler_options": ["--use_fast_math"]},
    )
    ok &= report("kernel_scale", client.evaluate(kernel, num_trials=50))

    client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
