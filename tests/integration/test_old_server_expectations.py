"""What the kernel evaluation server's own integration tests and its users expect of it, through
kforge's REST API: the wording of its errors (`io_contract`, "Entry point 'run' not found").

The requests are shaped as the old tests sent them (`io`, `metadata`, `launch.grid` as
{x, y, z}); the kernels are kforge's own.
"""

from __future__ import annotations

from typing import Any

import pytest

from integration.kforge_server import KforgeServer

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
