"""torch kernels naming their callable: metadata.function_name / class_name / method_name
(the kernel evaluation server's targeting). The named callable must be the one that runs."""

from __future__ import annotations

import worker_kernels as K
from worker_jobs import make_job, run

# Model.forward is wrong on purpose: a job that ran it instead of the named callable fails.
FUNCTIONS = """
import torch


def optimized_add(x, y):
    return x + y


def wrong_add(x, y):
    return x - y


class Model(torch.nn.Module):
    def forward(self, x, y):
        return x * y
"""

METHODS = """
import torch


class Ops(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.offset = 0.0

    def add(self, x, y):
        return x + y + self.offset

    def forward(self, x, y):
        return x * y
"""

KERNELBENCH_FUNCTION = """
import torch


def scaled(x):
    return x * 2.0


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
"""


def torch_with_io(source: str, **metadata: str) -> dict:
    """A torch kernel whose IOContract (x, y) defines the inputs of the job."""
    kernel = K.torch_kernel(source, **metadata)
    kernel["io"] = {"args": [K.tensor_arg("x", [256]), K.tensor_arg("y", [256])]}
    return kernel


def test_function_name_reference_checks_a_triton_candidate(tmp_path):
    # The old server's triton example: a torch reference named by function_name, no Model.
    ref = K.torch_kernel(
        FUNCTIONS.split("class Model", maxsplit=1)[0], function_name="optimized_add"
    )
    result = run(make_job(K.triton_vadd(), ref, tmp_path=tmp_path))
    assert result["correctness"], result.get("validation_error")


def test_the_named_function_runs_not_model_forward(tmp_path):
    good = torch_with_io(FUNCTIONS, function_name="optimized_add")
    result = run(make_job(good, K.torch_add_reference(), tmp_path=tmp_path))
    assert result["correctness"], result.get("validation_error")
    assert result["metadata"]["kernel_name"] == "optimized_add"
    wrong = torch_with_io(FUNCTIONS, function_name="wrong_add")
    result = run(make_job(wrong, K.torch_add_reference(), tmp_path=tmp_path))
    assert not result["correctness"] and result["error_kind"] == "mismatch"


def test_class_and_method_name(tmp_path):
    ops = torch_with_io(METHODS, class_name="Ops", method_name="add")
    result = run(make_job(ops, K.torch_add_reference(), tmp_path=tmp_path))
    assert result["correctness"], result.get("validation_error")
    assert result["metadata"]["kernel_name"] == "Ops.add"
    # class_name alone calls forward (x * y here): wrong against x + y.
    forward = torch_with_io(METHODS, class_name="Ops")
    result = run(make_job(forward, K.torch_add_reference(), tmp_path=tmp_path))
    assert not result["correctness"]


def test_function_name_with_get_inputs_evaluates(tmp_path):
    kernel = K.torch_kernel(KERNELBENCH_FUNCTION, function_name="scaled")
    result = run(make_job(kernel, tmp_path=tmp_path, measure_performance=True))
    assert result["compiled"] and result["correctness"], result.get("validation_error")
    assert result["runtime_stats"]["mean"] > 0


def test_named_callable_errors_are_compile_errors(tmp_path):
    cases = [
        ({"function_name": "missing"}, "'missing' is not defined"),
        ({"function_name": "Model"}, "is a class; name it with metadata.class_name"),
        ({"class_name": "Nope"}, "'Nope' is not defined"),
        ({"class_name": "Model", "method_name": "nope"}, "'nope' is not a method of Model"),
        ({"function_name": "optimized_add", "class_name": "Model"}, "do not also give"),
    ]
    for metadata, message in cases:
        kernel = torch_with_io(FUNCTIONS, **metadata)
        result = run(make_job(kernel, K.torch_add_reference(), tmp_path=tmp_path))
        assert not result["compiled"], metadata
        assert result["error_kind"] == "compile"
        assert message in result["compilation_error"], (metadata, result["compilation_error"])
