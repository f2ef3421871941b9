"""A whole Triton-workbench agent session, as an MCP client drives it (used by
test_workbench.py on the cpu device and by scripts/gpu-check.sh on a GPU).

The session writes three softmax versions — v1 wrong (it never divides by the row sum), v2
and v3 right — and goes through the information tools, state-gating errors, validation,
benchmarks, the 3-version rule, a server restart with resumption from a new MCP session, the
70 % context summary, and get_best_kernel. `run_session` returns what the caller checks on
disk and prints.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client

from integration.kforge_server import assert_speedup_given

WORKBENCH_TOOLS = [
    "get_overview", "get_triton_syntax", "get_torch_op_info", "get_kernel_template",
    "check_gpu_status", "get_current_status", "check_context_usage", "list_sessions",
    "resume_session", "set_kernel_name", "write_test_code", "write_kernel_code",
    "force_transition_to_write", "run_triton_kernel", "validate_correctness",
    "measure_kernel_time", "benchmark_kernel", "get_best_kernel",
]  # fmt: skip

# Small sizes keep the Triton interpreter quick on the cpu device; the GPU run adds a big one.
CPU_INPUTS = """\
sizes = [(16, 100), (8, 256)]  # (rows, cols)


def make_inputs(size):
    rows, cols = size
    return [torch.randn(rows, cols, device=DEVICE)]
"""
GPU_INPUTS = CPU_INPUTS.replace("[(16, 100), (8, 256)]", "[(16, 100), (1024, 1024), (4096, 4096)]")

REFERENCE = """\
import torch


def reference(x):
    return torch.softmax(x, dim=-1)
"""

V1_WRONG = '''\
"""v1: one row per program -- but it forgets to divide by the row sum."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + cols, e, mask=mask)


def solve(x):
    out = torch.empty_like(x)
    rows, cols = x.shape
    softmax_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
    return out
'''

V2_RIGHT = V1_WRONG.replace(
    "v1: one row per program -- but it forgets to divide by the row sum.",
    "v2: one row per program, max-subtracted exp, divided by the row sum.",
).replace(
    "tl.store(out_ptr + row * stride + cols, e,",
    "tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0),",
)

V3_RIGHT = '''\
"""v3: several rows per program ([ROWS, BLOCK] tiles), exp2 with log2(e) folded in."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, out_ptr, n_rows, n_cols, stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offsets = rows[:, None] * stride + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf")) * 1.4426950408889634
    e = tl.exp2(x - tl.max(x, axis=1)[:, None])
    tl.store(out_ptr + offsets, e / tl.sum(e, axis=1)[:, None], mask=mask)


def solve(x):
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    rows = max(1, min(16, 4096 // block))
    softmax_rows[(triton.cdiv(n_rows, rows),)](
        x, out, n_rows, n_cols, x.stride(0), ROWS=rows, BLOCK=block
    )
    return out
'''


@dataclass
class SessionRecord:
    session_id: str = ""
    workspace: Path = Path()
    device: str = ""
    summary_seen: bool = False
    calls: list[str] = field(default_factory=list)
    benchmarks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    best: dict[str, Any] = field(default_factory=dict)


class Driver:
    """Calls tools, records them, and checks the answers every call must have."""

    def __init__(self, client: Client, record: SessionRecord) -> None:
        self.client = client
        self.record = record

    async def __call__(self, tool: str, args: dict[str, Any] | None = None) -> Any:
        r = await self.client.call_tool(tool, args or {})
        self.record.calls.append(tool)
        text = r.content[0].text
        structured = r.structured_content or {}
        session = structured.get("session", {})
        assert "Next: " in text, (tool, text)  # every answer suggests the next step
        if session:
            self.record.session_id = session["id"]
            self.record.workspace = Path(session["workspace"])
        if structured.get("context", {}).get("summary_file"):
            self.record.summary_seen = True
            assert "resume_session(session_id=" in text, text
        return r

    async def ok(self, tool: str, args: dict[str, Any] | None = None) -> Any:
        r = await self(tool, args)
        assert not r.is_error, (tool, r.content[0].text)
        return r

    async def error(self, tool: str, args: dict[str, Any] | None = None) -> Any:
        r = await self(tool, args)
        assert r.is_error, (tool, r.content[0].text)
        return r


def state(r: Any) -> str:
    return r.structured_content["session"]["state"]


async def run_session(
    connect: Callable[[], Any],
    restart: Callable[[], Awaitable[None]] | Callable[[], None],
    device: str,
    budget_tokens: int = 12000,
) -> SessionRecord:
    """Runs the session. `connect()` opens a new MCP client (an async context manager);
    `restart()` restarts the server (after the first connection is closed)."""
    record = SessionRecord(device=device)
    inputs = CPU_INPUTS if device == "cpu" else GPU_INPUTS
    timing = {"warmup": 2, "rep": 5} if device == "cpu" else {"warmup": 10, "rep": 100}
    validate = {"reference_code": REFERENCE, "test_input_code": inputs}
    bench = {"reference_code": REFERENCE, "test_input_code": inputs, **timing}

    async with connect() as client:
        run = Driver(client, record)
        names = [t.name for t in (await client.list_tools()).tools]
        assert all(n in names for n in WORKBENCH_TOOLS), names

        # Information tools, in the start state.
        overview = await run.ok("get_overview")
        assert "## States" in overview.content[0].text and state(overview) == "start"
        assert "tl.program_id" in (await run.ok("get_triton_syntax")).content[0].text
        info = await run.ok("get_torch_op_info", {"op_name": "softmax"})
        assert info.structured_content["bound"] == "memory"
        assert "def reference" in info.structured_content["reference_code"]
        template = await run.ok("get_kernel_template", {"pattern": "reduction"})
        assert "@triton.jit" in template.structured_content["source"]
        gpu = await run.ok("check_gpu_status")
        assert device in [d["name"] for d in gpu.structured_content["devices"]]
        await run.error("get_torch_op_info", {"op_name": "no_such_op"})

        # State gating: writing before naming the kernel names the state and the way out.
        gated = await run.error("write_kernel_code", {"code": V2_RIGHT})
        text = gated.content[0].text
        assert "state 'start'" in text and "set_kernel_name(name)" in text, text

        named = await run.ok(
            "set_kernel_name",
            {"name": "softmax", "device": device, "context_budget_tokens": budget_tokens},
        )
        assert state(named) == "write"
        await run.ok("write_test_code", {"code": "# my own test notes\n" + inputs})

        # v1: runs, but validation finds it wrong and the session goes back to write.
        v1 = await run.ok("write_kernel_code", {"code": V1_WRONG})
        assert state(v1) == "evaluation" and v1.structured_content["version"] == 1
        ran = await run.ok("run_triton_kernel", {"test_input_code": inputs})
        assert len(ran.structured_content["cases"]) == len(json_sizes(inputs))
        wrong = await run.error("validate_correctness", validate)
        assert state(wrong) == "write", wrong.content[0].text
        assert "WRONG" in wrong.content[0].text
        assert wrong.structured_content["cases"][0]["verdict"] == "mismatch"
        await run.error("get_best_kernel")  # not in write

        # v2: right; validated and benchmarked.
        v2 = await run.ok("write_kernel_code", {"code": V2_RIGHT})
        assert v2.structured_content["version"] == 2
        right = await run.ok("validate_correctness", validate)
        assert right.structured_content["ok"] is True and state(right) == "evaluation"
        b2 = await run.ok("benchmark_kernel", bench)
        record.benchmarks[2] = b2.structured_content["cases"]
        for case in b2.structured_content["cases"]:
            assert case["timing"]["median_ms"] > 0, case
            assert_speedup_given(case.get("speedup"), case, notes="flags")
        rule = await run.error("get_best_kernel")
        assert "2 of the 3 versions" in rule.content[0].text, rule.content[0].text

    # The server restarts; a new MCP session resumes the workbench session by id.
    result = restart()
    if result is not None:
        await result
    async with connect() as client:
        run = Driver(client, record)
        resumed = await run.ok("resume_session", {"session_id": record.session_id})
        assert state(resumed) == "evaluation"
        assert resumed.structured_content["session"]["versions"] == 2
        status = await run.ok("get_current_status")
        versions = status.structured_content["versions"]
        assert [v["correct"] for v in versions] == [False, True], versions

        await run.ok("force_transition_to_write")
        v3 = await run.ok("write_kernel_code", {"code": V3_RIGHT})
        assert v3.structured_content["version"] == 3 and "Guidance" in v3.content[0].text
        await run.ok("validate_correctness", validate)
        measured = await run.ok("measure_kernel_time", {"test_input_code": inputs, **timing})
        assert all(c["timing"]["median_ms"] > 0 for c in measured.structured_content["cases"])
        b3 = await run.ok("benchmark_kernel", bench)
        record.benchmarks[3] = b3.structured_content["cases"]
        # The stateless form checks code without storing a version.
        stateless = await run.ok(
            "validate_correctness", {"kernel_code": V2_RIGHT, **validate, "rtol": 1e-4}
        )
        assert stateless.structured_content["session"]["versions"] == 3
        best = await run.ok("get_best_kernel")
        assert state(best) == "end"
        assert best.structured_content["version"] in (2, 3)
        record.best = best.structured_content
        usage = await run.ok("check_context_usage")
        assert usage.structured_content["epoch"] >= 2  # a new context after the resume
    return record


def json_sizes(test_input_code: str) -> list[Any]:
    line = next(li for li in test_input_code.splitlines() if li.startswith("sizes"))
    return json.loads(line.split("=", 1)[1].split("#")[0].replace("(", "[").replace(")", "]"))


def check_files(record: SessionRecord) -> list[dict[str, Any]]:
    """The workspace holds what the issue specifies; returns the JSON-lines log."""
    ws = record.workspace
    for n in (1, 2, 3):
        assert (ws / "kernel" / f"softmax_v{n}.py").is_file(), n
    assert (ws / "kernel" / "softmax_v1.py").read_text() == V1_WRONG  # never overwritten
    assert (ws / "tests" / "test_softmax.py").read_text().startswith("# my own test notes")
    assert (ws / "tests" / "reference.py").read_text() == REFERENCE
    assert (ws / "tests" / "test_inputs.py").is_file()
    lines = [
        json.loads(li)
        for li in (ws / "log" / f"{record.session_id}.jsonl").read_text().splitlines()
    ]
    assert [li["tool"] for li in lines] == record.calls
    for li in lines:
        assert {"arguments", "result", "duration_ms", "state_before", "state_after"} <= set(li)
    md = (ws / "log" / "softmax_log.md").read_text()
    for part in ("### v1", "### v2", "### v3", "FAILED", "benchmark_kernel", "Best so far"):
        assert part in md, part
    summary = ws / "docs" / "summarization.md"
    assert summary.is_file() and record.summary_seen
    text = summary.read_text()
    assert f'resume_session(session_id="{record.session_id}")' in text
    assert "## Versions and results" in text and "## Next steps" in text
    return lines


def summary_line(record: SessionRecord) -> str:
    """One line with the numbers: what gpu-check.sh prints."""
    parts = []
    for version, cases in sorted(record.benchmarks.items()):
        cells = ", ".join(
            f"{c['label']}: {c['timing']['median_ms']:.4g} ms {c.get('speedup', 0):.3g}x"
            + (
                f" {c['roofline']['pct_of_peak_bandwidth']:.0f}%BW"
                if "pct_of_peak_bandwidth" in c.get("roofline", {})
                else ""
            )
            for c in cases
        )
        parts.append(f"v{version} [{cells}]")
    best = record.best["version"]
    return f"workbench session {record.session_id} on {record.device}: best v{best}; " + "; ".join(
        parts
    )
