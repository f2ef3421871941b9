"""The job pipeline: load, check correctness, time (docs/worker-protocol.md).

Phases report `progress` with the partial result, so the supervisor can say how far a job
got when the child dies. Failures of the kernel are results (error_kind + message); only a
bug in the worker itself gives error_kind "worker".
"""

from __future__ import annotations

import dataclasses
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

import torch

from kforge_worker import devinfo
from kforge_worker.activity import NOT_ON_CPU, not_measured, profile_gpu, timing_flags
from kforge_worker.binding import Invocation
from kforge_worker.correctness import report_exception, run_correctness
from kforge_worker.device_metrics import collect as collect_device_metrics
from kforge_worker.devinfo import WorkerDevice
from kforge_worker.inputs import InputError
from kforge_worker.kernels import ReferenceLoadError, SetupError, load_kernels
from kforge_worker.loaders import DeviceUnavailable, LoadError, Runnable
from kforge_worker.results import JobResult
from kforge_worker.spec import JobSpec
from kforge_worker.timing import TimingReport, time_cpu, time_gpu

ProgressFn = Callable[[str, str, dict[str, Any]], None]
EXCESSIVE_SPEEDUP = 10.0


def run_job(job: JobSpec, device: WorkerDevice, progress: ProgressFn | None = None) -> JobResult:
    """Runs one job in this process and returns its result (never raises for kernel faults)."""
    if not job.scratch_dir:
        job = dataclasses.replace(job, scratch_dir=tempfile.mkdtemp(prefix="kforge-job-"))
    result = JobResult(metadata=_metadata(job, device))
    if not device.is_cuda:
        for reference in (False, True):
            result.set_activity(not_measured(NOT_ON_CPU), [], reference=reference)
    report = progress or (lambda phase, message, partial: None)
    try:
        with torch.no_grad():
            _run(job, device, result, report)
    except Exception as e:
        result.fail("worker", f"internal worker error:\n{''.join(traceback.format_exception(e))}")
    return result


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


def _run(job: JobSpec, device: WorkerDevice, result: JobResult, report: ProgressFn) -> None:
    tdev = device.torch_device()
    report("loading", "importing the kernel source", result.to_dict())
    try:
        kernels = load_kernels(job, tdev)
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

    report("correctness", f"{job.num_correct_trials} correctness trial(s)", result.to_dict())
    result.correctness = run_correctness(kernels, job, result)
    if not result.correctness or not job.measure_performance:
        return

    timing_trial = job.num_correct_trials  # a fresh input set, not one of the checked ones
    try:
        inputs = kernels.make_inputs(timing_trial)
    except Exception as e:
        result.fail("runtime", f"could not build the timing inputs: {e}")
        return
    ref = None
    if kernels.reference is not None:
        report("timing_reference", "timing the reference", result.to_dict())
        ref_inv = kernels.bind_reference(inputs.clone())
        ref = _time(
            kernels.reference, ref_inv, job, tdev, result=result, who="the reference kernel"
        )
        if ref is None:
            return
        result.ref_runtime_stats = ref.stats
        result.ref_runtime = ref.stats.median
    report("timing_candidate", "timing the kernel", result.to_dict())
    cand_inv = kernels.bind_candidate(inputs.clone())
    cand = _time(kernels.candidate, cand_inv, job, tdev, result=result, who="the kernel")
    if cand is None:
        return
    result.runtime_stats = cand.stats
    result.runtime = cand.stats.median
    result.metadata["timing_method"] = cand.stats.method
    for warning in cand.warnings:
        result.warn(warning)
    if cand.stats.device_sync_median is not None:
        result.add_check("launch_stream_only", not cand.stream_skew, cand.stream_skew, fatal=False)
    if tdev.type == "cuda":
        report("kernel_activity", "profiling the timed window", result.to_dict())
        _record_activity(result, job, tdev, ref, cand)
        if job.device_metrics is not None:
            report("device_metrics", "profiling under Nsight Compute", result.to_dict())
            roles = ["candidate"] + (["reference"] if ref is not None else [])
            result.device_metrics_raw = collect_device_metrics(
                job.device_metrics, dataclasses.asdict(job), inputs, roles, job.scratch_dir
            )
    _speedup(result)


def _time(
    runnable: Runnable,
    inv: Invocation,
    job: JobSpec,
    device: torch.device,
    *,
    result: JobResult,
    who: str,
) -> TimingReport | None:
    def call() -> object:
        return runnable(inv.args, inv.kwargs)

    try:
        if device.type == "cuda":
            return time_gpu(call, job.timing, device)
        return time_cpu(call, job.timing)
    except Exception as e:
        report_exception(result, e, f"{who} raised while being timed")
        return None


def _record_activity(
    result: JobResult,
    job: JobSpec,
    device: torch.device,
    ref: TimingReport | None,
    cand: TimingReport,
) -> None:
    """Profiled passes (activity.py), after every timed trial so the profiler is not in them."""
    for timed, is_ref in ((ref, True), (cand, False)):
        if timed is None:
            continue
        activity = profile_gpu(
            timed, device, l2_flush=job.timing.l2_flush, trace_dir=job.scratch_dir or None
        )
        flags = timing_flags(timed, activity)
        result.set_activity(activity, flags, reference=is_ref)
        if not is_ref:
            if not activity.measured:
                result.warn(f"kernel activity not measured: {activity.reason}")
            for flag in activity.flags:
                result.warn(f"kernel activity [{flag.code}]: {flag.message}")


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
