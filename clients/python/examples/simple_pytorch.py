"""Compare a PyTorch reference with a faster implementation (KernelBench Model / ModelNew).

Run against a kforge server: python simple_pytorch.py [http://host:8000]
(or set KERNEL_EVAL_URL). Exits non-zero when the comparison does not come out right.
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

SERVER_URL = (sys.argv[1:] or [os.environ.get("KERNEL_EVAL_URL", "http://localhost:8000")])[0]

REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""

# The candidate: the same operation written differently (on a GPU host this would be a
# torch_cuda module with an inline CUDA kernel).
CANDIDATE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
"""


def main() -> int:
    client = KernelEvalClient(SERVER_URL)

    ref_kernel = KernelCode(source_code=REFERENCE, kernel_type=KernelType.TORCH)
    custom_kernel = KernelCode(source_code=CANDIDATE, kernel_type=KernelType.TORCH)

    # Optional: say what the inputs are (without it the server calls get_inputs()).
    io_contract = IOContractBuilder().add_input_tensor("x", create_randn_spec([256, 256])).build()
    ref_kernel.io = io_contract
    custom_kernel.io = io_contract

    print("Comparing two ReLU implementations...")
    result = client.compare(ref_kernel, custom_kernel, num_trials=50)

    if result["status"] != "success":
        print(f"Error: {result.get('error', 'Unknown error')}")
        return 1
    exec_result = result["kernel_exec_result"]
    if not exec_result["compiled"]:
        print(f"Compilation failed: {exec_result.get('compilation_error')}")
        return 1
    print("Custom kernel compiled successfully")
    if not exec_result["correctness"]:
        print(f"Validation failed: {exec_result.get('validation_error')}")
        return 1
    print("Custom kernel passed validation")

    ref_runtime = result["ref_runtime"]["mean"]
    custom_runtime = exec_result["runtime"]
    print("\nPerformance Results:")
    print(f"  Reference runtime: {ref_runtime:.4f} ms")
    print(f"  Custom runtime: {custom_runtime:.4f} ms")
    print(f"  Speedup: {ref_runtime / custom_runtime:.2f}x")

    if "runtime_stats" in exec_result:
        stats = exec_result["runtime_stats"]
        print("\nDetailed Statistics:")
        print(f"  Mean: {stats.mean:.4f} ms")
        print(f"  Std: {stats.std:.4f} ms")
        print(f"  Min: {stats.min:.4f} ms")
        print(f"  Max: {stats.max:.4f} ms")
        print(f"  Median: {stats.median:.4f} ms")
        print(f"  95th percentile: {stats.percentile_95:.4f} ms")
        print(f"  99th percentile: {stats.percentile_99:.4f} ms")

    client.close()
    return 0 if ref_runtime > 0 and custom_runtime > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
