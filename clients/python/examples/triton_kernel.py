"""Evaluate a Triton kernel described by an IOContract, then compare it with a PyTorch
function named by metadata.function_name.

Run against a kforge server: python triton_kernel.py [http://host:8000]
(on a server's cpu device Triton runs in its interpreter: sizes here are small).
"""

import os
import sys

from kernel_eval_client import (
    IOContractBuilder,
    KernelCode,
    KernelEvalClient,
    KernelType,
    create_ones_spec,
    create_randn_spec,
)

SERVER_URL = (sys.argv[1:] or [os.environ.get("KERNEL_EVAL_URL", "http://localhost:8000")])[0]

TRITON_SOURCE = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)
"""

REFERENCE_SOURCE = """
import torch


def optimized_add(x, y):
    return x + y
"""


def main() -> int:
    client = KernelEvalClient(SERVER_URL)
    n_elements = 8192
    block_size = 1024

    io_contract = (
        IOContractBuilder()
        .add_input_tensor("x", create_randn_spec([n_elements], "float32", seed=42))
        .add_input_tensor("y", create_ones_spec([n_elements], "float32"))
        .add_output_tensor("output", [n_elements], "float32")
        .add_scalar("n_elements", "int", n_elements)
        .add_meta_param("BLOCK_SIZE", block_size)
        .set_grid(n_elements // block_size)
        .set_num_warps(4)
        .build()
    )
    triton_kernel = KernelCode(
        source_code=TRITON_SOURCE, kernel_type=KernelType.TRITON, io=io_contract
    )

    print("Evaluating the Triton kernel...")
    result = client.evaluate(triton_kernel, num_trials=20)
    if result["status"] != "success":
        print(f"Error: {result.get('error', 'Unknown error')}")
        return 1
    exec_result = result["kernel_exec_result"]
    if not exec_result["compiled"]:
        print(f"Compilation failed: {exec_result.get('compilation_error')}")
        return 1
    print("Triton kernel compiled successfully")
    runtime = exec_result["runtime"]
    bytes_accessed = n_elements * 4 * 3
    print(f"  Runtime: {runtime:.4f} ms")
    print(f"  Memory bandwidth: {bytes_accessed / 1e9 / (runtime / 1e3):.2f} GB/s")
    metrics = (exec_result.get("metadata") or {}).get("device_metrics")
    if metrics and "speed_of_light" in metrics:
        print(f"  Memory throughput: {metrics['speed_of_light'].get('memory_throughput_pct')}%")

    print("\nComparing with a PyTorch reference...")
    ref_kernel = KernelCode(
        source_code=REFERENCE_SOURCE,
        kernel_type=KernelType.TORCH,
        io=io_contract,
        metadata={"function_name": "optimized_add"},
    )
    result = client.compare(ref_kernel, triton_kernel, num_trials=20)
    exec_result = result["kernel_exec_result"]
    if result["status"] != "success" or not exec_result["correctness"]:
        print(f"Comparison failed: {exec_result.get('validation_error') or result.get('error')}")
        return 1
    ref_runtime = result["ref_runtime"]["mean"]
    triton_runtime = exec_result["runtime"]
    print(f"  PyTorch runtime: {ref_runtime:.4f} ms")
    print(f"  Triton runtime: {triton_runtime:.4f} ms")
    print(f"  Speedup: {ref_runtime / triton_runtime:.2f}x")
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
