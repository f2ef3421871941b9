"""A job's loaded kernels and where its inputs come from (REFERENCE.md §4).

Inputs are defined by the candidate's IOContract if it has one, else by the reference's
IOContract, else by get_inputs() (the reference's in a compare, the kernel's own in an
evaluate). torch models are built from get_init_inputs() (the reference's in a compare)
under one fixed seed, so the reference and the candidate start with identical weights.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from kforge_worker import binding
from kforge_worker.binding import Invocation
from kforge_worker.inputs import (
    InputError,
    InputSet,
    call_seeded,
    clone_value,
    derive_seed,
    make_io_inputs,
    make_kernelbench_inputs,
    to_device,
)
from kforge_worker.loaders import (
    LoadError,
    Runnable,
    cuda_runnable,
    entry_runnable,
    function_runnable,
    load_module,
    target_class,
    torch_runnable,
    torch_target,
)
from kforge_worker.spec import IOContract, JobSpec, KernelSpec

TORCH_TYPES = ("torch", "torch_cuda")


class ReferenceLoadError(LoadError):
    """The reference (not the candidate) failed to import or compile."""


class SetupError(Exception):
    """Loading succeeded but building the kernel failed (e.g. Model.__init__ raised)."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass
class JobKernels:
    candidate: Runnable
    reference: Runnable | None
    input_source: str  # "candidate_io" | "reference_io" | "get_inputs"
    defining_io: IOContract | None
    get_inputs: Callable[[], Any] | None
    candidate_spec: KernelSpec
    reference_spec: KernelSpec | None
    server_seed: int
    device: torch.device

    def make_inputs(self, trial: int) -> InputSet:
        """The pristine inputs of one trial (kernels get clones). Raises InputError."""
        if self.defining_io is not None:
            return make_io_inputs(self.defining_io, self.server_seed, trial, self.device)
        assert self.get_inputs is not None
        return make_kernelbench_inputs(self.get_inputs, self.server_seed, trial, self.device)

    def bind_candidate(self, inputs: InputSet) -> Invocation:
        return self._bind(self.candidate, self.candidate_spec, inputs, "candidate_io")

    def bind_reference(self, inputs: InputSet) -> Invocation:
        assert self.reference is not None and self.reference_spec is not None
        if not self.reference.passes_outputs and self.input_source == "candidate_io":
            return binding.bind_read_tensors(inputs)
        return self._bind(self.reference, self.reference_spec, inputs, "reference_io")

    def _bind(self, runnable: Runnable, spec: KernelSpec, inputs: InputSet, own: str) -> Invocation:
        if not inputs.from_io:
            return binding.bind_positional(inputs)
        if not runnable.passes_outputs:
            return binding.bind_values(inputs)
        if self.input_source == own:
            return binding.bind_own(inputs)
        if spec.io is None:
            raise InputError(f"kernel_type {spec.kernel_type!r} needs an IOContract")
        return binding.bind_foreign(inputs, spec.io, self.device)


def _reference_error(e: LoadError) -> ReferenceLoadError:
    return ReferenceLoadError(f"reference kernel: {e}", f"reference kernel:\n{e.details}")


def _module_attr(module: ModuleType | None, name: str) -> Callable[[], Any] | None:
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
) -> Runnable:
    target = torch_target(kernel)
    if target.function_name is not None:
        return function_runnable(kernel, module, target.function_name)
    cls = target_class(module, target, prefer_new)
    try:
        model = call_seeded(lambda: cls(*clone_value(init_inputs)), seed)
        if isinstance(model, torch.nn.Module):
            model = model.to(device)
    except Exception as e:
        raise SetupError(f"{cls.__name__}(*get_init_inputs()) raised {type(e).__name__}", e) from e
    return torch_runnable(kernel, module, model, target.method_name)


def load_kernels(job: JobSpec, device: torch.device) -> JobKernels:
    """Imports and builds the job's kernels. Raises LoadError (compile stage; a reference
    failure says so in its message), SetupError or InputError."""
    scratch, cache = job.scratch_dir, job.cache_dir
    cand_mod = load_module(job.kernel, "candidate", scratch, cache)
    ref_mod: ModuleType | None = None
    if job.reference is not None:
        try:
            ref_mod = load_module(job.reference, "reference", scratch, cache)
        except LoadError as e:
            raise _reference_error(e) from e

    defining_io: IOContract | None = None
    get_inputs: Callable[[], Any] | None = None
    if job.kernel.io is not None and job.kernel.io.args:
        source, defining_io = "candidate_io", job.kernel.io
    elif job.reference is not None and job.reference.io is not None and job.reference.io.args:
        source, defining_io = "reference_io", job.reference.io
    else:
        source = "get_inputs"
        get_inputs = _module_attr(ref_mod, "get_inputs") or _module_attr(cand_mod, "get_inputs")
        if get_inputs is None:
            who = "the reference" if ref_mod is not None else "the kernel"
            raise LoadError(f"no IOContract and {who} defines no get_inputs()")

    init_owner = ref_mod if ref_mod is not None else cand_mod
    get_init = _module_attr(init_owner, "get_init_inputs") or _module_attr(
        cand_mod, "get_init_inputs"
    )
    init_inputs: list[Any] = []
    needs_models = job.kernel.kernel_type in TORCH_TYPES or (
        job.reference is not None and job.reference.kernel_type in TORCH_TYPES
    )
    if get_init is not None and needs_models:
        try:
            values = call_seeded(get_init, derive_seed(job.seed, "get_init_inputs"))
        except Exception as e:
            raise SetupError(f"get_init_inputs() raised {type(e).__name__}", e) from e
        if not isinstance(values, list | tuple):
            raise InputError(f"get_init_inputs() must return a list, got {type(values).__name__}")
        init_inputs = list(to_device(list(values), device))

    model_seed = derive_seed(job.seed, "model")

    def build(kernel: KernelSpec, module: ModuleType, prefer_new: bool) -> Runnable:
        if kernel.kernel_type in TORCH_TYPES:
            return _build_model(
                kernel, module, init_inputs, model_seed, prefer_new=prefer_new, device=device
            )
        if kernel.kernel_type == "cuda":
            return cuda_runnable(kernel, module, cache, device)
        return entry_runnable(kernel, module)

    reference = None
    if job.reference is not None and ref_mod is not None:
        try:
            reference = build(job.reference, ref_mod, prefer_new=False)
        except LoadError as e:
            raise _reference_error(e) from e
        except SetupError as e:
            raise SetupError(f"reference kernel: {e}", e.cause) from e
    candidate = build(job.kernel, cand_mod, prefer_new=True)
    return JobKernels(
        candidate=candidate,
        reference=reference,
        input_source=source,
        defining_io=defining_io,
        get_inputs=get_inputs,
        candidate_spec=job.kernel,
        reference_spec=job.reference,
        server_seed=job.seed,
        device=device,
    )
