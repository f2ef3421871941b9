"""batch_compare, run_benchmark_suite and validate_kernel as tasks (the extension
io.modelcontextprotocol/tasks, MCP 2026-07-28), driven by the official Python SDK client (PyPI
`mcp` 2.3.0) against the real `kforge serve` on the device under test (cpu in CI).

The SDK has no tasks support of its own; it does have client extensions (SEP-2133) whose result
claims finish a claimed `tools/call` result. `Tasks` below is that extension for tasks: it
advertises io.modelcontextprotocol/tasks in every request's clientCapabilities, claims
`resultType: "task"`, and polls `tasks/get` (sent through the SDK session, which adds the
`_meta` and the `Mcp-Name` header) until the task ends. Covered: a task's result equals the
synchronous answer (validate_kernel's with the old tool's fields); tasks/cancel cancels every
job; a task survives a server restart (a batch, a validation, and a bench cut mid-way that
resumes with the job it had already submitted); `kforge mcp` on stdio runs tasks too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict, Field, TypeAdapter

from integration.kernels import FAST_TIMING, TORCH_ADD_REF, torch_kernel, triton_add
from integration.kforge_server import REPO, KforgeServer, device_under_test
from integration.mcp_support import stdio_command, worker_env

TASKS = "io.modelcontextprotocol/tasks"
ANY = TypeAdapter(dict[str, Any])
V1_ADD = (REPO / "kernels" / "add" / "v1_baseline.py").read_text()
# TORCH_ADD_REF's add, sleeping a minute in every call: a candidate of that reference whose job
# stays running until it is cancelled. (A candidate of another arity fails its first trial at
# once; on a server with a judge kept for this reference its job then ends before a
# tasks/cancel sent right after the call can reach it.)
SLEEPY_ADD = TORCH_ADD_REF.replace(
    "        return x + y", "        import time\n        time.sleep(60)\n        return x + y"
)
assert SLEEPY_ADD != TORCH_ADD_REF
# Two jobs: v1 (given) and torch; v2..v4 are reported as not provided. No torch.compile.
BENCH = {
    "ops": ["add"],
    "sizes": ["small"],
    "runs": 2,
    "peaks": False,
    "torch_compile": False,
    "kernels": {"add": {"v1_baseline": V1_ADD}},
}


class CreateTaskResult(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    request = GetTask(params=TaskParams(taskId=task_id))
    return await client.session.send_request(request, ANY)


async def poll(client: Client, task_id: str, timeout_s: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while (task := await get_task(client, task_id))["status"] == "working":
        assert time.monotonic() < deadline, task
        await anyio.sleep(task.get("pollIntervalMs", 1000) / 4000)
    return task


class Tasks(ClientExtension):
    """The tasks extension for the SDK: a claimed task result is polled to its end."""

    identifier = TASKS

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve)]

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        self.created.append(created.model_dump(by_alias=True))
        request = GetTask(params=TaskParams(taskId=created.task_id))
        while True:
            task = await ctx.session.send_request(request, ANY)
            if task["status"] != "working":
                break
            await anyio.sleep(0.25)
        assert task["status"] == "completed", task
        return CallToolResult.model_validate(task["result"])


def modern_client(server: KforgeServer, *extensions: ClientExtension) -> Client:
    return Client(server.url + "/mcp", mode="2026-07-28", extensions=list(extensions))  # type: ignore[arg-type]


def batch_args_on(device: str, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "ref_kernel": torch_kernel(TORCH_ADD_REF),
        "candidates": candidates,
        "timing": FAST_TIMING,
        "num_correct_trials": 2,
        "device": device,
    }


def batch_args(server: KforgeServer, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    return batch_args_on(server.devices, candidates)


def correctness(result: dict[str, Any]) -> list[bool]:
    return [v["kernel_exec_result"]["correctness"] for v in result["results"]]


def task_file(server: KforgeServer, task_id: str) -> dict[str, Any]:
    return json.loads((server.data_dir / "mcp-tasks" / f"{task_id}.json").read_text())


def test_a_batch_task_answers_as_the_synchronous_call(server: KforgeServer) -> None:
    args = batch_args(server, [triton_add(), triton_add(" + 1.0")])
    tasks = Tasks()

    async def scenario() -> tuple[CallToolResult, CallToolResult]:
        async with modern_client(server, tasks) as client:
            as_task = await client.call_tool("batch_compare", args)
        async with modern_client(server) as client:  # no opt-in: synchronous
            sync = await client.call_tool("batch_compare", args)
        return as_task, sync

    as_task, sync = anyio.run(scenario)
    assert len(tasks.created) == 1, "the call did not become a task"
    created = tasks.created[0]
    assert created["taskId"].startswith("task-") and len(created["taskId"]) == 37
    assert created["status"] == "working" and created["ttlMs"] > 0
    assert not as_task.is_error and not sync.is_error
    task_result = as_task.structured_content
    assert task_result is not None and sync.structured_content is not None
    assert correctness(task_result) == correctness(sync.structured_content) == [True, False]
    assert task_result["batch_id"] != sync.structured_content["batch_id"]
    assert as_task.content[0].text.endswith("1 of 2 candidate(s) correct")  # type: ignore[union-attr]
    with server.client() as rest:  # each candidate is a job of its own
        for job_id in task_result["jobs"]:
            assert rest.get(f"/job/{job_id}").json()["state"] == "success"


def validate_args(device: str) -> dict[str, Any]:
    kernel = triton_add()
    return {
        "kernel_source": kernel["source_code"],
        "kernel_type": "triton",
        "io_contract": kernel["io"],
        "metadata": kernel["metadata"],
        "reference_kernel_source": TORCH_ADD_REF,
        "device": device,
    }


def test_a_validate_task_answers_with_the_old_tools_fields(server: KforgeServer) -> None:
    args = validate_args(server.devices)
    tasks = Tasks()

    async def scenario() -> tuple[CallToolResult, CallToolResult]:
        async with modern_client(server, tasks) as client:
            as_task = await client.call_tool("validate_kernel", args)
        async with modern_client(server) as client:
            sync = await client.call_tool("validate_kernel", args)
        return as_task, sync

    as_task, sync = anyio.run(scenario)
    assert len(tasks.created) == 1 and tasks.created[0]["taskId"].startswith("task-")
    assert not as_task.is_error and not sync.is_error
    got, want = as_task.structured_content, sync.structured_content
    assert got is not None and want is not None
    assert got["validated"] is True and got["compiled"] is True
    assert set(got) == set(want)


def test_a_bench_task_runs_the_suite(server: KforgeServer) -> None:
    tasks = Tasks()

    async def scenario() -> CallToolResult:
        async with modern_client(server, tasks) as client:
            return await client.call_tool("run_benchmark_suite", BENCH)

    result = anyio.run(scenario)
    assert len(tasks.created) == 1
    assert not result.is_error, result.content
    assert result.structured_content is not None
    op = result.structured_content["report"]["ops"][0]
    rows = {row["kernel"]: row for row in op["rows"]}
    assert rows["v2_tiling"]["error"] == "could not be loaded: not provided"
    assert op["best"]["kernel"] == "v1_baseline", op["best"]
    assert "## Phase 4: Best kernel" in result.structured_content["files"]["add_log.md"]
    record = task_file(server, tasks.created[0]["taskId"])
    assert record["status"] == "completed" and len(record["jobs"]) == 2


def test_a_batch_task_is_cancelled(server: KforgeServer) -> None:
    sleepy = torch_kernel(SLEEPY_ADD)
    args = dict(batch_args(server, [sleepy, sleepy]), timeout=300)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with modern_client(server, Tasks()) as client:
            created = await client.session.call_tool("batch_compare", args, allow_claimed=True)
            assert isinstance(created, CreateTaskResult), created
            task_id = created.task_id
            ack = await client.session.send_request(
                CancelTask(params=TaskParams(taskId=task_id)), ANY
            )
            task = await poll(client, task_id, timeout_s=60)
            again = await client.session.send_request(
                CancelTask(params=TaskParams(taskId=task_id)), ANY
            )  # idempotent on a finished task
            assert again.get("resultType") == "complete"
            return ack, task, task_file(server, task_id)

    ack, task, record = anyio.run(scenario)
    assert set(ack) <= {"resultType", "_meta"} and ack["resultType"] == "complete"
    assert task["status"] == "cancelled" and "result" not in task
    assert "tasks/cancel" in task["statusMessage"]
    with server.client() as rest:
        deadline = time.monotonic() + 60
        for job_id in record["jobs"]:
            while (view := rest.get(f"/job/{job_id}").json())["state"] not in (
                "cancelled",
                "failed",
            ):
                # (state and progress first: the whole view is cut short in the report)
                assert time.monotonic() < deadline, (view["state"], view.get("progress"), view)
                time.sleep(0.2)
            assert view["state"] == "cancelled", view


def test_task_ids_are_checked_before_the_file_system(server: KforgeServer) -> None:
    async def scenario() -> list[str]:
        messages = []
        async with modern_client(server, Tasks()) as client:
            for bad in ("task-../../kforge.db", "task-" + "0" * 32, "task-" + "G" * 32):
                try:
                    await get_task(client, bad)
                except MCPError as e:
                    assert e.error.code == -32602, e.error
                    messages.append(e.error.message)
        return messages

    assert anyio.run(scenario) == ["Task not found: " + m for m in (
        "task-../../kforge.db", "task-" + "0" * 32, "task-" + "G" * 32)]  # fmt: skip


def test_batch_and_bench_tasks_survive_a_server_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    srv = KforgeServer(data_dir=data).start()
    try:

        async def create() -> tuple[str, str, str]:
            async with modern_client(srv, Tasks()) as client:
                batch = await client.session.call_tool(
                    "batch_compare", batch_args(srv, [triton_add()]), allow_claimed=True
                )
                bench = await client.session.call_tool(
                    "run_benchmark_suite", BENCH, allow_claimed=True
                )
                validate = await client.session.call_tool(
                    "validate_kernel", validate_args(srv.devices), allow_claimed=True
                )
                assert isinstance(batch, CreateTaskResult) and isinstance(bench, CreateTaskResult)
                assert isinstance(validate, CreateTaskResult)
                # Strong consistency: tasks/get finds them at once.
                assert (await get_task(client, batch.task_id))["taskId"] == batch.task_id
                return batch.task_id, bench.task_id, validate.task_id

        batch_id, bench_id, validate_id = anyio.run(create)
        # Cut the bench mid-way: once its first job is submitted (and remembered).
        deadline = time.monotonic() + 60
        while not (first := task_file(srv, bench_id)["jobs"][:1]) or not first[0]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        srv.stop()
        assert task_file(srv, bench_id)["status"] == "working"
        srv.start()

        async def finish() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
            async with modern_client(srv, Tasks()) as client:
                return (
                    await poll(client, batch_id),
                    await poll(client, bench_id),
                    await poll(client, validate_id),
                )

        batch, bench, validate = anyio.run(finish)
        assert validate["status"] == "completed", validate
        assert validate["result"]["structuredContent"]["validated"] is True
        assert batch["status"] == "completed", batch
        assert correctness(batch["result"]["structuredContent"]) == [True]
        assert bench["status"] == "completed", bench
        assert not bench["result"].get("isError"), bench["result"]
        op = bench["result"]["structuredContent"]["report"]["ops"][0]
        assert op["best"]["kernel"] == "v1_baseline", op["best"]
        record = task_file(srv, bench_id)
        assert record["jobs"][0] == first[0], "the resumed bench submitted its first job again"
        assert len(record["jobs"]) == 2 and all(record["jobs"])
        with httpx.Client(base_url=srv.url) as rest:
            for job_id in record["jobs"]:
                assert rest.get(f"/job/{job_id}").json()["state"] == "success"
        assert "resuming task " + bench_id in srv.log_path.read_text()
    finally:
        srv.stop()


def test_stdio_runs_a_batch_task_in_its_embedded_engine(tmp_path: Path) -> None:
    """`kforge mcp` (stdio, 2026-07-28 requests): the task book is in its data directory."""
    command, args = stdio_command(tmp_path / "data")
    params = StdioServerParameters(command=command, args=args, env=worker_env())
    tasks = Tasks()

    async def scenario() -> CallToolResult:
        async with Client(params, mode="2026-07-28", extensions=[tasks]) as client:  # type: ignore[arg-type]
            return await client.call_tool(
                "batch_compare", batch_args_on(device_under_test(), [triton_add()])
            )

    result = anyio.run(scenario)
    assert len(tasks.created) == 1 and not result.is_error, result.content
    assert result.structured_content is not None
    assert correctness(result.structured_content) == [True]
    task_id = tasks.created[0]["taskId"]
    record = json.loads((tmp_path / "data" / "mcp-tasks" / f"{task_id}.json").read_text())
    assert record["status"] == "completed" and record["jobs"] == result.structured_content["jobs"]
