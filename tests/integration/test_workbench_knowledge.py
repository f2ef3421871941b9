"""Every template and every reference snippet of the workbench's knowledge base runs as real
kforge jobs through the workbench's own tools (`kforge mcp`, stateless validate_correctness on
the device under test): each template against its reference on its test inputs, and each op's
reference_code + test_input_code (the kernel being the reference itself, so the snippets must
run, build the inputs on DEVICE and agree run to run). tests/workbench/test_knowledge.py
checks the references against independent implementations in-process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from integration.kforge_server import REPO, device_under_test, kforge_binary
from integration.mcp_support import worker_env

OPS = {k: v for k, v in json.loads((REPO / "knowledge" / "torch_ops.json").read_text()).items()
       if not k.startswith("_")}  # fmt: skip
TEMPLATES = [p for p in json.loads((REPO / "knowledge/templates/templates.json").read_text())
             if not p.startswith("_")]  # fmt: skip


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `kforge mcp` validating everything (the calls run concurrently)."""
    tmp = tmp_path_factory.mktemp("wb-knowledge")
    params = StdioServerParameters(
        command=str(kforge_binary()),
        args=["mcp", "--devices", device_under_test(), "--data-dir", str(tmp / "data"),
              "--workspace", str(tmp / "ws")],
        env=worker_env(),
    )  # fmt: skip
    out: dict[str, Any] = {}

    async def run() -> None:
        async with Client(params) as client:

            async def template(pattern: str) -> None:
                t = await client.call_tool("get_kernel_template", {"pattern": pattern})
                spec = t.structured_content
                r = await client.call_tool(
                    "validate_correctness",
                    {"kernel_code": spec["source"], "reference_code": spec["reference_code"],
                     "test_input_code": spec["test_input_code"], "trials": 2},
                )  # fmt: skip
                out["template:" + pattern] = r

            async def op(name: str) -> None:
                spec = OPS[name]
                r = await client.call_tool(
                    "validate_correctness",
                    {"kernel_code": spec["reference_code"] + "\n\nsolve = reference\n",
                     "reference_code": spec["reference_code"],
                     "test_input_code": spec["test_input_code"], "trials": 2},
                )  # fmt: skip
                out["op:" + name] = r

            async with anyio.create_task_group() as tg:
                for pattern in TEMPLATES:
                    tg.start_soon(template, pattern)
                for name in OPS:
                    tg.start_soon(op, name)

    anyio.run(run)
    return out


@pytest.mark.parametrize("pattern", TEMPLATES)
def test_template_is_correct_as_a_job(results: dict[str, Any], pattern: str) -> None:
    r = results["template:" + pattern]
    assert not r.is_error, r.content[0].text
    cases = r.structured_content["cases"]
    assert len(cases) >= 2 and all(c["verdict"] == "ok" and c["correct"] for c in cases)


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_snippets_run_as_jobs(results: dict[str, Any], name: str) -> None:
    r = results["op:" + name]
    assert not r.is_error, r.content[0].text
    assert all(c["verdict"] == "ok" for c in r.structured_content["cases"])


def test_the_knowledge_files_are_what_is_embedded(tmp_path: Path) -> None:
    """The binary carries knowledge/ as it is in the tree (rebuilt when a file changes)."""
    params = StdioServerParameters(
        command=str(kforge_binary()),
        args=["mcp", "--devices", "cpu", "--data-dir", str(tmp_path / "data")],
        env=worker_env(),
    )

    async def read() -> str:
        async with Client(params) as client:
            r = await client.read_resource("kforge://knowledge/overview.md")
            return r.contents[0].text

    assert anyio.run(read) == (REPO / "knowledge" / "overview.md").read_text()
