"""Loads a kernel's source into a Runnable.

The source is written to `<scratch_dir>/<role>.py` and imported with importlib under a unique
module name (Triton's @jit needs real source, and tracebacks, tracebacks.py, then point at the
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import triton

from kforge_worker.candidate.tracebacks import USER_FILES, format_user_traceback
from kforge_worker.core.spec import PYTHON_KERNEL_TYPES, KernelSpec

# Where code the server appended to a kernel's source begins (see the module docstring); the
# workbench (src/kforge/workbench/job_builder.cc) and `kforge bench` (bench_jobs.cc) write it.
_APPENDED_MARKER = re.compile(r"^# ---- kforge\b[^\n]*----[ \t]*$", re.MULTILINE)


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
    USER_FILES.add(str(path))
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
    if kernel.kernel_type not in PYTHON_KERNEL_TYPES:
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
    from kforge_worker.candidate import cuda_abi

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
