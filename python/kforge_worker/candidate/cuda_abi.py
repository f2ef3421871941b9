"""`cuda` kernels in the Python worker, through the native backend's C ABI.

libkforge_cuda.so (src/kforge/cuda/abi/kforge_cuda.h) compiles a `cuda` kernel with NVRTC
(through the same on-disk compile cache as the native worker) and launches it on
torch-allocated buffers, on torch's current stream, with the arguments marshalled from the
kernel's IOContract by the same C++ code the native worker uses. The Python worker needs it
for compares of a torch reference with a cuda candidate: both must see identical inputs,
and only torch's generator can draw the reference's inputs.

The library is found through KFORGE_CUDA_ABI (the server sets it for the zygote), else in
the repository's build trees. It is loaded lazily, on the first cuda kernel of a job, i.e.
in the job's child: the zygote never loads it (it must never touch CUDA).
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from kforge_worker.core.spec import KernelSpec

ABI_VERSION = 1
_REPO = Path(__file__).resolve().parents[3]

OK = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_COMPILE = 2
ERROR_NO_DEVICE = 3
ERROR_NVRTC_UNAVAILABLE = 4
ERROR_CUDA = 5


class CudaAbiError(Exception):
    """A call into libkforge_cuda.so failed; `code` is its kforge_cuda_status."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class CudaCompileError(CudaAbiError):
    """NVRTC rejected the source; the message is its log."""


class CudaUnavailable(CudaAbiError):
    """The kernel cannot run here: no CUDA device (it compiled), or no NVRTC / library."""


def library_path() -> Path:
    """Where libkforge_cuda.so is. Raises CudaUnavailable when it cannot be found."""
    if env := os.environ.get("KFORGE_CUDA_ABI"):
        return Path(env)
    for preset in ("release", "dev", "gpu"):
        for candidate in (
            _REPO / "build" / preset / "lib" / "libkforge_cuda.so",
            _REPO / "build" / preset / "libkforge_cuda.so",
        ):
            if candidate.exists():
                return candidate
    raise CudaUnavailable(
        ERROR_NVRTC_UNAVAILABLE,
        "libkforge_cuda.so not found: set KFORGE_CUDA_ABI (the server sets it when the library "
        "is built next to the kforge binary)",
    )


@cache
def load_library() -> ctypes.CDLL:
    """Loads and checks the library once per process. Raises CudaUnavailable."""
    path = library_path()
    try:
        lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    except OSError as e:
        raise CudaUnavailable(ERROR_NVRTC_UNAVAILABLE, f"cannot load {path}: {e}") from e
    lib.kforge_cuda_abi_version.restype = ctypes.c_int
    lib.kforge_cuda_kernel_create.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.kforge_cuda_kernel_create.restype = ctypes.c_int
    lib.kforge_cuda_kernel_info.argtypes = [ctypes.c_void_p]
    lib.kforge_cuda_kernel_info.restype = ctypes.c_char_p
    lib.kforge_cuda_kernel_launch.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint64),
        ctypes.c_size_t,
        ctypes.c_void_p,
    ]
    lib.kforge_cuda_kernel_launch.restype = ctypes.c_int
    lib.kforge_cuda_kernel_destroy.argtypes = [ctypes.c_void_p]
    lib.kforge_cuda_kernel_destroy.restype = None
    lib.kforge_cuda_last_error.restype = ctypes.c_char_p
    version = lib.kforge_cuda_abi_version()
    if version != ABI_VERSION:
        raise CudaUnavailable(
            ERROR_NVRTC_UNAVAILABLE, f"{path} has C ABI version {version}, expected {ABI_VERSION}"
        )
    return lib


def _error(lib: ctypes.CDLL, code: int) -> CudaAbiError:
    message = (lib.kforge_cuda_last_error() or b"").decode(errors="replace")
    if code == ERROR_COMPILE:
        return CudaCompileError(code, message)
    if code in (ERROR_NO_DEVICE, ERROR_NVRTC_UNAVAILABLE):
        return CudaUnavailable(code, message)
    return CudaAbiError(code, message)


def kernel_request(kernel: KernelSpec, cache_dir: str) -> dict[str, Any]:
    """The JSON request of kforge_cuda_kernel_create for a parsed kernel spec."""
    request: dict[str, Any] = {
        "source_code": kernel.source_code,
        "kernel_type": kernel.kernel_type,
        "metadata": kernel.metadata,
        "io": dataclasses.asdict(kernel.io) if kernel.io is not None else None,
    }
    if cache_dir:
        request["cache_dir"] = str(Path(cache_dir) / "cuda")
    return request


class CudaKernel:
    """A compiled and loaded `cuda` kernel, bound to the calling thread's CUDA context."""

    def __init__(self, kernel: KernelSpec, cache_dir: str) -> None:
        self._handle = ctypes.c_void_p()
        self._lib = load_library()
        handle = ctypes.c_void_p()
        body = json.dumps(kernel_request(kernel, cache_dir)).encode()
        code = self._lib.kforge_cuda_kernel_create(body, ctypes.byref(handle))
        if code != OK:
            raise _error(self._lib, code)
        self._handle = handle
        self.info: dict[str, Any] = json.loads(self._lib.kforge_cuda_kernel_info(handle))

    def launch(self, tensor_ptrs: list[int], stream: int) -> None:
        """Enqueues one launch (asynchronous). Raises CudaAbiError."""
        ptrs = (ctypes.c_uint64 * len(tensor_ptrs))(*tensor_ptrs)
        code = self._lib.kforge_cuda_kernel_launch(
            self._handle, ptrs, len(tensor_ptrs), ctypes.c_void_p(stream or None)
        )
        if code != OK:
            raise _error(self._lib, code)

    def close(self) -> None:
        if self._handle:
            self._lib.kforge_cuda_kernel_destroy(self._handle)
            self._handle = ctypes.c_void_p()

    def __del__(self) -> None:
        self.close()
