"""What a kernel's failure looks like to its author: tracebacks without the worker's own frames
(format_user_traceback), a compile error told apart from a runtime one (is_build_failure)
with a one-line summary that names the line of the user's file (build_failure_summary), and
the two together for a failed call (describe_call_failure). Frames of the files import_source
wrote (loaders.py) are the user's; frames under the worker's package are not.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

import triton

# The worker's package (python/kforge_worker, every room of it), this module being in one room.
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
# The worker's files as its code objects name them: through PYTHONPATH, which may not be the
# resolved path (a symlinked install), so both spellings are checked.
_PACKAGE_DIRS = tuple({_PACKAGE_DIR, str(Path(__file__).parents[1])})

# The files import_source wrote: the kernels' own sources. Their frames are the user's.
USER_FILES: set[str] = set()


def _is_worker_file(filename: str) -> bool:
    if filename.startswith("<frozen importlib"):
        return True
    if filename.startswith(_PACKAGE_DIRS):
        return True
    return not filename.startswith("<") and os.path.realpath(filename).startswith(_PACKAGE_DIR)


def format_user_traceback(exc: BaseException) -> str:
    """The traceback without the worker's own frames, so it starts at the user's code."""
    lines: list[str] = []
    for item in traceback.TracebackException.from_exception(exc).format():
        if item.startswith('  File "'):
            filename = item.split('"', 2)[1]
            if _is_worker_file(filename):
                continue
        lines.append(item)
    return "".join(lines)


def is_build_failure(exc: BaseException) -> bool:
    """True for compiler errors surfacing at call time: Triton's (a kernel is compiled at its
    first launch: CompilationError and its kin, ptxas failures, a compiled kernel that does
    not fit the device, anything raised inside triton.compile), their counterpart under the
    Triton interpreter (the cpu device: an error in the kernel's body that Triton's compiler
    would have reported), and cpp_extension builds."""
    from triton.compiler.errors import CompilationError
    from triton.runtime import errors

    # PTXASError is Triton 3.2's; OutOfResources: the compiled kernel's shared memory,
    # tensor memory or threads exceed what the device has (it was never launched).
    kinds = (CompilationError, errors.OutOfResources, getattr(errors, "PTXASError", None))
    if isinstance(exc, tuple(k for k in kinds if k is not None)):
        return True
    if isinstance(exc, errors.InterpreterError):
        return _interpreted_front_end_error(exc)
    if _raised_while_compiling(exc):
        return True
    return isinstance(exc, RuntimeError) and "Error building extension" in str(exc)


def _raised_while_compiling(exc: BaseException) -> bool:
    """Raised inside triton.compile (an MLIR pass or a backend tool failed), not while the
    compiled kernel was loaded or launched."""
    from triton.compiler import compiler

    return any(
        frame.name == "compile" and frame.filename == compiler.__file__
        for frame in traceback.extract_tb(exc.__traceback__)
    )


def _interpreted_cause(exc: BaseException) -> BaseException:
    """What the Triton interpreter's InterpreterError (nested once per @triton.jit call)
    wraps: the exception the kernel's body raised."""
    from triton.runtime.errors import InterpreterError

    while isinstance(exc, InterpreterError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _innermost_kernel_frame(
    exc: BaseException, *, in_triton: bool = True
) -> traceback.FrameSummary | None:
    """The innermost frame of `exc` in the kernel's own source or (`in_triton`) in Triton;
    not in the libraries an operation calls (numpy, say), the standard library, the worker
    or code the server appended to the source (the workbench's harness, say)."""
    triton_dir = str(Path(triton.__file__).parent)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename in USER_FILES:
            return frame
        if in_triton and frame.filename.startswith(triton_dir):
            return frame
    return None


def _interpreted_front_end_error(exc: BaseException) -> bool:
    """Under the interpreter a kernel's body runs as Python, so what Triton's compiler reports
    (an undefined name or attribute such as `tl.lod`, a type or shape rule of triton.language,
    a failed tl.static_assert) is raised while it runs: in the kernel's own lines or in
    triton.language. Those are compile errors. A failure inside an operation the interpreter
    executes (a tl.device_assert, a memory access) is the kernel's runtime error, and a
    feature the interpreter lacks (NotImplementedError) is not the kernel's fault at all."""
    from triton.runtime import interpreter

    cause = _interpreted_cause(exc)
    if cause is exc or isinstance(cause, NotImplementedError):
        return False
    frame = _innermost_kernel_frame(cause)
    if frame is None:
        return False
    if frame.filename == interpreter.__file__:
        return frame.name == "_new_static_assert"  # the interpreter's tl.static_assert
    return True


def build_failure_summary(exc: BaseException) -> str:
    """One line naming what did not compile and why: the rule the kernel broke (Triton's own
    message, e.g. "Input shapes should have M >= 1, N >= 1 and K >= 16") and where."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import InterpreterError

    if isinstance(exc, CompilationError):
        return _compilation_error_summary(exc)
    if isinstance(exc, InterpreterError):
        cause = _interpreted_cause(exc)
        own = _innermost_kernel_frame(cause, in_triton=False)
        where = f" (line {own.lineno} of the source: {own.line})" if own is not None else ""
        return f"{type(cause).__name__}: {_one_line(str(cause))}{where}"
    return f"{type(exc).__name__}: {_one_line(_lines(str(exc))[:1])}".rstrip(": ")


def _compilation_error_summary(exc: BaseException) -> str:
    """A CompilationError where it was raised: an error in a @triton.jit function the kernel
    calls is re-raised at each call site, so the innermost one names the failing line (and
    the error: the outer ones have none). Triton counts lines from the function's def; the
    line of the user's file is added."""
    from triton.compiler.errors import CompilationError

    while isinstance(exc.__cause__, CompilationError):
        exc = exc.__cause__
    node = getattr(exc, "node", None)
    lineno = getattr(node, "lineno", None)
    where = f" at {lineno}:{node.col_offset}" if node is not None and lineno is not None else ""
    src = getattr(exc, "src", None)
    name = re.match(r"\s*def\s+(\w+)", src or "")
    function = f"@triton.jit function {name.group(1)}" if name else "@triton.jit function"
    # The message ends with what the compiler raised (after the source excerpt).
    why = getattr(exc, "error_message", None) or _lines(str(exc))[-1:]
    own = _jit_source_line(src, lineno) if lineno is not None else None
    line = f" (line {own[0]} of the source: {own[1]})" if own is not None else ""
    return f"{type(exc).__name__}{where} of the {function}: {_one_line(why)}{line}"


def _jit_source_line(src: str | None, lineno: int) -> tuple[int, str] | None:
    """(line number in its file, text) of line `lineno`, counted from the def, of the
    @triton.jit function whose source is `src`, when a kernel's own file defines it."""
    try:
        from triton.runtime.jit import JITFunction, get_jit_fn_file_line
    except ImportError:  # a Triton without it: the summary keeps Triton's own count
        return None
    # Newest first: a process that served earlier jobs still holds their kernels' modules.
    for module in reversed(list(sys.modules.values())):
        if getattr(module, "__file__", None) not in USER_FILES:
            continue
        for value in list(vars(module).values()):
            fn = _jit_function(value, JITFunction)
            if fn is not None and fn.src == src:
                filename, def_line = get_jit_fn_file_line(fn)
                line = def_line + lineno - 1
                return line, linecache.getline(filename, line).strip()
    return None


def _jit_function(obj: Any, kind: type) -> Any:
    """The JITFunction under @triton.autotune / @triton.heuristics wrappers, or None."""
    for _ in range(8):
        if isinstance(obj, kind):
            return obj
        obj = getattr(obj, "fn", None)
    return None


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _one_line(text: str | list[str]) -> str:
    return " ".join(_lines(text if isinstance(text, str) else "\n".join(text)))


def describe_call_failure(exc: BaseException) -> tuple[str, str]:
    """(error kind, text) of an exception a kernel's call raised: `compile` with a one-line
    summary (build_failure_summary) before the traceback, or `runtime` with the traceback."""
    if is_build_failure(exc):
        return "compile", f"{build_failure_summary(exc)}\n{format_user_traceback(exc)}"
    return "runtime", format_user_traceback(exc)
