"""Every frame of a reported traceback names the right file and line, through the REST API and
the workbench: a user's frame is a line of their source (its number and its text), and code
kforge appended to a source (the workbench's harness, after a `# ---- kforge ... ----` line) is
named as kforge's. A 12-line kernel file was once told its error was at its "line 105", a line
of the workbench's harness.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from integration.kernels import FAST_TIMING, model_source, torch_kernel, vector_add_io
from integration.kforge_server import KforgeServer, device_under_test, kforge_binary
from integration.mcp_support import worker_env

FRAME = re.compile(r'  File "([^"]+)", line (\d+), in [^\n]+\n(?:    ([^\n]*)\n)?')


def frames(text: str, file_suffix: str) -> list[tuple[int, str]]:
    """(line, its text) of each frame in a file whose name ends with `file_suffix`."""
    return [
        (int(m.group(2)), (m.group(3) or "").strip())
        for m in FRAME.finditer(text)
        if m.group(1).endswith(file_suffix)
    ]


def assert_frames_are_lines_of(text: str, source: str, file_suffix: str) -> None:
    """Each frame the text places in the file is one of the source's lines, with its text."""
    lines = source.splitlines()
    found = frames(text, file_suffix)
    assert found, text
    for number, line in found:
        assert 1 <= number <= len(lines), (number, text)
        assert lines[number - 1].strip() == line, (number, line, text)


def error_text(result: dict[str, Any]) -> str:
    return "\n".join(result.get(k) or "" for k in ("compilation_error", "runtime_error"))


def evaluate(server: KforgeServer, kernel: dict[str, Any]) -> dict[str, Any]:
    body = {"kernel": kernel, "num_correct_trials": 1, "measure_performance": False}
    with server.client() as c:
        r = c.post("/evaluate", json=body)
    assert r.status_code == 200, r.text
    return r.json()["kernel_exec_result"]


FORWARD_RAISES = model_source('y = x * 2\nraise ValueError("forward is broken")')
IMPORT_RAISES = "import torch\n\nx = 1\nraise RuntimeError('boom at import')\n"
# A harness of the workbench's kind after the user's code: ModelNew.forward calls `solve`.
USER_FILE = "import torch\n\n\ndef solve(x):\n    raise ValueError('solve is broken')\n"
HARNESS = """

# ---- kforge workbench harness: appended by the server, not part of your code ----
import torch as _kf_torch


def get_inputs():
    return [_kf_torch.randn(64)]


def get_init_inputs():
    return []


class ModelNew(_kf_torch.nn.Module):
    def forward(self, *inputs):
        return globals()["solve"](*inputs)
"""
# A Triton kernel whose body fails when first run (a compile error on the cpu's interpreter
# and on a GPU alike).
TRITON_UNDEFINED = """import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x + undefined_name)
"""


def test_a_models_forward_that_raises_is_placed_on_its_line(server: KforgeServer) -> None:
    result = evaluate(server, torch_kernel(FORWARD_RAISES))
    assert result["error_kind"] == "runtime", result
    assert_frames_are_lines_of(result["runtime_error"], FORWARD_RAISES, "/candidate.py")


def test_a_module_that_raises_at_import_is_placed_on_its_line(server: KforgeServer) -> None:
    result = evaluate(server, torch_kernel(IMPORT_RAISES))
    assert result["compiled"] is False, result
    assert_frames_are_lines_of(result["compilation_error"], IMPORT_RAISES, "/candidate.py")


def test_a_harness_after_the_source_is_not_the_users_file(server: KforgeServer) -> None:
    result = evaluate(server, torch_kernel(USER_FILE + HARNESS))
    assert result["error_kind"] == "runtime", result
    text = result["runtime_error"]
    assert_frames_are_lines_of(text, USER_FILE, "/candidate.py")
    assert frames(text, "<kforge: code appended to the candidate>") == [
        (HARNESS.splitlines().index('        return globals()["solve"](*inputs)') - 1,
         'return globals()["solve"](*inputs)')
    ], text  # fmt: skip


def test_a_triton_kernel_that_fails_at_launch_is_placed_on_its_line(server: KforgeServer) -> None:
    io = vector_add_io()
    kernel = {"source_code": TRITON_UNDEFINED, "kernel_type": "triton", "io": io}
    result = evaluate(server, kernel)
    assert result["compiled"] is False and result["error_kind"] == "compile", result
    line = TRITON_UNDEFINED.splitlines().index("    tl.store(out_ptr + offs, x + undefined_name)")
    summary = result["validation_error"]
    assert "undefined_name" in summary, summary
    if device_under_test() == "cpu":  # the interpreter runs the body: a frame of the file
        assert f"(line {line + 1} of the source: tl.store(" in summary, summary
        assert_frames_are_lines_of(error_text(result), TRITON_UNDEFINED, "/candidate.py")


def test_a_failing_reference_is_placed_on_its_line(server: KforgeServer) -> None:
    body = {
        "ref_kernel": torch_kernel(FORWARD_RAISES),
        "custom_kernel": torch_kernel(model_source("return x * 2")),
        "num_correct_trials": 1,
        "measure_performance": False,
        "timing": FAST_TIMING,
    }
    with server.client() as c:
        result = c.post("/compare", json=body).json()["kernel_exec_result"]
    assert "the reference kernel raised" in result["runtime_error"], result
    assert_frames_are_lines_of(result["runtime_error"], FORWARD_RAISES, "/reference.py")


# The report that started this: a 12-line kernel file through the workbench, whose `solve`
# raises; the workbench names the file `kernel_code` in a stateless call.
KERNEL_FILE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass


def solve(x, y):
    raise ValueError("solve is broken")
"""
INPUTS = "x = torch.randn(300, device=DEVICE)\ny = torch.randn(300, device=DEVICE)\nargs = [x, y]\n"


def test_the_workbench_names_only_lines_of_the_kernel_file(tmp_path: Path) -> None:
    args = ["mcp", "--devices", device_under_test(), "--data-dir", str(tmp_path / "data"),
            "--workspace", str(tmp_path / "project")]  # fmt: skip
    params = StdioServerParameters(command=str(kforge_binary()), args=args, env=worker_env())

    async def run() -> str:
        async with Client(params) as client:
            r = await client.call_tool(
                "run_triton_kernel", {"code": KERNEL_FILE, "test_input_code": INPUTS}
            )
            assert r.is_error and r.structured_content["cases"][0]["verdict"] == "runtime_error"
            return r.content[0].text

    text = anyio.run(run)
    assert_frames_are_lines_of(text, KERNEL_FILE, "kernel_code")
    assert frames(text, "kernel_code")[-1][0] == KERNEL_FILE.count("\n"), text
    assert "<kforge: code appended to the candidate>" in text, text
