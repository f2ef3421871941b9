"""A job's loaded kernels and where its inputs come from (docs/evaluation-protocol.md "Inputs").

Inputs are defined by the candidate's IOContract if it has one, else by the reference's
IOContract, else by get_inputs() (the reference's in a compare, the kernel's own in an
evaluate). torch models are built from get_init_inputs() (the reference's in a compare)
under one fixed seed, so the reference and the candidate start with identical weights.

On a GPU a torch model is built with the job's device as torch's default device, so its
parameters are drawn there (a KernelBench Gemm problem's CPU init takes 0.7-1.0 s; on the
device, milliseconds). Weights drawn on the device differ from a CPU draw of the same seed, so
both sides build in the same place: the judge tells the candidate process where it built the
reference; a model whose constructor raises there is built on the cpu instead (the side that
fell back says why), and when the candidate had to, the judge rebuilds the reference on the
cpu too. The result says where (metadata.model_device, and a warning after a fallback).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from kforge_worker.candidate import binding
from kforge_worker.candidate.binding import Invocation
from kforge_worker.candidate.build import (
    TORCH_TYPES,
    ModelOnDeviceError,
    SetupError,
    build_runnable,
    module_attr,
)
from kforge_worker.candidate.loaders import DeviceUnavailable, LoadError, Runnable, load_module
from kforge_worker.core.inputs import (
    BoundArg,
    InputError,
    InputSet,
    ProblemCalls,
    derive_seed,
    make_io_inputs,
    make_kernelbench_inputs,
    to_device,
)
from kforge_worker.core.phases import PhaseClock
from kforge_worker.core.spec import IOContract, JobSpec, KernelSpec
from kforge_worker.judge.link import CandidateLink


class ReferenceLoadError(LoadError):
    """The reference (not the candidate) failed to import or compile."""


@dataclass
class RemoteCandidate:
    """The candidate as the judge sees it: a kernel loaded in the candidate process."""

    link: CandidateLink
    kernel_type: str
    name: str
    passes_outputs: bool
    warnings: list[str]
    # Triton launches per correctness call as the candidate process counted them (the most
    # seen; -1: none counted), for the judge's cross-check of its kernel activity.
    triton_launches: int = -1
    # Its torch callable takes its IOContract as the kernel evaluation server passed it
    # (binding.takes_io_positionally, decided by the candidate process at its load).
    io_positional: bool = False


@dataclass
class JobKernels:
    candidate: RemoteCandidate
    reference: Runnable | None
    input_source: str  # "candidate_io" | "reference_io" | "get_inputs"
    defining_io: IOContract | None
    get_inputs: Callable[[], Any] | None  # None: the candidate process makes them
    candidate_spec: KernelSpec
    reference_spec: KernelSpec | None
    server_seed: int
    device: torch.device
    # get_inputs()/get_init_inputs() of the problem, on the device unless it fell back.
    problem_calls: ProblemCalls
    # Why the candidate process made its own get_inputs() on the cpu (an evaluate), if it did.
    candidate_inputs_fallback: str | None = None
    # Whether either side is a torch model; where their parameters were drawn (both sides
    # alike), and why on the cpu when the device was tried first and refused.
    has_models: bool = False
    model_on_device: bool = False
    model_fallback: str | None = None
    # The largest total of one call's outputs seen in the correctness trials, in bytes (the
    # timing phase sizes its device memory with it: evaluate._timing_set_count).
    output_bytes: int = 0
    # (shape, dtype) of each output of the first correctness call: the room the timing's
    # regions keep for outputs the candidate returns (timed.output_like).
    output_specs: list[tuple[tuple[int, ...], torch.dtype]] = field(default_factory=list)

    def note_outputs(self, values: Any) -> None:
        total = sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))
        self.output_bytes = max(self.output_bytes, total)
        if not self.output_specs and all(isinstance(v, torch.Tensor) for v in values):
            self.output_specs = [(tuple(v.shape), v.dtype) for v in values]

    @property
    def inputs_fallback(self) -> str | None:
        """Why the problem's inputs were made on the cpu instead of the device, if they were."""
        return self.problem_calls.fallback or self.candidate_inputs_fallback

    def make_inputs(self, trial: int) -> InputSet:
        """The pristine inputs of one trial (kernels get clones). Raises InputError."""
        if self.defining_io is not None:
            return make_io_inputs(self.defining_io, self.server_seed, trial, self.device)
        seed = derive_seed(self.server_seed, "trial", trial, "get_inputs")
        if self.get_inputs is not None:
            return make_kernelbench_inputs(
                self.get_inputs, self.server_seed, trial, self.device, self.problem_calls
            )
        values, failure, fallback = self.candidate.link.gen_inputs(seed)
        if fallback and self.candidate_inputs_fallback is None:
            self.candidate_inputs_fallback = fallback
        if failure is not None or values is None:
            raise InputError(failure.message if failure else "get_inputs() returned nothing")
        args = tuple(BoundArg(f"arg{i}", to_device(v, self.device)) for i, v in enumerate(values))
        return InputSet(args=args, from_io=False)

    def bind_candidate(self, inputs: InputSet) -> Invocation:
        return self._bind(
            self.candidate.passes_outputs,
            self.candidate_spec,
            inputs,
            "candidate_io",
            positional=self.candidate.io_positional,
        )

    def bind_reference(self, inputs: InputSet) -> Invocation:
        reference, spec = self.reference, self.reference_spec
        assert reference is not None and spec is not None
        if not reference.passes_outputs and self.input_source == "candidate_io":
            if spec.io is not None and binding.takes_io_positionally(
                reference.signature, spec.io, tensors_only=True
            ):
                # Its own IOContract's arguments, its input tensors the candidate's.
                foreign = binding.foreign_inputs(inputs, spec.io, self.device)
                return binding.bind_all_positional(foreign)
            return binding.bind_read_tensors(inputs)
        positional = binding.takes_io_positionally(reference.signature, spec.io, tensors_only=False)
        return self._bind(
            reference.passes_outputs, spec, inputs, "reference_io", positional=positional
        )

    def _bind(
        self,
        passes_outputs: bool,
        spec: KernelSpec,
        inputs: InputSet,
        own: str,
        *,
        positional: bool = False,
    ) -> Invocation:
        if not inputs.from_io:
            return binding.bind_positional(inputs)
        if not passes_outputs:
            if positional and self.input_source == own:
                return binding.bind_all_positional(inputs)
            return binding.bind_values(inputs)
        if self.input_source == own:
            return binding.bind_own(inputs)
        if spec.io is None:
            raise InputError(f"kernel_type {spec.kernel_type!r} needs an IOContract")
        return binding.bind_foreign(inputs, spec.io, self.device)


def _reference_error(e: LoadError) -> ReferenceLoadError:
    return ReferenceLoadError(f"reference kernel: {e}", f"reference kernel:\n{e.details}")


def kernel_spec_json(kernel: KernelSpec) -> dict[str, Any]:
    """The wire form of a parsed kernel spec (spec.parse_kernel reads it back)."""
    return {
        "source_code": kernel.source_code,
        "kernel_type": kernel.kernel_type,
        "metadata": kernel.metadata,
        "io": dataclasses.asdict(kernel.io) if kernel.io is not None else None,
    }


def load_kernels(
    job: JobSpec,
    device: torch.device,
    link: CandidateLink,
    *,
    candidate_dir: str,
    candidate_cache_dir: str,
    phases: PhaseClock | None = None,
) -> JobKernels:
    """Imports and builds the reference here and the candidate in its own process. Raises
    LoadError (compile stage; a reference failure says so in its message), SetupError,
    InputError or DeviceUnavailable. Time goes to `phases`: `import`, with get_init_inputs()
    in `inputs` and NVRTC builds (the reference's here, the candidate's as its process
    reports them) in `compile`."""
    phases = phases or PhaseClock()
    with phases.phase("import"):
        return _load_kernels(
            job,
            device,
            link,
            candidate_dir=candidate_dir,
            candidate_cache_dir=candidate_cache_dir,
            phases=phases,
        )


def _load_kernels(
    job: JobSpec,
    device: torch.device,
    link: CandidateLink,
    *,
    candidate_dir: str,
    candidate_cache_dir: str,
    phases: PhaseClock,
) -> JobKernels:
    scratch, cache = job.scratch_dir, job.cache_dir
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
        get_inputs = module_attr(ref_mod, "get_inputs")  # else the candidate's, remotely

    needs_models = job.kernel.kernel_type in TORCH_TYPES or (
        job.reference is not None and job.reference.kernel_type in TORCH_TYPES
    )
    init_seed = derive_seed(job.seed, "get_init_inputs")
    init_inputs: list[Any] | None = None
    calls = ProblemCalls(device)
    get_init = module_attr(ref_mod, "get_init_inputs")
    if get_init is not None and needs_models:
        try:
            with phases.phase("inputs"):
                values = calls.call(get_init, init_seed, "get_init_inputs()")
        except Exception as e:
            raise SetupError(f"get_init_inputs() raised {type(e).__name__}", e) from e
        if not isinstance(values, list | tuple):
            raise InputError(f"get_init_inputs() must return a list, got {type(values).__name__}")
        init_inputs = list(to_device(list(values), device))

    model_seed = derive_seed(job.seed, "model")
    model_on_device = device.type != "cpu"
    model_fallback: str | None = None
    reference = None

    def build_reference() -> Runnable | None:
        if job.reference is None or ref_mod is None:
            return None
        build = "compile" if job.reference.kernel_type == "cuda" else "import"
        try:
            with phases.phase(build):
                return build_runnable(
                    job.reference,
                    ref_mod,
                    init_inputs if init_inputs is not None else [],
                    model_seed,
                    prefer_new=False,
                    device=device,
                    cache_dir=cache,
                    init_seed=init_seed,
                    calls=calls,
                    model_on_device=model_on_device,
                )
        except LoadError as e:
            raise _reference_error(e) from e
        except ModelOnDeviceError:
            raise
        except SetupError as e:
            raise SetupError(f"reference kernel: {e}", e.cause) from e

    try:
        reference = build_reference()
    except ModelOnDeviceError as e:
        model_fallback, model_on_device = f"reference kernel: {e}", False
        reference = build_reference()

    loaded = link.load(
        kernel_spec_json(job.kernel),
        scratch_dir=candidate_dir,
        cache_dir=candidate_cache_dir,
        model_seed=model_seed,
        init_seed=init_seed,
        init_inputs=init_inputs,
        model_on_device=model_on_device,
    )
    if loaded.failure is None and model_on_device and not loaded.model_on_device:
        # The candidate's model could not be built on the device: the reference's weights
        # are drawn again on the cpu, where the candidate drew its own.
        model_fallback, model_on_device = f"candidate: {loaded.model_fallback}", False
        if job.reference is not None and job.reference.kernel_type in TORCH_TYPES:
            reference = build_reference()
    phases.credit("compile", loaded.compile_ms)
    if loaded.failure is not None:
        f = loaded.failure
        if f.kind == "compile":
            raise LoadError("the candidate failed to load", f.message)
        if f.kind == "device":
            raise DeviceUnavailable(f.message)
        # The candidate's text is a heading ("Model(*get_init_inputs()) raised KeyError:")
        # and the traceback: the heading becomes the error's message, said once.
        heading, _, details = f.message.partition("\n")
        raise SetupError(heading.rstrip(":"), RemoteError(details))
    candidate = RemoteCandidate(
        link,
        job.kernel.kernel_type,
        loaded.name,
        loaded.passes_outputs,
        loaded.warnings,
        io_positional=loaded.io_positional,
    )
    if source == "get_inputs" and get_inputs is None and not loaded.has_get_inputs:
        who = "the reference" if ref_mod is not None else "the kernel"
        raise LoadError(f"no IOContract and {who} defines no get_inputs()")
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
        problem_calls=calls,
        candidate_inputs_fallback=loaded.inputs_fallback,
        has_models=needs_models,
        model_on_device=model_on_device,
        model_fallback=model_fallback,
    )


class RemoteError(Exception):
    """An error the candidate process reported (its text is already formatted)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text
