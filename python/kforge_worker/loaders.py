"""Loads a kernel's source into a Runnable.

The source is written to `<scratch_dir>/<role>.py` and imported with importlib under a
unique module name (Triton's @jit needs real source, and tracebacks then point at the
user's file and line). Per kernel_type:

- torch / torch_cuda: `class Model` (a candidate prefers `ModelNew`), `get_inputs()`,
  `get_init_inputs()`. The model is built under a fixed torch.manual_seed so the reference
  and the candidate get identical weights. torch_cuda builds go to
  `<cache_dir>/torch_extensions/<sha256(source)[:16]>` (TORCH_EXTENSIONS_DIR).
  The callable may be named, as the kernel evaluation server allowed:
  `metadata.function_name` (a module-level function, called as it is), or
  `metadata.class_name` (default Model / ModelNew) with `metadata.method_name` (default
  forward; the instance is built like a Model).
- triton: the entry point (metadata.entry_point, metadata.kernel_name, else the module's
  only @triton.jit function). A JIT kernel is launched as `fn[grid](*args, **meta,
  num_warps=.., num_stages=..)` with the grid from io.launch.grid; a plain Python function
  (a wrapper) is called as `fn(*args, **meta)`.
- multi_kernel: metadata.entry_point, called like a Triton wrapper.
- cuda: jobs whose kernels are all `cuda` run in the native CUDA worker. In a compare with
  a Python kernel (a torch reference, say) the cuda kernel runs here, through the native
  backend's C ABI (cuda_abi.py): compiled with NVRTC and launched on the torch tensors of
  its IOContract's tensor arguments, in declared order, on torch's current stream.

Errors while importing (syntax, import-time exceptions, extension builds) raise LoadError,
which the pipeline reports as `compiled=false`.

Code the server appends to a source (the workbench's harness, `kforge bench`'s entry point,
the Triton interpreter fix on the cpu device) starts at a marker line `# ---- kforge ... ----`.
Only what comes before it is written to `<role>.py`; the rest runs in the same module under
its own name, `<kforge: code appended to the <role>>`, so that a traceback through the harness
never names a line of it as a line of the user's file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import linecache
import os
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import triton

from kforge_worker.spec import KernelSpec

_PACKAGE_DIR = str(Path(__file__).resolve().parent)
# The worker's files as its code objects name them: through PYTHONPATH, which may not be the
# resolved path (a symlinked install), so both spellings are checked.
_PACKAGE_DIRS = tuple({_PACKAGE_DIR, str(Path(__file__).parent)})

# Where code the server appended to a kernel's source begins (see the module docstring); the
# workbench (src/kforge/workbench/job_builder.cc) and `kforge bench` (bench_jobs.cc) write it.
_APPENDED_MARKER = re.compile(r"^# ---- kforge\b[^\n]*----[ \t]*$", re.MULTILINE)

# The files import_source wrote: the kernels' own sources. Their frames are the user's.
_USER_FILES: set[str] = set()


class DeviceUnavailable(Exception):
    """The kernel compiled but cannot run on this device (a `cuda` kernel without a GPU)."""


class LoadError(Exception):
    """The kernel does not import or compile; `details` is the traceback / compiler log."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details or message


@dataclass
class Runnable:
    """A loaded kernel, ready to be called with bound arguments."""

    kernel_type: str
    name: str
    invoke: Callable[[list[Any], dict[str, Any]], Any]
    passes_outputs: bool  # output tensors are arguments (Triton style), not return values
    module: ModuleType
    warnings: list[str] = field(default_factory=list)
    # A torch kernel's callable's signature (None when it has none to inspect): how it takes
    # an IOContract's arguments (binding.takes_io_positionally).
    signature: inspect.Signature | None = None

    def __call__(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return self.invoke(args, kwargs)


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
        if frame.filename in _USER_FILES:
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
        if getattr(module, "__file__", None) not in _USER_FILES:
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


def split_appended(source: str) -> tuple[str, str]:
    """(the kernel's own source, the code the server appended to it: "" when none)."""
    marker = _APPENDED_MARKER.search(source)
    if marker is None:
        return source, ""
    return source[: marker.start()], source[marker.start() :]


def appended_filename(role: str) -> str:
    """The name tracebacks give the code the server appended to the `role` kernel's source.
    Not a path: nothing outside this process reads it, and it ends neither in `/<role>.py`
    nor anything else the workbench renames to the user's file."""
    return f"<kforge: code appended to the {role}>"


def _run_appended(code: str, role: str, module: ModuleType) -> None:
    """Runs the appended code in the module's namespace under appended_filename(role); its
    lines go to linecache so that tracebacks show them (mtime None: never checked on disk)."""
    filename = appended_filename(role)
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    exec(compile(code, filename, "exec"), module.__dict__)


def import_source(source: str, role: str, scratch_dir: str) -> ModuleType:
    """Writes the source to `<scratch_dir>/<role>.py` and imports it (code the server
    appended runs after it, see the module docstring). Raises LoadError."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    own, appended = split_appended(source)
    path = Path(scratch_dir) / f"{role}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(own)
    _USER_FILES.add(str(path))
    name = f"kforge_user_{role}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        if appended:
            _run_appended(appended, role, module)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # SystemExit at import time is a failed import too
        sys.modules.pop(name, None)
        raise LoadError(
            f"{role} failed to import: {type(e).__name__}: {e}", format_user_traceback(e)
        ) from e
    return module


def load_module(kernel: KernelSpec, role: str, scratch_dir: str, cache_dir: str) -> ModuleType:
    """Imports the kernel's source (step 1 of loading). Raises LoadError."""
    if kernel.kernel_type == "cuda":
        # CUDA C++ source is compiled by cuda_runnable, not imported.
        return ModuleType(f"kforge_cuda_{role}")
    if kernel.kernel_type not in ("torch", "torch_cuda", "triton", "multi_kernel"):
        raise LoadError(f"unknown kernel_type {kernel.kernel_type!r}")
    if kernel.kernel_type == "torch_cuda":
        digest = hashlib.sha256(kernel.source_code.encode()).hexdigest()[:16]
        base = cache_dir or scratch_dir
        os.environ["TORCH_EXTENSIONS_DIR"] = str(Path(base) / "torch_extensions" / digest)
    return import_source(kernel.source_code, role, scratch_dir)


def model_class(module: ModuleType, prefer_new: bool) -> type:
    """`ModelNew` (candidates) or `Model`. Raises LoadError."""
    names = ("ModelNew", "Model") if prefer_new else ("Model", "ModelNew")
    for name in names:
        cls = getattr(module, name, None)
        if isinstance(cls, type):
            return cls
    raise LoadError(f"the source defines no class {' or '.join(names)}")


@dataclass(frozen=True)
class TorchTarget:
    """Which callable of a torch / torch_cuda source runs (metadata names, see module doc)."""

    function_name: str | None = None
    class_name: str | None = None
    method_name: str = "forward"


def _metadata_name(kernel: KernelSpec, key: str) -> str | None:
    value = kernel.metadata.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.isidentifier():
        raise LoadError(f"metadata.{key} must be a Python identifier, got {value!r}")
    return value


def torch_target(kernel: KernelSpec) -> TorchTarget:
    """The target named by metadata.function_name / class_name / method_name. Raises
    LoadError for names that are not identifiers or a function named with a class."""
    function = _metadata_name(kernel, "function_name")
    cls = _metadata_name(kernel, "class_name")
    method = _metadata_name(kernel, "method_name")
    if function is not None and (cls is not None or method is not None):
        raise LoadError(
            "metadata.function_name names a function: do not also give class_name/method_name"
        )
    return TorchTarget(function, cls, method or "forward")


def _defined_names(module: ModuleType) -> str:
    names = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
    return ", ".join(names) or "nothing callable"


def named_function(module: ModuleType, name: str) -> Callable[..., Any]:
    """The module-level function `name` (metadata.function_name). Raises LoadError."""
    fn: object = getattr(module, name, None)
    if fn is None:
        raise LoadError(
            f"metadata.function_name {name!r} is not defined in the source "
            f"(it defines: {_defined_names(module)})"
        )
    if isinstance(fn, type):
        raise LoadError(
            f"metadata.function_name {name!r} is a class; name it with metadata.class_name"
        )
    if not callable(fn):
        raise LoadError(f"metadata.function_name {name!r} is a {type(fn).__name__}, not callable")
    return fn


def signature_of(fn: Callable[..., Any]) -> inspect.Signature | None:
    """inspect.signature(fn), or None for a callable that has none (a builtin, say)."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def function_runnable(kernel: KernelSpec, module: ModuleType, name: str) -> Runnable:
    """A torch kernel whose callable is a module-level function. Raises LoadError."""
    fn = named_function(module, name)

    def invoke(args: list[Any], kwargs: dict[str, Any]) -> Any:
        return fn(*args, **kwargs)

    return Runnable(
        kernel.kernel_type,
        name,
        invoke,
        passes_outputs=False,
        module=module,
        signature=signature_of(fn),
    )


def target_class(module: ModuleType, target: TorchTarget, prefer_new: bool) -> type:
    """metadata.class_name, else `ModelNew` (candidates) or `Model`. Raises LoadError."""
    if target.class_name is None:
        return model_class(module, prefer_new)
    cls = getattr(module, target.class_name, None)
    if not isinstance(cls, type):
        what = "is not defined" if cls is None else f"is a {type(cls).__name__}, not a class"
        raise LoadError(
            f"metadata.class_name {target.class_name!r} {what} in the source "
            f"(it defines: {_defined_names(module)})"
        )
    return cls


def torch_runnable(
    kernel: KernelSpec, module: ModuleType, model: Any, method_name: str = "forward"
) -> Runnable:
    """Wraps a constructed model (already on its device); calls `method_name` (a
    torch.nn.Module's forward through its __call__, so hooks run as usual). Raises LoadError
    when the method does not exist."""
    method = getattr(model, method_name, None)
    if method is None or not callable(method):
        raise LoadError(
            f"metadata.method_name {method_name!r} is not a method of {type(model).__name__}"
        )
    call = model if method_name == "forward" and callable(model) else method

    def invoke(args: list[Any], kwargs: dict[str, Any]) -> Any:
        return call(*args, **kwargs)

    name = type(model).__name__ + ("" if method_name == "forward" else f".{method_name}")
    name = kernel.entry_point or name
    return Runnable(
        kernel.kernel_type,
        name,
        invoke,
        passes_outputs=False,
        module=module,
        signature=signature_of(method),
    )


def _base_function(obj: Any) -> Any:
    seen = 0
    while hasattr(obj, "fn") and seen < 8:
        obj = obj.fn
        seen += 1
    return obj


def _is_triton_kernel(obj: Any) -> bool:
    return isinstance(obj, triton.runtime.KernelInterface)


def _is_autotuned(obj: Any) -> bool:
    from triton.runtime.autotuner import Autotuner

    while obj is not None:
        if isinstance(obj, Autotuner):
            return True
        obj = getattr(obj, "fn", None)
    return False


def find_entry(kernel: KernelSpec, module: ModuleType) -> tuple[str, Any]:
    """The entry point object (see module docstring). Raises LoadError."""
    name = kernel.entry_point
    if name:
        entry = getattr(module, name, None)
        if entry is None:
            # The kernel evaluation server's wording ("Entry point 'run' not found"), which
            # its clients and tests look for.
            raise LoadError(
                f"Entry point '{name}' not found in the source "
                f"(it defines: {_defined_names(module)})"
            )
        if not callable(entry) and not _is_triton_kernel(entry):
            raise LoadError(f"Entry point '{name}' is a {type(entry).__name__}, not callable")
        return name, entry
    if kernel.kernel_type == "multi_kernel":
        raise LoadError("kernel_type 'multi_kernel' needs metadata.entry_point")
    kernels = [
        (k, v)
        for k, v in vars(module).items()
        if _is_triton_kernel(v) and getattr(_base_function(v), "__module__", "") == module.__name__
    ]
    if len(kernels) == 1:
        return kernels[0]
    if not kernels:
        raise LoadError(
            "the source defines no @triton.jit function; "
            "set metadata.entry_point to the function to call"
        )
    names = ", ".join(k for k, _ in kernels)
    raise LoadError(
        f"the source defines several @triton.jit functions ({names}); "
        "set metadata.entry_point to the one to launch"
    )


def entry_runnable(kernel: KernelSpec, module: ModuleType) -> Runnable:
    """A Triton kernel or Python wrapper (triton, multi_kernel). Raises LoadError."""
    name, entry = find_entry(kernel, module)
    warnings: list[str] = []
    if not _is_triton_kernel(entry):

        def call_wrapper(args: list[Any], kwargs: dict[str, Any]) -> Any:
            return entry(*args, **kwargs)

        return Runnable(kernel.kernel_type, name, call_wrapper, True, module, warnings)
    launch = kernel.io.launch if kernel.io is not None else None
    if launch is None or launch.grid is None:
        raise LoadError(
            f"io.launch.grid is required to launch the @triton.jit kernel {name!r} "
            "(or set metadata.entry_point to a Python wrapper that launches it)"
        )
    grid = launch.grid
    options: dict[str, int] = {}
    if _is_autotuned(entry):
        if launch.num_warps is not None or launch.num_stages is not None:
            warnings.append("io.launch.num_warps/num_stages ignored: the kernel is autotuned")
    else:
        if launch.num_warps is not None:
            options["num_warps"] = launch.num_warps
        if launch.num_stages is not None:
            options["num_stages"] = launch.num_stages
    launcher = entry[grid]

    def call_kernel(args: list[Any], kwargs: dict[str, Any]) -> Any:
        return launcher(*args, **kwargs, **options)

    return Runnable(kernel.kernel_type, name, call_kernel, True, module, warnings)


def cuda_runnable(kernel: KernelSpec, module: ModuleType, cache_dir: str, device: Any) -> Runnable:
    """A `cuda` kernel compiled and loaded through the C ABI. Raises LoadError (NVRTC's log)
    or DeviceUnavailable (it compiled, but there is no CUDA device here)."""
    from kforge_worker import cuda_abi

    try:
        compiled = cuda_abi.CudaKernel(kernel, cache_dir)
    except cuda_abi.CudaCompileError as e:
        raise LoadError("NVRTC could not compile the cuda kernel", str(e)) from e
    except cuda_abi.CudaUnavailable as e:
        if e.code == cuda_abi.ERROR_NO_DEVICE:
            raise DeviceUnavailable(str(e)) from e
        raise LoadError(f"cannot compile the cuda kernel: {e}") from e
    except cuda_abi.CudaAbiError as e:
        raise LoadError(f"the cuda kernel could not be loaded: {e}") from e
    import torch

    def invoke(args: list[Any], kwargs: dict[str, Any]) -> Any:
        ptrs = []
        for a in args:
            if not isinstance(a, torch.Tensor):
                continue
            if a.device != device or not a.is_contiguous():
                raise RuntimeError(
                    f"a cuda kernel needs contiguous tensors on {device}, got one on {a.device}"
                )
            ptrs.append(a.data_ptr())
        compiled.launch(ptrs, torch.cuda.current_stream(device).cuda_stream)
        return None

    name = kernel.entry_point or "kernel"
    runnable = Runnable("cuda", name, invoke, passes_outputs=True, module=module)
    runnable.module.__dict__["kforge_cuda_kernel"] = compiled  # lives as long as the job
    log = compiled.info.get("log") or ""
    if log:
        runnable.warnings.append(f"NVRTC: {log}")
    return runnable
