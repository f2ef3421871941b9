"""The Triton workbench (issue #11) driven by the official Python MCP client on the device
under test (cpu: the Triton interpreter).

- A whole agent session over Streamable HTTP (`kforge serve`): information tools, three
  softmax versions (one wrong, two right), validation, benchmarks, state-gating errors, the
  3-version rule, the 70 % summary, a server restart in the middle and resumption from a new
  MCP session, get_best_kernel, and the files and logs on disk (workbench_session.py).
- The seed's acceptance flow over stdio (`kforge mcp --workspace DIR`): get_overview ->
  get_torch_op_info("vector_add") -> write -> run -> validate.
- `kforge mcp` processes that only ask (get_current_status) store no session; one is stored
  once it has work in it.
- Resources and prompts of the knowledge base.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from integration.kforge_server import (
    KforgeServer,
    assert_speedup_given,
    device_under_test,
    kforge_binary,
)
from integration.mcp_support import worker_env
from integration.workbench_session import check_files, run_session, summary_line

VECTOR_ADD = """\
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def solve(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
"""


def test_a_whole_agent_session_over_http_with_a_restart(tmp_path: Path) -> None:
    device = device_under_test()
    (tmp_path / "data").mkdir()
    srv = KforgeServer(data_dir=tmp_path / "data", devices=device).start()
    try:
        srv.wait_ready()

        def restart() -> None:
            srv.stop()
            srv.start()
            srv.wait_ready()

        record = anyio.run(run_session, lambda: Client(srv.url + "/mcp"), restart, device)
    finally:
        srv.stop()
    assert record.workspace.is_relative_to(tmp_path / "data" / "workbench")
    lines = check_files(record)
    assert lines[-1]["state_after"] == "end"
    print(summary_line(record))


def stdio(tmp_path: Path, *extra: str) -> StdioServerParameters:
    args = ["mcp", "--devices", device_under_test(), "--data-dir", str(tmp_path / "data"),
            "--workspace", str(tmp_path / "project"), *extra]  # fmt: skip
    return StdioServerParameters(command=str(kforge_binary()), args=args, env=worker_env())


def test_the_acceptance_flow_over_stdio(tmp_path: Path) -> None:
    async def flow() -> dict:
        async with Client(stdio(tmp_path)) as client:
            overview = await client.call_tool("get_overview", {})
            assert not overview.is_error and "solve(*args, **kwargs)" in overview.content[0].text
            info = await client.call_tool("get_torch_op_info", {"op_name": "vector_add"})
            assert not info.is_error
            op = info.structured_content
            assert op["name"] == "vector_add" and op["bound"] == "memory"
            named = await client.call_tool("set_kernel_name", {"name": "vector_add"})
            assert not named.is_error
            written = await client.call_tool("write_kernel_code", {"code": VECTOR_ADD})
            assert not written.is_error and written.structured_content["version"] == 1
            ran = await client.call_tool(
                "run_triton_kernel", {"test_input_code": op["test_input_code"]}
            )
            assert not ran.is_error, ran.content[0].text
            assert [c["verdict"] for c in ran.structured_content["cases"]] == ["ok"] * 3
            validated = await client.call_tool(
                "validate_correctness",
                {"reference_code": op["reference_code"], "test_input_code": op["test_input_code"]},
            )
            assert not validated.is_error, validated.content[0].text
            assert validated.structured_content["ok"] is True
            assert "CORRECT on every input" in validated.content[0].text
            return validated.structured_content

    result = anyio.run(flow)
    workspace = Path(result["session"]["workspace"])
    assert workspace.parent == tmp_path / "project"  # --workspace DIR
    assert (workspace / "kernel" / "vector_add_v1.py").read_text() == VECTOR_ADD
    assert (tmp_path / "data" / "kforge.db").exists()  # sessions live in the job store


def test_processes_that_only_ask_leave_no_sessions(tmp_path: Path) -> None:
    """Every `kforge mcp` (each editor restart starts one) that called get_current_status
    stored an empty session, listed forever. A new session is stored once it has work in it;
    the processes that only ask leave nothing, in the session list or on disk."""

    async def only_ask() -> tuple[Any, Any]:
        async with Client(stdio(tmp_path)) as client:
            status = await client.call_tool("get_current_status", {})
            assert not status.is_error, status.content[0].text
            assert not (await client.call_tool("get_overview", {})).is_error
            return status, await client.call_tool("list_sessions", {})

    for _ in range(3):
        status, listed = anyio.run(only_ask)
        assert listed.structured_content["sessions"] == [], listed.content[0].text
        assert status.structured_content["stored"] is False
        assert "No workbench session yet" in status.content[0].text
        assert "set_kernel_name(name)" in status.content[0].text
    assert not list((tmp_path / "project").glob("wb_*"))

    async def name_it() -> dict[str, Any]:
        async with Client(stdio(tmp_path)) as client:
            await client.call_tool("get_current_status", {})
            named = await client.call_tool("set_kernel_name", {"name": "vector_add"})
            assert not named.is_error, named.content[0].text
            return named.structured_content["session"]

    session = anyio.run(name_it)
    assert session["stored"] is True

    async def next_process() -> tuple[Any, Any]:
        async with Client(stdio(tmp_path)) as client:
            status = await client.call_tool("get_current_status", {})
            return status, await client.call_tool("list_sessions", {})

    status, listed = anyio.run(next_process)
    assert [s["id"] for s in listed.structured_content["sessions"]] == [session["id"]]
    assert f"{session['id']} (vector_add, write)" in status.content[0].text  # to resume
    assert [p.name for p in (tmp_path / "project").glob("wb_*")] == [session["id"]]
    log = Path(session["workspace"]) / "log" / f"{session['id']}.jsonl"
    tools = [json.loads(line)["tool"] for line in log.read_text().splitlines()]
    assert tools == ["get_current_status", "set_kernel_name"]  # the calls before it was stored


def test_stdio_reference_argument_forms_and_gating(tmp_path: Path) -> None:
    """The older stateless forms, null for optional arguments, gating of stateful forms."""

    async def flow() -> None:
        async with Client(stdio(tmp_path)) as client:
            inputs = (
                "x = torch.randn(3000, device=DEVICE)\n"
                "y = torch.randn(3000, device=DEVICE)\n"
                "args = [x, y]\nkwargs = {}\n"
            )
            reference = "import torch\n\ndef reference(x, y):\n    return x + y\n"
            r = await client.call_tool(
                "run_triton_kernel", {"code": VECTOR_ADD, "test_input_code": inputs}
            )
            assert not r.is_error, r.content[0].text
            r = await client.call_tool(
                "validate_correctness",
                {"kernel_code": VECTOR_ADD, "reference_code": reference,
                 "test_input_code": inputs, "rtol": 1e-5, "atol": 1e-8},
            )  # fmt: skip
            assert not r.is_error and r.structured_content["ok"], r.content[0].text
            r = await client.call_tool(
                "benchmark_kernel",
                {"kernel_code": VECTOR_ADD, "test_input_code": inputs,
                 "reference_code": reference, "warmup": 1, "rep": 3},
            )  # fmt: skip
            assert not r.is_error, r.content[0].text
            case = r.structured_content["cases"][0]
            assert_speedup_given(case.get("speedup"), case, notes="flags")
            # The stateful form needs a version first, and a state that allows it.
            r = await client.call_tool(
                "validate_correctness",
                {"reference_code": reference, "test_input_code": inputs, "rtol": None},
            )
            assert r.is_error and "state 'start'" in r.content[0].text
            # A kernel that does not compile is a result the agent can act on.
            broken = VECTOR_ADD.replace("def solve(x, y):", "def solve(x, y:")
            r = await client.call_tool(
                "run_triton_kernel", {"code": broken, "test_input_code": inputs}
            )
            assert r.is_error and r.structured_content["cases"][0]["verdict"] == "compile_error"
            # The traceback names the kernel argument, not the job's scratch file.
            assert "kernel_code" in r.content[0].text
            r = await client.call_tool("set_kernel_name", {"name": "../escape"})
            assert r.is_error and "kernel name" in r.content[0].text

    anyio.run(flow)
    assert not any(p.name == "escape" for p in (tmp_path / "project").rglob("*"))


def test_knowledge_resources_and_prompts(tmp_path: Path) -> None:
    async def flow() -> None:
        async with Client(stdio(tmp_path)) as client:
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            for uri in (
                "kforge://knowledge/overview.md",
                "kforge://knowledge/torch_ops.json",
                "kforge://templates/matmul.py",
                "kforge://templates/attention.py",
            ):
                assert uri in listed, listed
            ops = await client.read_resource("kforge://knowledge/torch_ops.json")
            assert "vector_add" in json.loads(ops.contents[0].text)
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            assert "convert_torch_op_to_triton" in prompts
            got = await client.get_prompt("convert_torch_op_to_triton", {"op_name": "gelu"})
            assert 'set_kernel_name("gelu")' in got.messages[0].content.text

    anyio.run(flow)


@pytest.mark.parametrize("flag", [["--min-versions", "0"], ["--context-budget", "10"]])
def test_bad_workbench_flags_are_refused(flag: list[str], tmp_path: Path) -> None:
    import subprocess

    r = subprocess.run(
        [str(kforge_binary()), "mcp", "--data-dir", str(tmp_path), *flag],
        input="", capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert r.returncode != 0 and flag[0] in r.stderr and r.stdout == ""
