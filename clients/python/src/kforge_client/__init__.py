"""kforge's Python client, compatible with the kernel evaluation server's `kernel_eval_client`.

from kforge_client import KernelEvalClient, KernelCode, KernelType
# or, unchanged from code written for the old server:
from kernel_eval_client import KernelEvalClient, KernelCode, KernelType
"""

from kforge_client.builder import IOContractBuilder
from kforge_client.client import (
    AsyncKernelEvalClient,
    BatchItem,
    CompareJob,
    EvaluateJob,
    KernelEvalClient,
    KernelEvalError,
)
from kforge_client.models import (
    ArgSpec,
    IOContract,
    KernelCode,
    KernelType,
    LaunchConfig,
    LaunchDim,
    RuntimeStats,
    TensorData,
    TensorInit,
    TensorSpec,
)
from kforge_client.results import EvaluationResult, JobStatus, KernelExecResult
from kforge_client.specs import (
    create_arange_spec,
    create_full_spec,
    create_ones_spec,
    create_randn_spec,
    create_tensor_spec,
    create_uniform_spec,
    create_zeros_spec,
    load_from_file,
    save_to_file,
    to_json,
)

__version__ = "0.1.0"

__all__ = [
    "ArgSpec",
    "AsyncKernelEvalClient",
    "BatchItem",
    "CompareJob",
    "EvaluateJob",
    "EvaluationResult",
    "IOContract",
    "IOContractBuilder",
    "JobStatus",
    "KernelCode",
    "KernelEvalClient",
    "KernelEvalError",
    "KernelExecResult",
    "KernelType",
    "LaunchConfig",
    "LaunchDim",
    "RuntimeStats",
    "TensorData",
    "TensorInit",
    "TensorSpec",
    "create_arange_spec",
    "create_full_spec",
    "create_ones_spec",
    "create_randn_spec",
    "create_tensor_spec",
    "create_uniform_spec",
    "create_zeros_spec",
    "load_from_file",
    "save_to_file",
    "to_json",
]
