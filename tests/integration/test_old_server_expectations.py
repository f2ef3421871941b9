"""What the kernel evaluation server's own integration tests and its users expect of it, through
kforge's REST API: the wording of its errors (`io_contract`, "Entry point 'run' not found"),
the violated Triton constraint named in `validation_error`, Triton front-end errors reported as
compile errors, and torch callables written for its calling convention.

The requests are shaped as the old tests sent them (`io`, `metadata`, `launch.grid` as
{x, y, z}); the kernels are kforge's own. On the cpu device Triton runs in its interpreter,
which has no minimum size for tl.dot: the old test's 8x8 dot compiles only there.
"""

from __future__ import annotations

from typing import Any

import pytest

from integration.kforge_server import KforgeServer, device_under_test

FAST = {"num_trials": 5, "num_correct_trials": 2}


def post(server: KforgeServer, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    with server.client() as c:
        r = c.post(path, json={**FAST, **body})
    return r.status_code, r.json()


def tensor(name: str, shape: list[int], role: str = "input", seed: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"shape": shape, "dtype": "float32"}
    if role != "output":
        spec["init"] = {"kind": "randn", "seed": seed}
    return {"name": name, "type": "tensor", "role": role, "tensor_spec": spec}


def scalar(name: str, value: int, *, is_meta: bool = False) -> dict[str, Any]:
    return {"name": name, "type": "int", "value": value, "is_meta": is_meta}


N = 1024
ADD_IO = {
    "args": [
        tensor("x_ptr", [N], seed=1),
        tensor("y_ptr", [N], seed=2),
        tensor("output_ptr", [N], role="output"),
        scalar("n_elements", N),
        scalar("BLOCK_SIZE", 256, is_meta=True),
    ],
    "launch": {"grid": {"x": N // 256, "y": 1, "z": 1}, "num_warps": 4},
}

TRITON_ADD = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)
"""


def triton_add(source: str = TRITON_ADD) -> dict[str, Any]:
    return {"source_code": source, "kernel_type": "triton", "io": ADD_IO}


def torch_function(source: str, name: str, io: dict[str, Any] | None = ADD_IO) -> dict[str, Any]:
    kernel: dict[str, Any] = {
        "source_code": source,
        "kernel_type": "torch",
        "metadata": {"function_name": name},
    }
    if io is not None:
        kernel["io"] = io
    return kernel


# --- a Triton kernel without an IOContract ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/evaluate", {"kernel": {"kernel_type": "triton", "source_code": "pass"}}, "kernel.io"),
        (
            "/compare",
            {
                "ref_kernel": torch_function("def f(x, y):\n    return x + y\n", "f"),
                "custom_kernel": {"kernel_type": "triton", "source_code": TRITON_ADD},
            },
            "custom_kernel.io",
        ),
        (
            "/compare",
            {
                "ref_kernel": {"kernel_type": "triton", "source_code": TRITON_ADD},
                "custom_kernel": triton_add(),
            },
            "ref_kernel.io",
        ),
    ],
)
def test_a_triton_kernel_without_an_io_contract_is_refused_naming_io_contract(
    server: KforgeServer, path: str, body: dict[str, Any], field: str
) -> None:
    status, error = post(server, path, body)
    assert status == 400, error
    assert error["field"] == field
    # The old server's test looks for "io_contract" in the body; its wording was this.
    assert "Triton kernels require io_contract to be specified" in error["error"], error


# --- a multi_kernel entry point that is not there --------------------------------------------


def test_a_missing_multi_kernel_entry_point_is_named(server: KforgeServer) -> None:
    kernel = {
        "source_code": "import torch\n\ndef wrong_name(x, y):\n    return x + y\n",
        "kernel_type": "multi_kernel",
        "metadata": {"entry_point": "run", "description": "adds x and y"},
        "io": {"args": [tensor("x", [N], seed=42)]},
    }
    status, out = post(server, "/evaluate", {"kernel": kernel})
    assert status == 200, out
    result = out["kernel_exec_result"]
    assert result["compiled"] is False
    assert "Entry point 'run' not found" in result["compilation_error"], result
    assert "wrong_name" in result["compilation_error"]


# --- a violated Triton constraint, named in validation_error ---------------------------------

# tl.dot's operands must agree on their inner dimension: a rule of triton.language that the
# compiler (on a GPU) and the interpreter (on the cpu) both enforce.
MISMATCHED_DOT = """
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + rows[:, None] * BLOCK + rows[None, :])
    b = tl.load(b_ptr + tl.arange(0, BLOCK // 2)[:, None] * BLOCK + rows[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * BLOCK + rows[None, :], c)
"""

DOT_IO = {
    "args": [
        tensor("a_ptr", [16, 16], seed=42),
        tensor("b_ptr", [16, 16], seed=43),
        tensor("c_ptr", [16, 16], role="output"),
        scalar("BLOCK", 16, is_meta=True),
    ],
    "launch": {"grid": {"x": 1, "y": 1, "z": 1}, "num_warps": 1, "num_stages": 1},
}


def test_a_violated_triton_constraint_is_named_in_validation_error(server: KforgeServer) -> None:
    kernel = {"source_code": MISMATCHED_DOT, "kernel_type": "triton", "io": DOT_IO}
    status, out = post(
        server, "/evaluate", {"kernel": kernel, "num_trials": 10, "collect_device_metrics": False}
    )
    assert status == 200, out
    result = out["kernel_exec_result"]
    # What the old test asserts: a failed kernel says why in validation_error...
    assert result["correctness"] is False
    validation_error = result["validation_error"]
    assert "error" in validation_error.lower() or "failed" in validation_error.lower()
    # ...naming the rule the kernel broke, on its first line.
    assert "must have equal reduction dimensions" in validation_error.splitlines()[0], result
    # And it is a compile error.
    assert result["compiled"] is False and result["error_kind"] == "compile"
    assert "must have equal reduction dimensions" in result["compilation_error"]


# The old test's kernel multiplied 8x8 tiles: Triton's compiler needs K >= 16 for tl.dot on
# NVIDIA GPUs.
SMALL_DOT = """
import triton
import triton.language as tl


@triton.jit
def tile_dot(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    tile = rows[:, None] * BLOCK + rows[None, :]
    tl.store(c_ptr + tile, tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile)))
"""


def test_a_small_dot_names_its_constraint_on_a_gpu(server: KforgeServer) -> None:
    io = {
        "args": [
            tensor("a_ptr", [8, 8], seed=42),
            tensor("b_ptr", [8, 8], seed=43),
            tensor("c_ptr", [8, 8], role="output"),
            scalar("BLOCK", 8, is_meta=True),
        ],
        "launch": {"grid": {"x": 1, "y": 1, "z": 1}, "num_warps": 1, "num_stages": 1},
    }
    kernel = {"source_code": SMALL_DOT, "kernel_type": "triton", "io": io}
    status, out = post(server, "/evaluate", {"kernel": kernel, "num_trials": 10})
    assert status == 200, out
    result = out["kernel_exec_result"]
    if device_under_test() == "cpu":
        # The interpreter has no minimum tl.dot size: the kernel runs, and is consistent.
        assert result["compiled"] is True and result["correctness"] is True, result
        return
    assert result["compiled"] is False and result["correctness"] is False, result
    assert "K >= 16" in result["validation_error"].splitlines()[0], result["validation_error"]


# --- Triton front-end errors are compile errors ----------------------------------------------

TRITON_TYPO = TRITON_ADD.replace("x = tl.load(", "x = tl.lod(")


@pytest.mark.parametrize("path", ["/evaluate", "/compare"])
def test_an_undefined_triton_attribute_is_a_compile_error(server: KforgeServer, path: str) -> None:
    reference = torch_function("def add(x, y):\n    return x + y\n", "add")
    body = (
        {"kernel": triton_add(TRITON_TYPO)}
        if path == "/evaluate"
        else {"ref_kernel": reference, "custom_kernel": triton_add(TRITON_TYPO)}
    )
    status, out = post(server, path, body)
    assert status == 200, out
    result = out["kernel_exec_result"]
    assert result["compiled"] is False and result["correctness"] is False, result
    assert result["error_kind"] == "compile"
    assert "lod" in result["compilation_error"], result["compilation_error"]
    assert "lod" in result["validation_error"].splitlines()[0]


# --- torch callables written for the old server's calling convention -------------------------

# The old server passed a named torch callable every argument of its IOContract positionally.
OLD_CONVENTION = """
import torch


def torch_add(x, y, output, n_elements, BLOCK_SIZE):
    return x + y


def torch_add_into(x, y, output, n_elements, BLOCK_SIZE):
    output.copy_(x + y)
    return output


class Ops(torch.nn.Module):
    def add(self, x, y, output, n_elements, BLOCK_SIZE):
        return x + y
"""


@pytest.mark.parametrize(
    "metadata",
    [
        {"function_name": "torch_add"},
        {"function_name": "torch_add_into"},
        {"class_name": "Ops", "method_name": "add"},
    ],
)
def test_a_torch_callable_written_for_the_old_servers_convention_runs(
    server: KforgeServer, metadata: dict[str, str]
) -> None:
    torch_kernel = {
        "source_code": OLD_CONVENTION,
        "kernel_type": "torch",
        "io": ADD_IO,
        "metadata": metadata,
    }
    for path, body in [
        ("/compare", {"ref_kernel": torch_kernel, "custom_kernel": triton_add()}),
        ("/compare", {"ref_kernel": triton_add(), "custom_kernel": torch_kernel}),
        ("/evaluate", {"kernel": triton_add(), "reference_kernel": torch_kernel}),
        ("/evaluate", {"kernel": torch_kernel}),
    ]:
        status, out = post(server, path, body)
        assert status == 200, out
        result = out["kernel_exec_result"]
        assert result["compiled"] is True and result["correctness"] is True, (
            path,
            sorted(body),
            result.get("validation_error"),
        )


def test_a_function_that_takes_the_input_tensors_still_gets_them(server: KforgeServer) -> None:
    # The old client's own example: `optimized_add(x, y)` with the Triton kernel's whole
    # contract (the old server passed it five arguments and failed); kforge passes x and y.
    reference = torch_function("def optimized_add(x, y):\n    return x + y\n", "optimized_add")
    status, out = post(server, "/compare", {"ref_kernel": reference, "custom_kernel": triton_add()})
    assert status == 200 and out["kernel_exec_result"]["correctness"] is True, out
