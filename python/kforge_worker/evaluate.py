"""The job pipeline, run by the judge: load, check correctness, time (docs/worker-protocol.md).

The judge never imports the candidate's code: the candidate is loaded, called and timed in
its own process through the link (link.py, candidate.py), and the verdict is computed here.
Phases report `progress` with the partial result, so the supervisor can say how far a job
got when a process dies. Failures of the kernel are results (error_kind + message); only a
bug in the worker itself gives error_kind "worker".
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import random
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kforge_worker import devinfo, jailer, wire
from kforge_worker.activity import (
    NOT_ON_CPU,
    Flag,
    WireError,
    cross_check,
    loop_flags,
    not_measured,
    pass_from_wire,
    profile_gpu,
    summarize,
    timing_flags,
)
from kforge_worker.binding import Invocation, collect_outputs, timing_rotation
from kforge_worker.compare import compare_tensors, resolve_tolerance
from kforge_worker.correctness import call_kernel, report_exception, run_correctness
from kforge_worker.device_grant import ExclusiveFn, no_grant
from kforge_worker.device_metrics import ReplayBundle, checked_run, collect
from kforge_worker.devinfo import WorkerDevice, is_device_oom, is_device_oom_text
from kforge_worker.inputs import InputError, InputSet, derive_seed
from kforge_worker.kernels import (
    JobKernels,
    ReferenceLoadError,
    SetupError,
    kernel_spec_json,
    load_kernels,
)
from kforge_worker.link import (
    CallReply,
    CandidateGone,
    CandidateLink,
    TimedReply,
    plan_invocation,
)
from kforge_worker.loaders import DeviceUnavailable, LoadError, Runnable
from kforge_worker.reference_reuse import ACTIVITY_FIELDS, ReferenceCache, ReferenceTiming
from kforge_worker.results import JobResult
from kforge_worker.spec import JobSpec
from kforge_worker.timing import (
    SPIN_FLOOR_US,
    TimingReport,
    TimingStats,
    TrialSample,
    compute_stats,
    spin_us_for,
    time_cpu,
    time_gpu,
    window_overhead_ms,
    without_window_overhead,
)

ProgressFn = Callable[[str, str, dict[str, Any]], None]
EXCESSIVE_SPEEDUP = 10.0
# Timed trials whose outputs the judge fetches and checks: the first, then each later one
# with this probability (decided after the trial ran), at most MAX_VERIFIED in all.
VERIFY_PROBABILITY = 0.1
MAX_VERIFIED = 5
# Input sets the candidate's timed trials rotate through (copied into the same buffers).
TIMING_INPUT_SETS = 2
# Free device memory the timing phase leaves beyond its own tensors (the processes' CUDA
# contexts, allocator rounding, the kernels' scratch): evaluate._timing_set_count.
TIMING_MEMORY_MARGIN_BYTES = 2 << 30
# The candidate's claimed median may sit below the judge's own wall-clock view of a trial
# (minus the judge's overhead for an empty trial) by this much before it is flagged.
WALL_ALLOWANCE_MS = 0.2
WALL_ALLOWANCE_FRACTION = 0.5
# The judge's empty trials copy an input set through a scratch buffer of at most this much.
MIRROR_CHUNK_BYTES = 1 << 30
# The spin a candidate claims (its stats.spin_us) is mirrored in the judge's empty trials up
# to this many times the spin its fastest correctness call's round trip would need (that
# round trip holds one host enqueue of the call, and more; the spin may have doubled once).
SPIN_TRUST_FACTOR = 2.0
MAX_ACTIVITY_ERROR_CHARS = 500
# Failed checks that withhold the speedup (_withhold_speedup).
NO_REWARD_CHECKS = ("timing_consistent_with_wall_clock", "launched_own_kernel")


def run_job(
    job: JobSpec,
    device: WorkerDevice,
    progress: ProgressFn | None = None,
    *,
    link: CandidateLink | None = None,
    candidate_dir: str = "",
    candidate_cache_dir: str = "",
    exclusive: ExclusiveFn = no_grant,
) -> JobResult:
    """Runs one job with this process as the judge (never raises for kernel faults). Without
    a `link`, an unjailed candidate process is started for the job and stopped after it.
    `exclusive`: entered around the timed regions (the exclusive device grant of pipelined
    stages, device_grant.py)."""
    if not job.scratch_dir:
        job = dataclasses.replace(job, scratch_dir=tempfile.mkdtemp(prefix="kforge-job-"))
    result = JobResult(metadata=_metadata(job, device))
    if not device.is_cuda:
        for reference in (False, True):
            result.set_activity(not_measured(NOT_ON_CPU), [], reference=reference)
    report = progress or (lambda phase, message, partial: None)
    own_link = link is None
    try:
        if link is None:
            link = start_local_candidate(device)
        cand_dir = candidate_dir or job.scratch_dir + "/candidate"
        cache = candidate_cache_dir or job.cache_dir
        reuse = ReferenceCache.open(job.reference_reuse if job.reference is not None else None)
        try:
            with torch.no_grad():
                _run(
                    job,
                    device,
                    result,
                    report,
                    link,
                    candidate_dir=cand_dir,
                    candidate_cache_dir=cache,
                    reuse=reuse,
                    exclusive=exclusive,
                )
        finally:
            result.reference_reuse = reuse.close()
    except CandidateGone as e:
        result.fail("crash", f"{e}")
    except Exception as e:
        result.fail("worker", f"internal worker error:\n{''.join(traceback.format_exception(e))}")
    finally:
        if own_link and link is not None:
            link.close()
    return result


def start_local_candidate(device: WorkerDevice) -> CandidateLink:
    """An unjailed candidate process for `run-job` and tests (a fresh interpreter where this
    process already holds a CUDA context)."""
    fresh = device.is_cuda and torch.cuda.is_initialized()
    sock, pid = jailer.start_candidate(device, jail=None, env={}, fresh_interpreter=fresh)
    link = CandidateLink(sock, pid, device.torch_device())
    link.wait_ready()
    return link


def _metadata(job: JobSpec, device: WorkerDevice) -> dict[str, Any]:
    v = devinfo.versions()
    meta: dict[str, Any] = {
        "device": job.device or device.name,
        "gpu_type": None,
        "gpu_id": device.physical_index if device.is_cuda else None,
        "cuda_version": torch.version.cuda if device.is_cuda else None,
        "torch_version": v["torch"],
        "triton_version": v["triton"],
        "python_version": v["python"],
        "kernel_type": job.kernel.kernel_type,
        "kernel_name": job.kernel.entry_point,
        "timing_method": None,
        "seed": job.seed,
        "inputs": [],
    }
    if device.is_cuda:
        meta["gpu_type"] = torch.cuda.get_device_name(device.local_index)
    if job.reference is not None:
        meta["ref_kernel_type"] = job.reference.kernel_type
    return meta


def _run(
    job: JobSpec,
    device: WorkerDevice,
    result: JobResult,
    report: ProgressFn,
    link: CandidateLink,
    *,
    candidate_dir: str,
    candidate_cache_dir: str,
    reuse: ReferenceCache,
    exclusive: ExclusiveFn,
) -> None:
    tdev = device.torch_device()
    report("loading", "importing the kernel source", result.to_dict())
    try:
        kernels = load_kernels(
            job,
            tdev,
            link,
            candidate_dir=candidate_dir,
            candidate_cache_dir=candidate_cache_dir,
            phases=result.phases,
        )
    except LoadError as e:
        result.compiled = isinstance(e, ReferenceLoadError)  # the candidate itself loaded
        result.fail("compile", e.details)
        return
    except SetupError as e:
        result.compiled = True
        report_exception(result, e.cause, str(e))
        return
    except (InputError, DeviceUnavailable) as e:
        result.compiled = True
        result.fail("runtime", str(e))
        return
    result.compiled = True
    result.metadata["kernel_name"] = kernels.candidate.name
    result.metadata["input_source"] = kernels.input_source
    for warning in kernels.candidate.warnings:
        result.warn(warning)
    reuse.bind_model_place(kernels.model_on_device)
    try:
        _check_and_time(job, tdev, kernels, result, report, reuse=reuse, exclusive=exclusive)
    finally:
        _note_inputs_device(result, kernels)
        _note_model_device(result, kernels)


def _job_device(result: JobResult, kernels: JobKernels) -> str:
    """The job's name for its device (`cuda:0` as the server named it)."""
    return result.metadata.get("device") or str(kernels.device)


def _note_model_device(result: JobResult, kernels: JobKernels) -> None:
    """Where torch models' parameters were drawn (kernels.py), and why on the cpu when the
    device refused a model's constructor."""
    if not kernels.has_models:
        return
    result.metadata["model_device"] = (
        _job_device(result, kernels) if kernels.model_on_device else "cpu"
    )
    if kernels.model_fallback:
        result.metadata["model_fallback"] = kernels.model_fallback
        result.warn(f"models built on the cpu: {kernels.model_fallback}")


def _note_inputs_device(result: JobResult, kernels: JobKernels) -> None:
    """Where a KernelBench problem's get_inputs() drew its tensors, and why on the cpu if it
    fell back there (module docstring of inputs.py)."""
    if kernels.input_source != "get_inputs":
        return
    fallback = kernels.inputs_fallback
    result.metadata["get_inputs_device"] = "cpu" if fallback else _job_device(result, kernels)
    if fallback:
        result.metadata["get_inputs_fallback"] = fallback
        result.warn(f"inputs made on the cpu: {fallback}")


def _check_and_time(
    job: JobSpec,
    tdev: torch.device,
    kernels: JobKernels,
    result: JobResult,
    report: ProgressFn,
    *,
    reuse: ReferenceCache,
    exclusive: ExclusiveFn = no_grant,
) -> None:
    report("correctness", f"{job.num_correct_trials} correctness trial(s)", result.to_dict())
    result.correctness = run_correctness(kernels, job, result, reuse)
    if not result.correctness or not job.measure_performance:
        return
    # Every timed region of the job (reference and candidate timing, the profiled passes,
    # device metrics) under one exclusive grant when pipelined; its GPU work is finished
    # before the grant goes back.
    with exclusive():
        try:
            with result.phases.phase("timing"):
                timed = _time_both(job, tdev, kernels, result, report, reuse=reuse)
            # The server asks for device metrics on GPUs only; the cpu device runs them in tests.
            if timed is not None and job.device_metrics is not None:
                report("device_metrics", "profiling under Nsight Compute", result.to_dict())
                _device_metrics(result, job, kernels, timed, tdev)
        finally:
            _settle(tdev)


def _settle(tdev: torch.device) -> None:
    """Waits for the judge's queued GPU work (the candidate process answers its timing only
    after its own). A broken context has nothing left to wait for."""
    if tdev.type == "cuda":
        with contextlib.suppress(RuntimeError):
            torch.cuda.synchronize(tdev)


def timing_device_bytes(sets: int, input_bytes: int, output_bytes: int) -> int:
    """Device memory the timing phase of a job holds at its peak, both processes together,
    with `sets` input sets of `input_bytes` and outputs of `output_bytes`. The judge: the
    sets, the reference's outputs on each, the reference's own timed copy, the sets again in
    its arena on their way, a verified trial's outputs received; the candidate process: its
    copy of the sets, one pristine copy, two calls' outputs (the last and the new one) and
    its arena sending the outputs back. While only 3 copies of the inputs were counted, 22 of
    KernelBench level 1's problems with inputs or outputs of 4-17 GB were left untimed on an
    80 GB H100 (their error text was not kept). Since then the reference's timed copy and the
    judge's arena are given back before the candidate is timed, so this counts more than is
    ever held at once; it stays until a GPU run shows a tighter count is safe (a kernel out of
    memory on two sets is timed again on one: _time_both)."""
    judge = (2 * sets + 1) * input_bytes + (sets + 1) * output_bytes
    candidate = (sets + 1) * input_bytes + 3 * output_bytes
    return judge + candidate


def _timing_set_count(
    first: InputSet, device: torch.device, result: JobResult, output_bytes: int = 0
) -> int:
    """TIMING_INPUT_SETS, or one set when the timing phase would not fit the GPU's free
    memory with that many (timing_device_bytes; `first` is already on the device). One set
    weakens a check (a kernel that caches its result by buffer is no longer fed different
    data), and the result says so."""
    if device.type != "cuda" or TIMING_INPUT_SETS == 1:
        return TIMING_INPUT_SETS
    nbytes = sum(
        a.value.numel() * a.value.element_size()
        for a in first.args
        if a.is_tensor and a.value.device.type == "cuda"
    )
    free, _ = torch.cuda.mem_get_info(device)
    free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    need = timing_device_bytes(TIMING_INPUT_SETS, nbytes, output_bytes) - nbytes
    if need + TIMING_MEMORY_MARGIN_BYTES <= free:
        return TIMING_INPUT_SETS
    result.metadata["timing_input_sets"] = 1
    result.warn(
        f"timed on one input set instead of {TIMING_INPUT_SETS}: with {nbytes / 1e9:.1f} GB "
        f"of inputs and {output_bytes / 1e9:.1f} GB of outputs they need about "
        f"{need / 1e9:.1f} GB more of the GPU's {free / 1e9:.1f} GB of free memory, so the "
        "timed trials do not rotate inputs (a kernel that caches its result by buffer is not "
        "caught there)"
    )
    return 1


def _time_both(
    job: JobSpec,
    tdev: torch.device,
    kernels: JobKernels,
    result: JobResult,
    report: ProgressFn,
    *,
    reuse: ReferenceCache,
) -> InputSet | None:
    """Times the reference (a compare) and the candidate; the input set they were timed on,
    or None when timing failed (the result says why)."""
    # Fresh input sets, not the checked ones, made once: the candidate's timed trials take
    # them in turn (copied into the same buffers), the reference is timed on the first.
    # Both processes give back their correctness calls' GB-sized leftovers first.
    kernels.candidate.link.trim()
    try:
        with result.phases.phase("inputs"):
            wire.release_cached(tdev)
            sets = [kernels.make_inputs(job.num_correct_trials)]
            count = _timing_set_count(sets[0], tdev, result, kernels.output_bytes)
            sets += [kernels.make_inputs(job.num_correct_trials + k) for k in range(1, count)]
    except Exception as e:
        result.fail("runtime", f"could not build the timing inputs: {e}")
        return None
    inputs = sets[0]
    steps = _StepClock(result)
    ref_timed: _ReferenceTimed | None = None
    if kernels.reference is not None:
        timed_ref = _reference_timing(job, tdev, kernels, sets, result, report=report, reuse=reuse)
        if timed_ref is _OUT_OF_MEMORY:
            _one_set(sets, tdev, result, "the reference")
            timed_ref = _reference_timing(
                job, tdev, kernels, sets, result, report=report, reuse=reuse
            )
        steps.mark("reference")
        if not isinstance(timed_ref, _ReferenceTimed):
            return None
        ref_timed = timed_ref
        if ref_timed.report is not None and tdev.type == "cuda":
            # The reference's profiled pass, after its timed trials and before the
            # candidate's (another process: no profiler runs in it); then the timed call
            # (and its copy of the inputs) goes, and the memory this process cached with
            # it, so the candidate's timing has the room.
            ref = ref_timed.report
            activity = profile_gpu(
                ref, tdev, l2_flush=job.timing.l2_flush, trace_dir=job.scratch_dir
            )
            result.set_activity(activity, timing_flags(ref, activity), reference=True)
            ref.call = None
            steps.mark("reference_profile")
        wire.release_cached(tdev)
    report("timing_candidate", "timing the kernel", result.to_dict())
    expected = ref_timed.expected if ref_timed is not None else None
    timed = _time_candidate(
        kernels, sets, expected, job, device=tdev, result=result, oom_retry=True
    )
    if timed is _OUT_OF_MEMORY:
        if len(sets) > 1:
            if ref_timed is not None:
                del ref_timed.expected[1:]
            _one_set(sets, tdev, result, "the kernel")
        else:
            # On one set already: once more after both processes gave back their caches (the
            # candidate process gave back its own before it answered).
            wire.release_cached(tdev)
            result.warn(
                "the kernel ran out of device memory while being timed; timed again after "
                "both processes gave back their cached device memory"
            )
        timed = _time_candidate(kernels, sets, expected, job, device=tdev, result=result)
    steps.mark("candidate")
    if not isinstance(timed, tuple):
        return None
    stats, reply = timed
    result.runtime_stats = stats
    result.runtime = stats.median
    result.metadata["timing_method"] = stats.method
    for warning in reply.warnings:
        result.warn(warning)
    if tdev.type == "cuda":
        # The candidate process profiled its own timed windows after its timed trials.
        report("kernel_activity", "profiling the timed windows", result.to_dict())
        _candidate_activity(result, reply, stats, kernels.candidate.triton_launches)
        _take_window_overhead(result, job, tdev)
        steps.mark("window_overhead")
    if ref_timed is not None:
        _keep_reference_timing(result, ref_timed, reuse)
    _speedup(result)
    _withhold_speedup(result)
    return inputs


def _one_set(sets: list[InputSet], tdev: torch.device, result: JobResult, who: str) -> None:
    """After `who` ran out of device memory while being timed on several input sets: the
    free-memory estimate (_timing_set_count) cannot see a kernel's own scratch (a
    convolution's workspace), so the timing goes on with the first set only."""
    del sets[1:]
    wire.release_cached(tdev)
    result.metadata["timing_input_sets"] = 1
    result.warn(
        f"timed on one input set: {who} ran out of device memory while being timed on "
        f"{TIMING_INPUT_SETS}, so the timed trials do not rotate inputs (a kernel that caches "
        "its result by buffer is not caught there)"
    )


class _StepClock:
    """The timing phase's steps, in ms, as `timing_steps_ms` in the result's metadata (where
    a job's timing goes: docs/benchmarks.md)."""

    def __init__(self, result: JobResult) -> None:
        self._steps: dict[str, float] = result.metadata.setdefault("timing_steps_ms", {})
        self._since = time.perf_counter()

    def mark(self, step: str) -> None:
        now = time.perf_counter()
        self._steps[step] = round((now - self._since) * 1e3, 3)
        self._since = now


@dataclass
class _ReferenceTimed:
    """What the reference's timing step leaves for the rest: its outputs on each timing input
    set (what the candidate's verified trials are compared with), and either its own timing
    report or the timing a batch's earlier job stored (`reused`)."""

    expected: list[list[torch.Tensor]]
    report: TimingReport | None = None
    reused: ReferenceTiming | None = None


def _reference_timing(
    job: JobSpec,
    tdev: torch.device,
    kernels: JobKernels,
    sets: list[InputSet],
    result: JobResult,
    *,
    report: ProgressFn,
    reuse: ReferenceCache,
) -> _ReferenceTimed | _OutOfMemory | None:
    """The reference of a compare on the timing input sets: its outputs and its timing, each
    taken from the batch's reuse file when it has them, else computed here. Sets
    ref_runtime(_stats); None when the reference failed (the result says why), or, out of
    device memory on several sets, _OUT_OF_MEMORY with the result as it was."""
    report("timing_reference", "timing the reference", result.to_dict())
    retry = len(sets) > 1
    expected = reuse.expected_for_timing(tdev)
    if expected is None:
        outputs = _reference_outputs(kernels, sets, tdev, result, oom_retry=retry)
        if not isinstance(outputs, list):
            return outputs
        expected = outputs
        reuse.keep_timing_outputs(expected)
    timed = _ReferenceTimed(expected, reused=reuse.reference_timing())
    if timed.reused is not None:
        result.ref_runtime_stats = TimingStats(**timed.reused.stats)
    else:
        ref_report = _time_local(
            kernels.reference,
            lambda: kernels.bind_reference(sets[0].clone()),
            job,
            tdev,
            result=result,
            oom_retry=retry,
        )
        if not isinstance(ref_report, TimingReport):
            return ref_report
        timed.report = ref_report
        result.ref_runtime_stats = ref_report.stats
    result.ref_runtime = result.ref_runtime_stats.median
    return timed


def _reference_outputs(
    kernels: JobKernels,
    sets: list[InputSet],
    tdev: torch.device,
    result: JobResult,
    *,
    oom_retry: bool = False,
) -> list[list[torch.Tensor]] | _OutOfMemory | None:
    """The reference's outputs on each timing input set; None when it raised (or, with
    `oom_retry`, _OUT_OF_MEMORY when it ran out of device memory, the result untouched)."""
    expected = []
    for one in sets:
        try:
            ref_inv = kernels.bind_reference(one.clone())
            with result.phases.phase("reference"):
                returned = call_kernel(kernels.reference, ref_inv, tdev)
            expected.append([v.detach().clone() for _, v in collect_outputs(ref_inv, returned)])
        except Exception as e:
            if oom_retry and is_device_oom(e):
                return _OUT_OF_MEMORY
            report_exception(result, e, "the reference kernel raised on the timing inputs")
            return None
    return expected


def _keep_reference_timing(
    result: JobResult, timed: _ReferenceTimed, reuse: ReferenceCache
) -> None:
    """After the candidate's timing: a reused reference's activity fields go into the result;
    a reference timed here is stored for the batch's next jobs, as measured (each job takes
    its own window overhead off)."""
    if timed.reused is not None:
        for name, value in timed.reused.activity.items():
            setattr(result, name, value)
    elif timed.report is not None:
        reuse.keep_timing(
            ReferenceTiming(
                stats=dataclasses.asdict(timed.report.stats),
                warnings=list(timed.report.warnings),
                activity={name: getattr(result, name) for name in ACTIVITY_FIELDS},
            )
        )


def _time_local(
    runnable: Runnable,
    bind: Callable[[], Any],
    job: JobSpec,
    device: torch.device,
    *,
    result: JobResult,
    oom_retry: bool = False,
) -> TimingReport | _OutOfMemory | None:
    """The reference timed in this process on the invocation `bind()` makes; None when it
    raised (or, with `oom_retry`, _OUT_OF_MEMORY when it ran out of device memory)."""
    try:
        inv = bind()

        def call() -> object:
            return runnable(inv.args, inv.kwargs)

        if device.type == "cuda":
            return time_gpu(call, job.timing, device)
        return time_cpu(call, job.timing)
    except Exception as e:
        if oom_retry and is_device_oom(e):
            return _OUT_OF_MEMORY
        report_exception(result, e, "the reference kernel raised while being timed")
        return None


class _OutOfMemory:
    """A timing step's answer when its kernel ran out of device memory and may be timed again
    (on one set, or after both processes gave back their caches): the result is untouched."""


_OUT_OF_MEMORY = _OutOfMemory()


def _time_candidate(
    kernels: JobKernels,
    sets: list[Any],
    expected: list[list[torch.Tensor]] | None,
    job: JobSpec,
    *,
    device: torch.device,
    result: JobResult,
    oom_retry: bool = False,
) -> tuple[TimingStats, TimedReply] | _OutOfMemory | None:
    """Times the candidate in its process, verifying some timed trials' outputs here. With
    `oom_retry`, out of device memory it returns _OUT_OF_MEMORY and leaves the result as it
    was (the caller times it again)."""
    rng = random.SystemRandom()
    verified: list[int] = []
    # Expected outputs per input set: the reference's, or (an evaluate) the kernel's own
    # first verified answer on that set.
    baselines: list[list[torch.Tensor] | None] = list(expected) if expected else [None] * len(sets)
    failures: list[str] = []

    def verify(index: int) -> bool:
        if len(verified) >= MAX_VERIFIED or failures:
            return False
        return index < len(sets) or rng.random() < VERIFY_PROBABILITY

    def check(index: int, reply: CallReply) -> bool:
        verified.append(index)
        which = index % len(sets)
        baseline = baselines[which]
        if reply.problems:
            name, problem = next(iter(reply.problems.items()))
            failures.append(f"timed trial {index + 1}: output '{name}' {problem}")
            return False
        got = [v.to(device) for _, v in reply.outputs]
        if baseline is None:  # an evaluate: later timed trials must agree with the first
            baselines[which] = got
            return True
        if len(got) != len(baseline):
            failures.append(f"timed trial {index + 1} produced {len(got)} outputs")
            return False
        for (name, g), want in zip(reply.outputs, baseline, strict=True):
            tol = resolve_tolerance(want.dtype, job.atol, job.rtol)
            c = compare_tensors(name, want, g.to(device), tol)
            if not c.passed:
                failures.append(f"timed trial {index + 1}, {c.describe()}")
                return False
        return True

    invs = [kernels.bind_candidate(one.shared()) for one in sets]
    timing = dataclasses.asdict(job.timing)
    reply: TimedReply = kernels.candidate.link.time(
        invs, timing, verify, check, activity=device.type == "cuda"
    )
    if failures:
        message = (
            "the kernel's outputs while it was being timed are wrong: "
            + failures[0]
            + " (a kernel must do the same work in every run, timed or not)"
        )
        result.add_check("timed_runs_verified", False, message)
        result.correctness = False
        result.fail("mismatch", message)
        return None
    if reply.failure is not None:
        if oom_retry and is_device_oom_text(reply.failure.message):
            return _OUT_OF_MEMORY
        report_exception(
            result,
            _remote(reply.failure.kind, reply.failure.message),
            "the kernel raised while being timed",
        )
        return None
    try:
        stats = TimingStats(**reply.stats)
    except TypeError as e:
        result.fail("worker", f"the candidate process sent malformed timing statistics: {e}")
        return None
    result.add_check("timed_runs_verified", True, f"{len(verified)} timed trial(s) checked")
    if reply.stream_skew:
        result.add_check("launch_stream_only", False, reply.stream_skew, fatal=False)
    elif stats.device_sync_median is not None:
        result.add_check("launch_stream_only", True)
    _wall_clock_check(
        stats,
        reply.trial_wall_ms,
        job=job,
        device=device,
        invs=invs,
        result=result,
        spin_us=_trusted_spin_us(stats, kernels.candidate.link.call_wall_ms),
    )
    return stats, reply


def _remote(kind: str, text: str) -> Exception:
    from kforge_worker.correctness import _RemoteCallError

    return _RemoteCallError(kind, text)


def _trusted_spin_us(stats: TimingStats, call_wall_ms: list[float]) -> float:
    """The candidate's claimed spin (µs), as far as the judge mirrors it in its empty trials:
    at most SPIN_TRUST_FACTOR times the spin its fastest correctness call's round trip (as
    the judge timed it) would need. A claim cannot buy more than that."""
    claimed = stats.spin_us if stats.spin_us is not None and stats.spin_us > 0 else 0.0
    fastest = min(call_wall_ms) if call_wall_ms else 0.0
    bound = SPIN_TRUST_FACTOR * (spin_us_for(fastest) if call_wall_ms else SPIN_FLOOR_US)
    return min(claimed, bound)


def _null_overhead_ms(
    job: JobSpec, device: torch.device, invs: list[Invocation], spin_us: float = 0.0
) -> float:
    """The judge's own median time for an empty trial of the same loop: the same refresh of
    the inputs (binding.timing_rotation: as many bytes copied as the candidate copies) and
    the same output poisoning the candidate does between trials, then flush, the spin
    `spin_us` (GPU), events and synchronisation, around no kernel at all; measured as the
    candidate's trials are, from the end of one trial to the end of the next."""
    opts = dataclasses.replace(
        job.timing, max_trials=20, min_trials=5, budget_ms=50.0, warmup_calls=1, warmup_ms=0.0
    )
    plan, live = plan_invocation(invs[0])
    restored, _ = timing_rotation(plan["slots"], live, len(invs))
    slots = [live] + [plan_invocation(inv)[1] for inv in invs[1:]]
    sources = [[values[i] for i in restored] for values in slots]
    poisoned = [a.value for a in invs[0].output_only if isinstance(a.value, torch.Tensor)]
    mirror = _CopyMirror()
    trial = [0]
    ends: list[int] = []

    def hook(_: int, sample: TrialSample | None) -> bool:
        if sample is None:
            for source in sources[trial[0] % len(sources)]:
                mirror.copy(source)
            trial[0] += 1
            for tensor in poisoned:
                tensor.fill_(0)
        else:
            ends.append(time.perf_counter_ns())
        return False

    if device.type == "cuda":
        time_gpu(lambda: None, opts, device, hook, spin_us=spin_us)
    else:
        time_cpu(lambda: None, opts, hook)
    cycles = [(b - a) / 1e6 for a, b in itertools.pairwise(ends)]
    return compute_stats(cycles, "judge_wall_clock").median if cycles else 0.0


class _CopyMirror:
    """Copies a tensor's bytes into a scratch buffer of at most MIRROR_CHUNK_BYTES, a chunk at
    a time: the memory traffic of the candidate's copy of an input set into its buffers,
    without a second copy of GB-sized inputs in the judge (a non-contiguous tensor gets a
    buffer of its own shape)."""

    def __init__(self) -> None:
        self._flat: torch.Tensor | None = None
        self._shaped: dict[int, torch.Tensor] = {}

    def copy(self, source: torch.Tensor) -> None:
        if not source.is_contiguous():
            key = id(source)
            if key not in self._shaped:
                self._shaped[key] = torch.empty_like(source)
            self._shaped[key].copy_(source)
            return
        flat = source.reshape(-1).view(torch.uint8)
        if flat.numel() == 0:
            return
        want = min(flat.numel(), MIRROR_CHUNK_BYTES)
        if self._flat is None or self._flat.numel() < want or self._flat.device != flat.device:
            self._flat = torch.empty(want, dtype=torch.uint8, device=flat.device)
        for chunk in flat.split(self._flat.numel()):
            self._flat[: chunk.numel()].copy_(chunk)


def _wall_clock_check(
    stats: TimingStats,
    walls: list[float],
    *,
    job: JobSpec,
    device: torch.device,
    invs: list[Invocation],
    result: JobResult,
    spin_us: float = 0.0,
) -> None:
    """The candidate's times are its own claims; the judge's clock bounds them from above.
    The fastest trial the judge saw is the bound: a loaded machine only adds to a trial's
    wall time (scheduling, message passing), so the minimum is the least disturbed view.
    On a GPU every trial holds the candidate's spin before its window; the judge's empty
    trials hold the same spin, as far as it trusts the claim (`_trusted_spin_us`)."""
    if len(walls) < 3:
        return
    wall = min(walls)
    null = _null_overhead_ms(job, device, invs, spin_us)
    floor = wall - null
    allowance = WALL_ALLOWANCE_MS + WALL_ALLOWANCE_FRACTION * max(floor, 0.0)
    result.metadata["judge_trial_wall_ms"] = round(wall, 6)
    result.metadata["judge_empty_trial_ms"] = round(null, 6)
    if stats.median + allowance < floor:
        message = (
            f"the kernel's process reported a median of {stats.median:.4g} ms per trial, but "
            f"each timed trial took {wall:.4g} ms as the judge saw it (at least "
            f"{floor:.4g} ms beyond an empty trial): its timing cannot be trusted"
        )
        result.add_check("timing_consistent_with_wall_clock", False, message, fatal=False)
        result.warn(message)
    else:
        result.add_check("timing_consistent_with_wall_clock", True)


def _candidate_activity(
    result: JobResult, reply: TimedReply, stats: TimingStats, triton_launches: int
) -> None:
    """The candidate's kernel activity: what its process reported, summarized and
    cross-checked here (activity.py); a disagreement is a flag and a failed honesty check."""
    extra: list[Flag] = []
    raw = reply.activity
    if raw is None:
        activity = not_measured("the candidate process sent no kernel activity")
    elif isinstance(raw, dict) and "error" in raw and "windows" not in raw:
        reason = str(raw.get("error"))[:MAX_ACTIVITY_ERROR_CHARS]
        activity = not_measured(f"the candidate process could not profile: {reason}")
    else:
        try:
            profiled = pass_from_wire(raw)
        except WireError as e:
            activity = not_measured(f"the candidate process sent malformed kernel activity: {e}")
            extra = [Flag("activity_malformed", activity.reason)]
        else:
            activity = summarize(
                profiled.windows, profiled.event_ms, stats.median, source=profiled.source
            )
            extra = cross_check(profiled, triton_launches)
            if not any(w.has_kernel for w in profiled.windows):
                message = (
                    "the kernel launched no kernel of its own in any profiled timed trial "
                    "(kernel activity): the work, if any, ran on the host or before the window"
                )
                result.add_check("launched_own_kernel", False, message, fatal=False)
    activity.flags = activity.flags + extra
    if extra:
        message = "; ".join(f"[{f.code}] {f.message}" for f in extra)
        result.add_check("kernel_activity_consistent", False, message, fatal=False)
        result.warn(f"kernel activity: {message}")
    elif activity.measured:
        result.add_check("kernel_activity_consistent", True)
    result.set_activity(
        activity, loop_flags(reply.launch_not_hidden, reply.stream_skew) + activity.flags
    )
    if not activity.measured:
        result.warn(f"kernel activity not measured: {activity.reason}")
    for flag in activity.flags:
        if flag not in extra:
            result.warn(f"kernel activity [{flag.code}]: {flag.message}")


def _device_metrics(
    result: JobResult, job: JobSpec, kernels: JobKernels, inputs: Any, device: torch.device
) -> None:
    """Nsight Compute over one call of each kernel on the timing inputs: the candidate's by
    its own process (a claim, size-checked here), the reference's by this one."""
    assert job.device_metrics is not None
    request = dataclasses.asdict(job.device_metrics)
    request["sections"] = list(job.device_metrics.sections)
    raw: dict[str, Any] = {}
    cand_inv = kernels.bind_candidate(inputs.shared())
    raw["candidate"] = checked_run(kernels.candidate.link.device_metrics(cand_inv, request))
    if kernels.reference is not None and job.reference is not None:
        plan, slots = plan_invocation(kernels.bind_reference(inputs.clone()))
        bundle = ReplayBundle(
            role="reference",
            kernel=kernel_spec_json(job.reference),
            cache_dir=job.cache_dir,
            model_seed=derive_seed(job.seed, "model"),
            init_seed=derive_seed(job.seed, "get_init_inputs"),
            prefer_new=False,
            init_inputs=None,
            plan=plan,
            slots=slots,
            device=device.type,
            model_on_device=kernels.model_on_device,
        )
        raw["reference"] = collect(job.device_metrics, bundle, job.scratch_dir)
    result.device_metrics_raw = raw


def _take_window_overhead(result: JobResult, job: JobSpec, device: torch.device) -> None:
    """The headline is the device's time for the call: the event window's own time, measured
    here on empty windows (timing.window_overhead_ms), comes off the candidate's and the
    reference's statistics alike (docs/architecture.md "What the GPU time means")."""
    overhead = window_overhead_ms(device, l2_flush=job.timing.l2_flush)
    if result.runtime_stats is not None:
        result.runtime_stats = without_window_overhead(result.runtime_stats, overhead)
        result.runtime = result.runtime_stats.median
    if result.ref_runtime_stats is not None:
        result.ref_runtime_stats = without_window_overhead(result.ref_runtime_stats, overhead)
        result.ref_runtime = result.ref_runtime_stats.median


def _withhold_speedup(result: JobResult) -> None:
    """No reward from a timing the judge's own clock contradicts, nor from timed windows in
    which the candidate launched no kernel of its own (an empty CUDA graph, work done on the
    host or before the window): the times stay, the speedup is null."""
    if any(c.name in NO_REWARD_CHECKS and not c.passed for c in result.checks):
        result.speedup = None


def _speedup(result: JobResult) -> None:
    if result.ref_runtime_stats is None or result.runtime_stats is None:
        return
    cand_ms = result.runtime_stats.median
    if cand_ms <= 0:
        return
    result.speedup = result.ref_runtime_stats.median / cand_ms
    plausible = result.speedup <= EXCESSIVE_SPEEDUP
    message = ""
    if not plausible:
        message = (
            f"speedup {result.speedup:.1f}x over the reference exceeds {EXCESSIVE_SPEEDUP:.0f}x: "
            "check that the kernel does the full work (no cached results, no skipped elements)"
        )
        result.warn(message)
    result.add_check("speedup_plausible", plausible, message, fatal=False)
