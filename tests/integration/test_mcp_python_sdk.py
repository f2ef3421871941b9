"""kforge's MCP tools driven by the official Python SDK client (PyPI `mcp` 2.3.0), over
Streamable HTTP (`kforge serve`) and stdio (`kforge mcp`, embedded engine or --server).

One scenario runs on each transport: list the tools, compare a Triton kernel (interpreter on
cpu) with a torch reference, evaluate and validate it, get progress notifications, see
invalid arguments come back as isError results naming the argument (kernel failures are
normal results, as the old tools answered), and cancel a long job
(notifications/cancelled) and see it cancelled through get_job_status.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, MCPError, StdioServerParameters

from integration.kforge_server import KforgeServer, assert_speedup_given, kforge_binary
from integration.mcp_support import (
    compare_args,
    evaluate_args,
    invalid_args,
    job_id_of,
    sleepy_args,
    stdio_command,
    worker_env,
)

PRODUCT_TOOLS = [
    "evaluate_kernel",
    "compare_kernels",
    "validate_kernel",
    "get_job_status",
    "get_server_stats",
]


class Progress:
    def __init__(self) -> None:
        self.updates: list[tuple[float, float | None, str | None]] = []
        self.reached: dict[str, anyio.Event] = {}

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message))
        for phase, event in self.reached.items():
            if phase in (message or ""):
                event.set()

    def event(self, phase: str) -> anyio.Event:
        return self.reached.setdefault(phase, anyio.Event())

    def job_id(self) -> str | None:
        return next((j for _, _, m in self.updates if (j := job_id_of(m))), None)


async def wait_terminal(client: Client, job_id: str, timeout_s: float = 60) -> dict[str, Any]:
    with anyio.fail_after(timeout_s):
        while True:
            r = await client.call_tool("get_job_status", {"job_id": job_id})
            assert not r.is_error, r.content
            view = r.structured_content
            if view["state"] not in ("queued", "running"):
                return view
            await anyio.sleep(0.1)


async def check_kernel_tools(client: Client) -> dict[str, Any]:
    """The scenario every transport runs; returns what transport-specific checks need."""
    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    assert names[: len(PRODUCT_TOOLS)] == PRODUCT_TOOLS
    for tool in listed.tools:
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool.name)
        assert tool.input_schema["type"] == "object" and tool.description
    assert listed.next_cursor is None

    progress = Progress()
    r = await client.call_tool("compare_kernels", compare_args(), progress_callback=progress)
    assert not r.is_error, r.content
    view = r.structured_content
    result = view["kernel_exec_result"]
    assert view["status"] == "success" and result["compiled"] and result["correctness"], view
    assert view["ref_runtime"]["mean"] >= 0  # 0: see assert_speedup_given
    assert_speedup_given(view.get("speedup"), result)
    assert r.content[0].text.startswith("Correct"), r.content[0].text
    values = [p for p, _, _ in progress.updates]
    assert len(values) >= 3 and values == sorted(values) and len(set(values)) == len(values)
    assert values[0] == 0 and values[-1] == 100 and progress.updates[-1][1] == 100
    assert progress.job_id() == view["job_id"]

    r = await client.call_tool("evaluate_kernel", evaluate_args())
    assert not r.is_error, r.content
    assert r.structured_content["kind"] == "compare"
    assert r.structured_content["kernel_exec_result"]["correctness"] is True

    validate = evaluate_args()
    for key in ("num_trials", "timing"):
        validate.pop(key)
    r = await client.call_tool("validate_kernel", validate)
    assert not r.is_error, r.content
    assert r.structured_content["kernel_exec_result"]["correctness"] is True
    assert r.structured_content["validated"] is True  # the old tool's fields
    assert r.structured_content["compilation_time"] >= 0
    assert "not timed" in r.content[0].text

    r = await client.call_tool("evaluate_kernel", invalid_args())
    assert r.is_error
    assert "io_contract.args[2].tensor_spec.shape[0]: must be an integer" in r.content[0].text

    # A kernel that does not compile is a result (as the old tools answered), not a tool error.
    broken = evaluate_args(kernel_source="import triton\ndef add_kernel(:\n")
    r = await client.call_tool("evaluate_kernel", broken)
    assert not r.is_error and r.structured_content["kernel_exec_result"]["compiled"] is False
    assert r.content[0].text.startswith("The kernel did not compile"), r.content[0].text

    # The old tools' other argument forms: nulls for optionals, the {"request": ...} wrapper.
    nulls = {**evaluate_args(), "metadata": None, "atol": None, "reference_kernel_io": None}
    r = await client.call_tool("evaluate_kernel", nulls)
    assert not r.is_error, r.content
    r = await client.call_tool("validate_kernel", {"request": validate})
    assert not r.is_error and r.structured_content["validated"] is True, r.content
    missing = await client.call_tool("get_job_status", {"job_id": "0123456789abcdef"})
    assert not missing.is_error and missing.structured_content["status"] == "not_found"

    with pytest.raises(MCPError) as unknown:
        await client.call_tool("no_such_tool", {})
    assert unknown.value.error.code == -32602

    stats = await client.call_tool("get_server_stats", {})
    assert not stats.is_error and stats.structured_content["devices"]
    assert {"gpu_available", "gpu_count", "job_stats"} <= set(stats.structured_content)
    return {"cancelled_job": await cancel_long_job(client)}


async def cancel_long_job(client: Client, phase: str = "correctness") -> str:
    """Starts a job that sleeps, cancels the call once progress names `phase`, and waits for
    the job to be `cancelled`."""
    progress = Progress()
    running = progress.event(phase)
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            await client.call_tool("evaluate_kernel", sleepy_args(), progress_callback=progress)
            raise AssertionError("the sleeping job should not finish")

        tg.start_soon(call)
        with anyio.fail_after(120):
            await running.wait()
        tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
    job_id = progress.job_id()
    assert job_id
    view = await wait_terminal(client, job_id)
    assert view["state"] == "cancelled", view
    assert "notifications/cancelled" in view["error"]
    return job_id


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_streamable_http(server: KforgeServer, mode: str) -> None:
    """2025-11-25 through initialize, and the stateless 2026-07-28 (a cancel there is the
    stream closing, which cancels the job all the same)."""

    async def scenario() -> dict[str, Any]:
        async with Client(server.url + "/mcp", mode=mode) as client:  # type: ignore[arg-type]
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
            return await check_kernel_tools(client)

    out = anyio.run(scenario)
    with server.client() as rest:  # the REST API sees the same job
        assert rest.get(f"/job/{out['cancelled_job']}").json()["state"] == "cancelled"


def stdio_params(data_dir: Path, *extra: str) -> StdioServerParameters:
    command, args = stdio_command(data_dir, *extra)
    return StdioServerParameters(command=command, args=args, env=worker_env())


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_stdio_embedded_engine(tmp_path: Path, mode: str) -> None:
    async def scenario() -> dict[str, Any]:
        async with Client(stdio_params(tmp_path / "data"), mode=mode) as client:  # type: ignore[arg-type]
            return await check_kernel_tools(client)

    anyio.run(scenario)


def test_stdio_forwards_to_a_server(server: KforgeServer, tmp_path: Path) -> None:
    """`kforge mcp --server URL`: no engine of its own; jobs run on the server."""
    params = stdio_params(tmp_path / "unused", "--server", server.url)

    async def scenario() -> tuple[str, str]:
        async with Client(params) as client:
            stats = await client.call_tool("get_server_stats", {})
            assert not stats.is_error
            devices = [d["name"] for d in stats.structured_content["devices"]]
            assert server.devices in devices, devices
            progress = Progress()
            r = await client.call_tool(
                "compare_kernels", compare_args(), progress_callback=progress
            )
            assert not r.is_error, r.content
            assert r.structured_content["kernel_exec_result"]["correctness"] is True
            assert progress.updates and progress.updates[-1][0] == 100
            r = await client.call_tool("evaluate_kernel", invalid_args())
            assert r.is_error and "io_contract.args[2].tensor_spec.shape[0]" in r.content[0].text
            job = await client.call_tool("get_job_status", {"job_id": progress.job_id() or ""})
            assert job.structured_content["status"] == "completed"
            # A cancelled call cancels the job on the server (POST /job/{id}/cancel).
            cancelled = await cancel_long_job(client, phase="running")
            return job.structured_content["job_id"], cancelled

    job_id, cancelled = anyio.run(scenario)
    assert not (tmp_path / "unused").exists()  # no embedded engine, no data dir
    with server.client() as rest:
        assert rest.get(f"/job/{job_id}").json()["state"] == "success"
        assert rest.get(f"/job/{cancelled}").json()["state"] == "cancelled"


def test_stdio_refuses_a_bad_server_url(tmp_path: Path) -> None:
    import subprocess

    r = subprocess.run(
        [str(kforge_binary()), "mcp", "--server", "ftp://example"],
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert "--server: must be an http:// URL" in r.stderr


def test_rest_and_mcp_share_one_port(server: KforgeServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/health").status_code == 200
        assert http.post("/mcp", json={}).status_code == 400


def test_the_sdk_resumes_a_stream_the_server_closed() -> None:
    """A 2025-11-25 stream is resumable: test_reconnection (a conformance fixture) closes its
    stream after the priming event and answers later; the SDK reconnects with GET +
    Last-Event-ID and gets the result there."""
    srv = KforgeServer(extra_args=["--conformance-fixtures"]).start()
    try:

        async def scenario() -> str:
            async with Client(srv.url + "/mcp", mode="legacy") as client:
                r = await client.call_tool("test_reconnection", {})
                assert not r.is_error, r.content
                return r.content[0].text

        assert "resumed after the close" in anyio.run(scenario)
    finally:
        srv.stop()
