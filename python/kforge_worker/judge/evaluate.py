"""The job pipeline, run by the judge: load, check correctness, time (docs/worker-protocol.md).

The judge never imports the candidate's code: the candidate is loaded, called and timed in
its own process through the link (link.py, candidate/server.py), and the verdict is computed here.
Phases report `progress` with the partial result, so the supervisor can say how far a job
got when a process dies. Failures of the kernel are results (error_kind + message); only a
bug in the worker itself gives error_kind "worker".
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import tempfile
import time
import traceback
from typing import Any

import torch

from kforge_worker.candidate import arena
from kforge_worker.candidate.binding import plan_invocation
from kforge_worker.candidate.build import SetupError
from kforge_worker.candidate.loaders import DeviceUnavailable, LoadError
from kforge_worker.core import devinfo
from kforge_worker.core.devinfo import WorkerDevice
from kforge_worker.core.inputs import InputError, InputSet, derive_seed
from kforge_worker.core.spec import JobSpec
from kforge_worker.judge.correctness import _RemoteCallError, report_exception, run_correctness
from kforge_worker.judge.device_grant import ExclusiveFn, no_grant
from kforge_worker.judge.judged import JudgeClock
from kforge_worker.judge.kernels import (
    JobKernels,
    ReferenceLoadError,
    kernel_spec_json,
    load_kernels,
)
from kforge_worker.judge.link import CandidateGone, CandidateLink, Failure
from kforge_worker.judge.reference_reuse import ReferenceCache
from kforge_worker.judge.reference_timing import (
    ProgressFn,
    ReferenceTimed,
    keep_reference_timing,
    time_reference,
    time_second_half,
)
from kforge_worker.judge.results import JobResult
from kforge_worker.judge.timed import TimingFailed, cpu_calls_per_trial, time_candidate
from kforge_worker.judge.timed_verdict import CandidateTiming
from kforge_worker.process import jailer
from kforge_worker.timing.activity import (
    NOT_ON_CPU,
    Flag,
    loop_flags,
    not_measured,
    profile_gpu,
    summarize,
    timing_flags,
)
from kforge_worker.timing.activity_wire import WireError, cross_check, pass_from_wire
from kforge_worker.timing.device_metrics import ReplayBundle, checked_run, collect
from kforge_worker.timing.stats import (
    EVENT_RESOLUTION_MS,
    SPEEDUP_SYSTEMATIC,
    SPEEDUP_SYSTEMATIC_MS,
    TimingStats,
    speedup_interval,
    speedup_verdict,
    without_window_overhead,
)
from kforge_worker.timing.timing import TimingReport, window_overhead_ms

EXCESSIVE_SPEEDUP = 10.0
MAX_ACTIVITY_ERROR_CHARS = 500
# Failed checks that withhold the speedup (_withhold_speedup).
NO_REWARD_CHECKS = ("launched_own_kernel",)


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
    if device.is_cuda:
        link.attach_clock()  # before any user code is loaded (judged.measure_null_gpu)
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
        report_exception(result, e.cause, str(e), heading=str(e))
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


def _time_both(
    job: JobSpec,
    tdev: torch.device,
    kernels: JobKernels,
    result: JobResult,
    report: ProgressFn,
    *,
    reuse: ReferenceCache,
) -> InputSet | None:
    """Times the reference (a compare) and the candidate (judged trials, timed.py); the
    input set the reference was timed on, or None when timing failed (the result says why)."""
    # Both processes give back their correctness calls' GB-sized leftovers first.
    kernels.candidate.link.trim()
    try:
        with result.phases.phase("inputs"):
            arena.release_cached(tdev)
            inputs = kernels.make_inputs(job.num_correct_trials)
    except Exception as e:
        result.fail("runtime", f"could not build the timing inputs: {e}")
        return None
    steps = _StepClock(result)
    # On the cpu both sides are timed a few calls per trial, each on its own inputs (timed.py).
    sets = cpu_calls_per_trial(kernels, inputs) if tdev.type != "cuda" else 1
    ref_timed: ReferenceTimed | None = None
    cpu = tdev.type != "cuda"
    if kernels.reference is not None:
        ref_timed = time_reference(
            job, tdev, kernels, inputs, result, report=report, reuse=reuse, sets=sets,
            measure=not cpu,
        )  # fmt: skip
        steps.mark("reference")
        if ref_timed is None:
            return None
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
        arena.release_cached(tdev)
    report("timing_candidate", "timing the kernel", result.to_dict())
    try:
        beside = cpu and ref_timed is not None and ref_timed.reused is None
        timed = time_candidate(kernels, job, tdev, result, sets=sets, time_reference=beside)
    except TimingFailed:
        return None
    except InputError as e:
        result.fail("runtime", f"could not build the timing inputs: {e}")
        return None
    steps.mark("candidate")
    if isinstance(timed, Failure):
        report_exception(
            result, _remote(timed.kind, timed.message), "the kernel raised while being timed"
        )
        return None
    if ref_timed is not None and ref_timed.second_half is not None:
        time_second_half(ref_timed, tdev, kernels, inputs, result)
        steps.mark("reference_after")
    if ref_timed is not None and timed.ref_stats is not None:
        result.ref_runtime_stats = timed.ref_stats
        result.ref_runtime = timed.ref_stats.median
        ref_timed.report = TimingReport(
            timed.ref_stats, list(timed.ref_warnings), samples=list(timed.ref_samples)
        )
    stats = timed.stats
    result.runtime_stats = stats
    result.runtime = stats.median
    result.metadata["timing_method"] = stats.method
    for warning in timed.run.warnings:
        result.warn(warning)
    if timed.launch_not_hidden:
        result.warn(timed.launch_not_hidden)
    cand_samples = list(timed.samples)
    ref_samples = ref_timed.samples() if ref_timed is not None else []
    if tdev.type == "cuda":
        # The candidate process profiled its own calls after the judged trials.
        report("kernel_activity", "profiling the timed windows", result.to_dict())
        _candidate_activity(result, timed, stats, kernels.candidate.triton_launches)
        cand_overhead, ref_overhead = _take_window_overhead(
            result, job, tdev, kernels.candidate.link.clock
        )
        cand_samples = _less(cand_samples, cand_overhead)
        ref_samples = _less(ref_samples, ref_overhead)
        steps.mark("window_overhead")
    if ref_timed is not None:
        keep_reference_timing(result, ref_timed, reuse)
    _speedup(result, ref_samples, cand_samples, seed=job.seed, device_kind=tdev.type)
    _withhold_speedup(result)
    return inputs


def _less(samples: list[float], overhead_ms: float) -> list[float]:
    """Trial times less the event window's own time, as the statistics (never below the
    events' resolution)."""
    return [max(EVENT_RESOLUTION_MS, s - overhead_ms) for s in samples]


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


def _remote(kind: str, text: str) -> Exception:
    return _RemoteCallError(kind, text)


def _candidate_activity(
    result: JobResult, timed: CandidateTiming, stats: TimingStats, triton_launches: int
) -> None:
    """The candidate's kernel activity: what its process reported, summarized and
    cross-checked here (activity.py); a disagreement is a flag and a failed honesty check."""
    extra: list[Flag] = []
    raw = timed.run.activity
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
    result.set_activity(activity, loop_flags(timed.launch_not_hidden, "") + activity.flags)
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


def _take_window_overhead(
    result: JobResult, job: JobSpec, device: torch.device, clock: JudgeClock | None
) -> tuple[float, float]:
    """The headline is the device's time for the call: the event window's own time comes off
    each side's statistics, as measured on that side's own path (docs/architecture.md "What
    the GPU time means"): the reference's from empty windows timed here
    (timing.window_overhead_ms), the candidate's from the empty trials its process claimed
    at warm-up, before any user code (its events follow a switch to its context, which the
    judge's never do: subtracting the judge's window from both made identical kernels of a
    few us read a few percent apart). (candidate's, reference's) overhead in ms."""
    overhead = window_overhead_ms(device, l2_flush=job.timing.l2_flush)
    own = clock.null_claim_ms if clock is not None else None
    cand_overhead = own if own is not None and math.isfinite(own) and own >= 0 else overhead
    if result.runtime_stats is not None:
        result.runtime_stats = without_window_overhead(result.runtime_stats, cand_overhead)
        result.runtime = result.runtime_stats.median
    if result.ref_runtime_stats is not None:
        result.ref_runtime_stats = without_window_overhead(result.ref_runtime_stats, overhead)
        result.ref_runtime = result.ref_runtime_stats.median
    return cand_overhead, overhead


def _withhold_speedup(result: JobResult) -> None:
    """No reward from a timing the judge's own clock contradicts, nor from timed windows in
    which the candidate launched no kernel of its own (an empty CUDA graph, work done on the
    host or before the window): the times stay, the speedup is null."""
    if any(c.name in NO_REWARD_CHECKS and not c.passed for c in result.checks):
        result.speedup = None


def _speedup(
    result: JobResult,
    ref_samples: list[float],
    cand_samples: list[float],
    *,
    seed: int = 0,
    device_kind: str = "cuda",
) -> None:
    """Speedup = reference median / candidate median, with its 95 % interval over both
    sides' trials and the verdict the interval gives (stats.speedup_interval)."""
    if result.ref_runtime_stats is None or result.runtime_stats is None:
        return
    cand_ms = result.runtime_stats.median
    if cand_ms <= 0 or result.ref_runtime_stats.median <= 0:
        return  # below the clock's resolution (timed.py said so in a warning)
    result.speedup = result.ref_runtime_stats.median / cand_ms
    interval = speedup_interval(
        ref_samples,
        cand_samples,
        seed=seed,
        systematic=SPEEDUP_SYSTEMATIC[device_kind],
        systematic_ms=SPEEDUP_SYSTEMATIC_MS[device_kind],
    )
    if interval is not None and math.isfinite(interval[1]):  # JSON has no infinity
        result.speedup_ci = [interval[0], interval[1]]
    result.speedup_verdict = speedup_verdict(interval)
    plausible = result.speedup <= EXCESSIVE_SPEEDUP
    message = ""
    if not plausible:
        message = (
            f"speedup {result.speedup:.1f}x over the reference exceeds {EXCESSIVE_SPEEDUP:.0f}x: "
            "check that the kernel does the full work (no cached results, no skipped elements)"
        )
        result.warn(message)
    result.add_check("speedup_plausible", plausible, message, fatal=False)
