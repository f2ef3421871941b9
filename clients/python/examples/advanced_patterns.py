"""Advanced patterns: literal tensor data, mixed precision contracts, saving and loading
contracts, targeting a function in PyTorch source, evaluating several sizes, and the tensor
initialisation kinds.

Run against a kforge server: python advanced_patterns.py [http://host:8000]
"""

import base64
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from kernel_eval_client import (
    IOContractBuilder,
    KernelCode,
    KernelEvalClient,
    KernelType,
    TensorData,
    TensorInit,
    TensorSpec,
    create_randn_spec,
    load_from_file,
    save_to_file,
    to_json,
)

SERVER_URL = (sys.argv[1:] or [os.environ.get("KERNEL_EVAL_URL", "http://localhost:8000")])[0]


def custom_tensor_data(client: KernelEvalClient) -> bool:
    """Send the input's exact values instead of letting the server generate them."""
    print("Custom tensor data")
    values = np.array([[1, -2, 3], [-4, 5, -6]], dtype=np.float32)
    spec = TensorSpec(
        shape=list(values.shape),
        dtype="float32",
        data=TensorData(
            data_b64=base64.b64encode(values.tobytes()).decode(),
            dtype="float32",
            shape=list(values.shape),
            compress="none",
        ),
    )
    contract = IOContractBuilder().add_input_tensor("custom_input", spec).build()
    kernel = KernelCode(
        source_code="import torch\ndef absolute(x):\n    return torch.abs(x)\n",
        kernel_type=KernelType.TORCH,
        io=contract,
        metadata={"function_name": "absolute"},
    )
    result = client.evaluate(kernel, num_trials=10)
    exec_result = result["kernel_exec_result"]
    print(f"  compiled={exec_result['compiled']} correctness={exec_result['correctness']}")
    return bool(exec_result["compiled"] and exec_result["correctness"])


def mixed_precision() -> bool:
    print("Mixed precision contract")
    contract = (
        IOContractBuilder()
        .add_input_tensor("x_fp32", create_randn_spec([1024], "float32"))
        .add_input_tensor("x_fp16", create_randn_spec([1024], "float16"))
        .add_input_tensor("x_bf16", create_randn_spec([1024], "bfloat16"))
        .add_output_tensor("out_fp32", [1024], "float32")
        .add_output_tensor("out_fp16", [1024], "float16")
        .build()
    )
    dtypes = [a.tensor_spec.dtype for a in contract.args if a.tensor_spec is not None]
    print(f"  dtypes: {dtypes}")
    return dtypes == ["float32", "float16", "bfloat16", "float32", "float16"]


def save_and_load() -> bool:
    print("Save and load an IOContract")
    contract = (
        IOContractBuilder()
        .add_input_tensor("x", create_randn_spec([64, 64], seed=42))
        .add_input_tensor("y", create_randn_spec([64, 64], seed=43))
        .add_output_tensor("z", [64, 64])
        .set_grid(4, 4)
        .set_block(16, 16)
        .build()
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "contract.json"
        save_to_file(contract, path)
        loaded = load_from_file(path, "IOContract")
    print(f"  args: {len(loaded.args)}, grid: {loaded.launch.grid.x}x{loaded.launch.grid.y}")
    print(f"  JSON: {to_json(contract)[:60]}...")
    return loaded.to_dict() == contract.to_dict()


def function_targeting(client: KernelEvalClient) -> bool:
    """Only the named function runs: the others would give different answers."""
    print("PyTorch function targeting")
    source = """
import torch
import torch.nn as nn


def my_custom_function(x, y, alpha=2.0):
    return x + alpha * y


def another_function(x):
    return x * 2


class MyModel(nn.Module):
    def forward(self, x, y):
        return x - y
"""
    contract = (
        IOContractBuilder()
        .add_input_tensor("x", create_randn_spec([128, 128]))
        .add_input_tensor("y", create_randn_spec([128, 128]))
        .add_meta_param("alpha", 3)
        .build()
    )
    kernel = KernelCode(
        source_code=source,
        kernel_type=KernelType.TORCH,
        io=contract,
        metadata={"function_name": "my_custom_function"},
    )
    reference = KernelCode(
        source_code="import torch\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x, y):\n        return x + 3 * y\n",
        kernel_type=KernelType.TORCH,
    )
    result = client.compare(reference, kernel, num_trials=10)
    exec_result = result["kernel_exec_result"]
    print(f"  correct against x + 3y: {exec_result['correctness']}")
    return bool(exec_result["correctness"])


def several_sizes(client: KernelEvalClient) -> bool:
    print("Evaluating several sizes")
    results = []
    for size in (64, 128, 256):
        contract = (
            IOContractBuilder().add_input_tensor("x", create_randn_spec([size, size])).build()
        )
        kernel = KernelCode(
            source_code="import torch\ndef process(x):\n    return torch.relu(x)\n",
            kernel_type=KernelType.TORCH,
            io=contract,
            metadata={"function_name": "process"},
        )
        result = client.evaluate(kernel, num_trials=10)
        if result["status"] == "success" and result["kernel_exec_result"]["correctness"]:
            runtime = result["kernel_exec_result"]["runtime"]
            results.append((size, runtime))
            print(f"  {size}x{size}: {runtime:.4f} ms")
    return len(results) == 3


def init_patterns() -> bool:
    print("Initialisation patterns")
    patterns = [
        ("randn (mean 5, std 2)", TensorInit(kind="randn", seed=42, mean=5.0, std=2.0)),
        ("uniform [-1, 1]", TensorInit(kind="uniform", seed=43, low=-1.0, high=1.0)),
        ("zeros", TensorInit(kind="zeros")),
        ("ones", TensorInit(kind="ones")),
        ("full 3.14", TensorInit(kind="full", fill_value=3.14)),
        ("arange 0, 0.1, ...", TensorInit(kind="arange", start=0.0, step=0.1)),
    ]
    for name, init in patterns:
        spec = TensorSpec(shape=[10], dtype="float32", init=init)
        print(f"  {name}: {spec.to_dict()['init']}")
    return True


def main() -> int:
    client = KernelEvalClient(SERVER_URL)
    checks = [
        custom_tensor_data(client),
        mixed_precision(),
        save_and_load(),
        function_targeting(client),
        several_sizes(client),
        init_patterns(),
    ]
    client.close()
    print(f"\n{sum(checks)} of {len(checks)} patterns worked")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
