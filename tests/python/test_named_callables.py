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


# Written for the kernel evaluation server, which passed a named torch callable every argument
# of its IOContract positionally (outputs, scalars and meta ones too). kforge passes input
# tensors and scalars (and meta ones by keyword): these signatures cannot take that.
OLD_CONVENTION = """
import torch


def add(x, y, out, n, BLOCK):
    assert out.shape == x.shape and isinstance(n, int) and BLOCK == 256
    return x + y


def add_into(x, y, out, n, BLOCK):
    out.copy_(x + y)
    return out


def scaled(x, y, alpha):
    return x + alpha * y


class Ops(torch.nn.Module):
    def add(self, x, y, out, n, BLOCK):
        return x + y
"""


def old_convention(**metadata: str) -> dict:
    kernel = K.torch_kernel(OLD_CONVENTION, **metadata)
    kernel["io"] = K.vadd_io()
    return kernel


def test_a_reference_written_for_the_old_servers_convention_checks_a_triton_candidate(tmp_path):
    for metadata in (
        {"function_name": "add"},
        {"function_name": "add_into"},
        {"class_name": "Ops", "method_name": "add"},
    ):
        result = run(make_job(K.triton_vadd(), old_convention(**metadata), tmp_path=tmp_path))
        assert result["correctness"], (metadata, result.get("runtime_error"))
    # The candidate's inputs, the reference's own scalars: alpha is the one it declares.
    scaled = K.torch_kernel(OLD_CONVENTION, function_name="scaled")
    scaled["io"] = {"args": [*K.vadd_io()["args"][:2], K.scalar_arg("alpha", "float", 1.0)]}
    result = run(make_job(K.triton_vadd(), scaled, tmp_path=tmp_path))
    assert result["correctness"], result.get("runtime_error")
    scaled["io"]["args"][2]["value"] = 2.0
    result = run(make_job(K.triton_vadd(), scaled, tmp_path=tmp_path))
    assert not result["correctness"] and result["error_kind"] == "mismatch"


def test_a_candidate_written_for_the_old_servers_convention_runs(tmp_path):
    for metadata in ({"function_name": "add"}, {"function_name": "add_into"}):
        evaluated = run(make_job(old_convention(**metadata), tmp_path=tmp_path))
        assert evaluated["correctness"], (metadata, evaluated.get("runtime_error"))
        compared = run(make_job(old_convention(**metadata), K.triton_vadd(), tmp_path=tmp_path))
        assert compared["correctness"], (metadata, compared.get("runtime_error"))
    timed = run(
        make_job(old_convention(function_name="add"), tmp_path=tmp_path, measure_performance=True)
    )
    assert timed["correctness"] and timed["runtime_stats"]["mean"] > 0, timed


def test_a_callable_that_takes_kforges_arguments_keeps_them(tmp_path):
    # `def f(x, y)` with the whole Triton contract: the old server passed it five arguments
    # (a TypeError); kforge passes the input tensors, as before.
    ref = K.torch_kernel(FUNCTIONS, function_name="optimized_add")
    ref["io"] = K.vadd_io()
    result = run(make_job(K.triton_vadd(), ref, tmp_path=tmp_path))
    assert result["correctness"], result.get("runtime_error")
