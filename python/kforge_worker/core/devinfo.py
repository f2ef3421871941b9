"""The device a worker runs on: parsing `--device`, descriptions, versions.

`--device cuda:N` names physical GPU N. When CUDA_VISIBLE_DEVICES is set (the supervisor
sets it to N), the child uses device 0 of what it sees; otherwise device N. Nothing here
initialises CUDA unless a function says so.
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch
import triton


@dataclass(frozen=True)
class WorkerDevice:
    kind: str  # "cpu" | "cuda"
    physical_index: int = 0  # N of cuda:N, as the supervisor names it

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def name(self) -> str:
        return f"cuda:{self.physical_index}" if self.is_cuda else "cpu"

    @property
    def local_index(self) -> int:
        """The CUDA ordinal inside this process."""
        return 0 if os.environ.get("CUDA_VISIBLE_DEVICES") else self.physical_index

    def torch_device(self) -> torch.device:
        return torch.device("cuda", self.local_index) if self.is_cuda else torch.device("cpu")


def parse_device(text: str) -> WorkerDevice:
    """`cpu`, `cuda` or `cuda:N`. Raises ValueError."""
    if text == "cpu":
        return WorkerDevice("cpu")
    if text == "cuda":
        return WorkerDevice("cuda", 0)
    if text.startswith("cuda:") and text[5:].isdigit():
        return WorkerDevice("cuda", int(text[5:]))
    raise ValueError(f"unknown device {text!r} (expected cpu or cuda:N)")


def versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "triton": str(triton.__version__),
    }


@cache
def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cuda_driver_version() -> str | None:
    """The driver's CUDA version (e.g. "13.0") via libcuda; None if unavailable."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return f"{version.value // 1000}.{(version.value % 1000) // 10}"


def describe(device: WorkerDevice) -> dict[str, Any]:
    """The `device` object of `ready`. On CUDA this initialises the context."""
    if not device.is_cuda:
        return {"kind": "cpu", "name": cpu_model_name(), "threads": torch.get_num_threads()}
    props = torch.cuda.get_device_properties(device.local_index)
    return {
        "kind": "cuda",
        "index": device.local_index,
        "physical_index": device.physical_index,
        "name": props.name,
        "uuid": _uuid(props),
        "capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "total_memory_bytes": int(props.total_memory),
        "l2_cache_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
        "cuda_version": torch.version.cuda,
        "driver_version": cuda_driver_version(),
        "runtime": "torch",
    }


def _uuid(props: Any) -> str | None:
    """The GPU's UUID as nvidia-smi writes it (GPU-xxxxxxxx-...), or None where torch has none:
    which physical GPU a job ran on, whatever CUDA_VISIBLE_DEVICES renumbered."""
    raw = getattr(props, "uuid", None)
    if raw is None:
        return None
    text = str(raw)
    return text if text.startswith("GPU-") else f"GPU-{text}"


def one_cpu_thread() -> None:
    """On the cpu device a job's processes run torch single-threaded, unless OMP_NUM_THREADS
    says otherwise: the judge, its echo and the candidate take turns on the machine, and an
    idle process's OpenMP threads spin-waiting beside the one being timed made a 2^16 add
    read 2-3 times slower in one process than in another (judged.py; the reference and the
    candidate are timed alike either way)."""
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def is_device_oom(e: BaseException) -> bool:
    """torch's out-of-device-memory error. In a jail without NVML, torch's caching allocator
    fails while writing its out-of-memory message (an INTERNAL ASSERT on nvmlInit, pytorch
    issue #122068) and raises a plain RuntimeError instead: that is the same condition."""
    if isinstance(e, torch.OutOfMemoryError):
        return True
    return isinstance(e, RuntimeError) and _nvml_oom(str(e))


def is_device_oom_text(text: str) -> bool:
    """Whether a traceback another process sent (the candidate's) is an out-of-device-memory
    error, as is_device_oom tells one raised here."""
    return "OutOfMemoryError" in text or "CUDA out of memory" in text or _nvml_oom(text)


def _nvml_oom(text: str) -> bool:
    return "nvmlInit" in text and "CUDACachingAllocator" in text
