"""Tracebacks and error summaries name the right file and line.

The workbench and `kforge bench` append code of their own to a kernel's source (a harness
that defines ModelNew and get_inputs, the Triton interpreter fix, an entry point), after a
`# ---- kforge ... ----` line. A frame in that code must not be reported as a line of the
user's file: a 12-line kernel file was once blamed for its "line 105", a line of the
workbench's harness. The worker's own frames are hidden, however its path is spelled.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import worker_kernels as K
from worker_jobs import make_job, run

from kforge_worker.candidate import loaders
from kforge_worker.candidate.loaders import (
    LoadError,
    appended_filename,
    import_source,
    split_appended,
)
from kforge_worker.candidate.tracebacks import describe_call_failure, format_user_traceback

# A user's kernel file of the workbench's kind: `solve` fails at line 8.
USER_FILE = """\
import torch


def double(x):
    return x * 2


def solve(x):
    raise ValueError("solve is broken")
"""
USER_LINES = USER_FILE.count("\n")
FAILING_LINE = USER_FILE.splitlines().index('    raise ValueError("solve is broken")') + 1

# What the workbench appends (src/kforge/workbench/job_builder.cc), in short: a harness whose
# ModelNew.forward calls the file's entry function, and get_inputs().
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
HARNESS_CALL = 'return globals()["solve"](*inputs)'


def user_lines_named(text: str, filename: str = "candidate.py") -> list[int]:
    """The line numbers the text attributes to the user's file."""
    return [int(n) for n in re.findall(rf'{re.escape(filename)}", line (\d+)', text)]


def test_the_source_is_split_at_the_first_kforge_marker():
    own, appended = split_appended(USER_FILE + HARNESS)
    assert own == USER_FILE + "\n\n"
    assert appended.startswith("# ---- kforge workbench harness:")
    assert split_appended(USER_FILE) == (USER_FILE, "")
    # A comment that merely mentions kforge is the user's.
    assert split_appended("# ---- kforge is great\nx = 1\n")[1] == ""


def test_a_harness_frame_is_not_a_line_of_the_users_file(tmp_path):
    result = run(make_job(K.torch_kernel(USER_FILE + HARNESS), tmp_path=tmp_path))
    assert result["error_kind"] == "runtime", result
    text = result["runtime_error"]
    # The user's frame: their file, their line, its text.
    assert f'candidate.py", line {FAILING_LINE}, in solve' in text, text
    assert 'raise ValueError("solve is broken")' in text
    # Every line attributed to the user's file is one of its lines.
    assert all(n <= USER_LINES for n in user_lines_named(text)), text
    # The harness's frame is named as kforge's, with its line's text.
    assert f'File "{appended_filename("candidate")}", line' in text, text
    assert HARNESS_CALL in text
    # The file the user's tracebacks name holds their code only.
    written = (tmp_path / "scratch" / "candidate" / "candidate.py").read_text()
    assert written.strip() == USER_FILE.strip()


def test_an_import_error_in_the_harness_names_the_harness(tmp_path):
    harness = HARNESS + '\nraise NameError("the kernel file defines no function solve2(...)")\n'
    with pytest.raises(LoadError) as caught:
        import_source(USER_FILE + harness, "candidate", str(tmp_path))
    details = caught.value.details
    assert f'File "{appended_filename("candidate")}", line' in details, details
    assert user_lines_named(details) == [], details


# A Triton kernel (run by the interpreter here) whose body calls a plain Python function the
# appended code defines: the summary's "line N of the source" is the user's call, not the
# appended function's line.
TRITON_USER_FILE = """\
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, _kf_check(x), mask=mask)
"""
TRITON_APPENDED = """

# ---- kforge bench: an appended helper ----
def _kf_check(x):
    raise ValueError("refused by the appended helper")
"""


def test_an_interpreter_error_is_placed_on_the_users_line(tmp_path):
    import torch

    module = import_source(TRITON_USER_FILE + TRITON_APPENDED, "candidate", str(tmp_path))
    x = torch.randn(64)
    with pytest.raises(Exception) as caught:
        module.add_kernel[(1,)](x, x, torch.empty(64), 64, BLOCK=64)
    kind, text = describe_call_failure(caught.value)
    assert kind == "compile"
    call = TRITON_USER_FILE.splitlines().index(
        "    tl.store(out_ptr + offsets, _kf_check(x), mask=mask)"
    )
    summary = text.splitlines()[0]
    assert f"(line {call + 1} of the source: tl.store(" in summary, summary
    assert all(n <= TRITON_USER_FILE.count("\n") for n in user_lines_named(text)), text
    assert appended_filename("candidate") in text


def test_worker_frames_are_hidden_when_its_path_is_a_symlink(tmp_path):
    # The worker found through a symlinked PYTHONPATH (an install that links its package):
    # its code objects name the link, not the resolved path.
    package = Path(loaders.__file__).resolve().parents[1]  # python/kforge_worker
    (tmp_path / "python").symlink_to(package.parent)
    linked = tmp_path / "python" / package.name / "candidate" / "loaders.py"
    scope: dict[str, object] = {}
    exec(compile("def call(f):\n    return f()\n", str(linked), "exec"), scope)

    def boom() -> None:
        raise ValueError("the user's error")

    with pytest.raises(ValueError) as caught:
        scope["call"](boom)  # type: ignore[operator]
    text = format_user_traceback(caught.value)
    assert "ValueError: the user's error" in text
    assert str(linked) not in text, text


# Compiles NESTED's kernel for an H100 in a fresh interpreter (this process runs Triton's
# interpreter, whose patches of triton.language a compile must not meet) and prints what
# report_exception makes of the error: one in a helper the kernel calls is reported at the
# helper's line of the file.
NESTED = """\
import triton
import triton.language as tl


@triton.jit
def helper(v):
    return tl.no_such_function(v)


@triton.jit
def kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs)))
"""

_COMPILE_NESTED = """
import json
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kforge_worker.judge.correctness import report_exception
from kforge_worker.candidate.loaders import import_source
from kforge_worker.judge.results import JobResult

module = import_source(SOURCE, "candidate", SCRATCH)
src = ASTSource(module.kernel, {"x_ptr": "*fp32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 16})
try:
    triton.compile(src, target=GPUTarget("cuda", 90, 32))
except Exception as e:
    result = JobResult(compiled=True)
    report_exception(result, e, "trial 1/5")
    print(json.dumps(result.to_dict()))
"""


def test_a_compile_error_in_a_helper_names_its_line_of_the_file(tmp_path):
    import json

    from worker_jobs import run_python_compiled

    code = f"SOURCE = {NESTED!r}\nSCRATCH = {str(tmp_path)!r}\n{_COMPILE_NESTED}"
    done = run_python_compiled(code)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["compiled"] is False and result["error_kind"] == "compile"
    first = result["validation_error"].splitlines()[0]
    line = NESTED.splitlines().index("    return tl.no_such_function(v)") + 1
    assert "@triton.jit function helper" in first, first
    assert "no_such_function" in first, first
    assert f"(line {line} of the source: return tl.no_such_function(v))" in first, first


REPO = Path(__file__).resolve().parents[2]


def test_the_servers_markers_are_the_ones_the_worker_splits_at():
    # The C++ side writes the marker lines (the workbench, `kforge bench`); the first one in a
    # source starts what the worker runs as kforge's code. Each is checked as the C++ source
    # spells it: the literal from `# ---- kforge` to its `\n`, concatenations dropped.
    found = []
    for name in ("src/kforge/workbench/job_builder.cc", "src/kforge/bench/bench_jobs.cc"):
        text = (REPO / name).read_text()
        # The literals that append code: "\n\n# ---- kforge ... ----\n" (comments are not).
        for start in (m.start(1) for m in re.finditer(r"\\n\\n(# ---- kforge)", text)):
            literal = text[start : text.index("\\n", start)]
            line = re.sub(r'"\s*\+[^+]*\+\s*"', "<op>", literal).replace('\\"', '"')
            found.append(line)
            assert split_appended(f"x = 1\n\n{line}\ny = 2\n") == ("x = 1\n\n", f"{line}\ny = 2\n")
    assert len(found) == 4, found


BROKEN_INIT = """\
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        raise KeyError("no weights")

    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(8)]
"""
INIT_LINE = BROKEN_INIT.splitlines().index('        raise KeyError("no weights")') + 1


@pytest.mark.parametrize("side", ["candidate", "reference"])
def test_a_failing_constructor_is_said_once_with_its_line(tmp_path, side):
    # Once read "the kernel raised in Model(*get_init_inputs()) raised KeyError::" followed
    # by the same heading again: the failure was in no trial, and the heading is said once.
    good = K.torch_kernel(BROKEN_INIT.replace('        raise KeyError("no weights")\n', ""))
    broken = K.torch_kernel(BROKEN_INIT)
    kernel, reference = (broken, good) if side == "candidate" else (good, broken)
    result = run(make_job(kernel, reference, tmp_path=tmp_path))
    text = result["runtime_error"]
    prefix = "" if side == "candidate" else "reference kernel: "
    assert text.startswith(f"{prefix}Model(*get_init_inputs()) raised KeyError:\n"), text
    assert text.count("raised KeyError") == 1, text
    assert f'{side}.py", line {INIT_LINE}, in __init__' in text, text
