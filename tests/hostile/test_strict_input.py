"""Issue #37 "strict input": empty strings were accepted where a value is required
(`kernel_type: ""` ran as torch, a tensor `dtype: ""` as float32). Now each is a 400 naming
the JSON path and "must not be empty", and an MCP tool error naming the argument."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from hostile.conftest import mcp_call, mcp_session
from integration.kernels import model_source, triton_add
from integration.kforge_server import KforgeServer

TORCH = {"source_code": model_source("return x * 2"), "kernel_type": "torch"}


def triton() -> dict[str, Any]:
    return copy.deepcopy(triton_add())


def with_empty(kernel: dict[str, Any], *path: Any) -> dict[str, Any]:
    out = copy.deepcopy(kernel)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = ""
    return out


def assert_refused(r: httpx.Response, field: str) -> None:
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["field"] == field, body
    assert body["message"].startswith("must not be empty"), body
    assert body["error"].startswith(field + ": must not be empty"), body


CASES = [
    ("kernel_type", lambda: with_empty(TORCH, "kernel_type"), "kernel_type"),
    ("dtype", lambda: with_empty(triton(), "io", "args", 0, "tensor_spec", "dtype"),
     "io.args[0].tensor_spec.dtype"),
    ("arg type", lambda: with_empty(triton(), "io", "args", 1, "type"), "io.args[1].type"),
    ("role", lambda: with_empty(triton(), "io", "args", 2, "role"), "io.args[2].role"),
    ("arg name", lambda: with_empty(triton(), "io", "args", 0, "name"), "io.args[0].name"),
    ("entry_point", lambda: with_empty(triton(), "metadata", "entry_point"),
     "metadata.entry_point"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "kernel", "field"), CASES, ids=[c[0] for c in CASES])
def test_rest_refuses_empty_values(server: KforgeServer, what: str, kernel: Any,
                                   field: str) -> None:  # fmt: skip
    with server.client() as c:
        body = {"kernel": kernel(), "reference_kernel": TORCH, "measure_performance": False}
        assert_refused(c.post("/evaluate", params={"wait": "false"}, json=body),
                       "kernel." + field)  # fmt: skip
        body = {"ref_kernel": TORCH, "custom_kernel": kernel(), "measure_performance": False}
        assert_refused(c.post("/compare", params={"wait": "false"}, json=body),
                       "custom_kernel." + field)  # fmt: skip
        body = {"ref_kernel": TORCH, "candidates": [TORCH, kernel()], "measure_performance": False}
        assert_refused(c.post("/batch", params={"wait": "false"}, json=body),
                       "candidates[1]." + field)  # fmt: skip


def test_legacy_and_bench_bodies_refuse_empty_values(server: KforgeServer) -> None:
    with server.client() as c:
        legacy = {"ref_code": "", "custom_code": TORCH["source_code"]}
        assert_refused(c.post("/", params={"wait": "false"}, json=legacy), "ref_code")
        bench = {"ops": ["add"], "dtype": "", "peaks": False, "torch_compile": False}
        assert_refused(c.post("/bench", json=bench), "dtype")
        bench = {"ops": ["add", ""], "peaks": False, "torch_compile": False}
        assert_refused(c.post("/bench", json=bench), "ops[1]")
        # Left out, a field still means its default: this one is accepted.
        ok = {"kernel": {"source_code": TORCH["source_code"], "kernel_type": "torch"},
              "measure_performance": False}  # fmt: skip
        r = c.post("/evaluate", params={"wait": "false"}, json=ok)
        assert r.status_code == 202, r.text


def mcp_tool(c: httpx.Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    r = mcp_call(c, mcp_session(c), name, arguments)
    assert r.status_code == 200, r.text
    return dict(r.json()["result"])


def test_mcp_tools_refuse_empty_values_naming_the_argument(server: KforgeServer) -> None:
    kernel = triton()
    base = {
        "kernel_source": kernel["source_code"],
        "kernel_type": "triton",
        "io_contract": kernel["io"],
        "metadata": kernel["metadata"],
        "device": "cpu",
    }
    with server.client() as c:
        for args, argument in [
            ({**base, "kernel_type": ""}, "kernel_type"),
            ({**base, "io_contract": with_empty(kernel, "io", "args", 0, "tensor_spec",
                                                "dtype")["io"]},
             "io_contract.args[0].tensor_spec.dtype"),
            ({**base, "metadata": {"entry_point": ""}}, "metadata.entry_point"),
        ]:  # fmt: skip
            result = mcp_tool(c, "validate_kernel", args)
            text = result["content"][0]["text"]
            assert result["isError"] is True, result
            assert f"{argument}: must not be empty" in text, text
