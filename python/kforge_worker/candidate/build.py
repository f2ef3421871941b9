"""Builds a loaded kernel module into a Runnable: a torch model from get_init_inputs() under a
fixed seed (on the job's device, or the cpu where its constructor raises there), a `cuda`
kernel through the native C ABI, a Triton or Python entry point as it is. The judge builds
the reference with it, the candidate process the candidate, a replay (device_metrics.py) the
kernel it profiles.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from kforge_worker.candidate.loaders import (
    Runnable,
    cuda_runnable,
    entry_runnable,
    function_runnable,
    target_class,
    torch_runnable,
    torch_target,
)
from kforge_worker.core.inputs import ProblemCalls, call_seeded, clone_value, to_device
from kforge_worker.core.spec import KernelSpec

TORCH_TYPES = ("torch", "torch_cuda")


class SetupError(Exception):
    """Loading succeeded but building the kernel failed (e.g. Model.__init__ raised)."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


class ModelOnDeviceError(SetupError):
    """A torch model's constructor raised with the job's device as torch's default device
    (the caller builds it on the cpu instead)."""


def module_attr(module: ModuleType | None, name: str) -> Callable[[], Any] | None:
    value = getattr(module, name, None) if module is not None else None
    return value if callable(value) else None


def _build_model(
    kernel: KernelSpec,
    module: ModuleType,
    init_inputs: list[Any],
    seed: int,
    *,
    prefer_new: bool,
    device: torch.device,
    on_device: bool,
) -> Runnable:
    target = torch_target(kernel)
    if target.function_name is not None:
        return function_runnable(kernel, module, target.function_name)
    cls = target_class(module, target, prefer_new)
    what = f"{cls.__name__}(*get_init_inputs())"
    on_device = on_device and device.type != "cpu"
    try:
        with device if on_device else contextlib.nullcontext():
            model = call_seeded(lambda: cls(*clone_value(init_inputs)), seed)
    except Exception as e:
        if on_device:
            raise ModelOnDeviceError(
                f"{what} raised {type(e).__name__} with {device} as torch's default device "
                f"({str(e)[:200]}); the model is built on the cpu",
                e,
            ) from e
        raise SetupError(f"{what} raised {type(e).__name__}", e) from e
    try:
        if isinstance(model, torch.nn.Module):
            model = model.to(device)
    except Exception as e:
        raise SetupError(f"{what}.to({device}) raised {type(e).__name__}", e) from e
    return torch_runnable(kernel, module, model, target.method_name)


def build_runnable(
    kernel: KernelSpec,
    module: ModuleType,
    init_inputs: list[Any] | None,
    model_seed: int,
    *,
    prefer_new: bool,
    device: torch.device,
    cache_dir: str,
    init_seed: int | None = None,
    calls: ProblemCalls | None = None,
    model_on_device: bool = False,
) -> Runnable:
    """Builds a loaded module into a Runnable (in the judge for the reference, in the
    candidate process for the candidate). A torch model without `init_inputs` is built from
    its own module's get_init_inputs() under `init_seed` (through `calls`: on the device);
    with `model_on_device`, its constructor runs with the device as torch's default device.
    Raises LoadError, SetupError or ModelOnDeviceError (built on the device, it raised)."""
    if kernel.kernel_type in TORCH_TYPES:
        if init_inputs is None:
            init_inputs = []
            get_init = module_attr(module, "get_init_inputs")
            if get_init is not None:
                calls = calls or ProblemCalls(device)
                seed = init_seed if init_seed is not None else 0
                try:
                    values = calls.call(get_init, seed, "get_init_inputs()")
                except Exception as e:
                    raise SetupError(f"get_init_inputs() raised {type(e).__name__}", e) from e
                if not isinstance(values, list | tuple):
                    raise SetupError(
                        "get_init_inputs() must return a list",
                        TypeError(type(values).__name__),
                    )
                init_inputs = list(to_device(list(values), device))
        return _build_model(
            kernel,
            module,
            init_inputs,
            model_seed,
            prefer_new=prefer_new,
            device=device,
            on_device=model_on_device,
        )
    if kernel.kernel_type == "cuda":
        return cuda_runnable(kernel, module, cache_dir, device)
    return entry_runnable(kernel, module)
