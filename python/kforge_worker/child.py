"""A forked child: the judge of one job, and the candidate process it starts.

Runs in the process the zygote forked; everything it needs was imported by the zygote.
In order: basic isolation (its own session, death with the zygote, only its three
descriptors); the supervisor's `sandbox` message (the cgroup is attached by then); the
candidate process is started before CUDA is touched (candidate/server.py; jailed apart when the
message carries jails), and with it the `spares` the message asks for: candidate processes
jailed the same way that wait, warming nothing, for a later job of this judge; the judge
enters its own jail; the judge and the first candidate warm up; `ready`; one `job`;
`result`. Then, if the job said `keep_judge` and a spare is left, the job's candidate is
ended, `idle` says so, the next spare warms up and the judge says `ready` again for another
job (the supervisor sends it only a job of the same submitter and reference); otherwise
exit 0. A candidate never sees the protocol socket, the reference or the verdict, and each
serves one job.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from kforge_worker import PROTOCOL_VERSION
from kforge_worker.core.devinfo import WorkerDevice, parse_device
from kforge_worker.core.protocol import ProtocolError, StreamChannel, encode_frame
from kforge_worker.core.spec import SpecError, parse_job
from kforge_worker.judge.device_grant import ExclusiveGrant, no_grant
from kforge_worker.judge.evaluate import run_job
from kforge_worker.judge.link import CandidateGone, CandidateLink
from kforge_worker.judge.results import JobResult
from kforge_worker.process import jailer, sandbox
from kforge_worker.process.warmup import WarmupReport, warm_child


def _protocol() -> dict[str, int]:
    return {"major": PROTOCOL_VERSION[0], "minor": PROTOCOL_VERSION[1]}


def _wait_for(channel: StreamChannel, kind: str) -> dict[str, Any] | None:
    """The first message of `kind`; None if the supervisor hangs up or says shutdown."""
    while True:
        message = channel.recv()
        if message is None or message.get("type") == "shutdown":
            return None
        if message.get("type") == kind:
            return message


def _worker_failure(job_id: str, message: str) -> dict[str, Any]:
    result = JobResult()
    result.fail("worker", message)
    return {"type": "result", "job_id": job_id, "result": result.to_dict()}


class Plan:
    """What the `sandbox` message says for this child's two processes."""

    def __init__(self, message: dict[str, Any]) -> None:
        self.enabled = bool(message.get("enabled"))
        dirs = message.get("dirs") or {}
        self.judge_dir = str(dirs.get("judge") or os.getcwd())
        self.candidate_dir = str(dirs.get("candidate") or self.judge_dir)
        env = message.get("env") or {}
        self.judge_env = {str(k): str(v) for k, v in (env.get("judge") or {}).items()}
        self.candidate_env = {str(k): str(v) for k, v in (env.get("candidate") or {}).items()}
        caches = message.get("read_only_caches") or {}
        if caches.get("triton"):
            for role_env in (self.judge_env, self.candidate_env):
                role_env.setdefault("TRITON_KFORGE_READONLY_DIRS", str(caches["triton"]))
                role_env.setdefault(
                    "TRITON_CACHE_MANAGER", "kforge_worker.process.triton_cache:LayeredCacheManager"
                )
        self.judge_jail = message.get("judge") if self.enabled else None
        self.candidate_jail = message.get("candidate") if self.enabled else None
        caches = message.get("caches") or {}
        self.judge_cache = str(caches.get("judge") or "")
        self.candidate_cache = str(caches.get("candidate") or "")
        self.limits = message.get("limits") or {}
        self.why_not = str(message.get("why_not") or "")
        spares = message.get("spares")
        self.spares = min(max(spares, 0), MAX_SPARES) if isinstance(spares, int) else 0


# Spare candidate processes a judge may hold (each a forked process that waits, jailed).
MAX_SPARES = 31


def serve_one_job(
    channel: StreamChannel,
    device: WorkerDevice,
    link: CandidateLink,
    plan: Plan,
    on_keep: Callable[[], None] = lambda: None,
) -> bool:
    """Receives one job, runs it, sends its result (with progress messages on the way).
    True where the job asked the judge to stay for another (`keep_judge`) and it ran;
    `on_keep` is called then, before the job runs (it wakes the next spare)."""
    raw = _wait_for(channel, "job")
    if raw is None:
        return False
    spec = raw.get("job")
    spec = spec if isinstance(spec, dict) else {}
    job_id = str(spec.get("job_id", ""))
    keep = spec.pop("keep_judge", False) is True
    spec["scratch_dir"] = plan.judge_dir
    try:
        job = parse_job(spec)
    except SpecError as e:
        channel.send(_worker_failure(job_id, f"bad job spec: {e}"))
        return False
    try:
        wanted = parse_device(job.device or device.name)
    except ValueError as e:
        channel.send(_worker_failure(job_id, str(e)))
        return False
    if wanted.kind != device.kind:
        channel.send(
            _worker_failure(job_id, f"job is for {job.device}, worker runs on {device.name}")
        )
        return False

    if keep:
        on_keep()

    def progress(phase: str, message: str, partial: dict[str, Any]) -> None:
        channel.send({"type": "progress", "phase": phase, "message": message, "partial": partial})

    if plan.judge_cache:
        job = dataclasses.replace(job, cache_dir=plan.judge_cache)
    result = run_job(
        job,
        device,
        progress,
        link=link,
        candidate_dir=plan.candidate_dir,
        candidate_cache_dir=plan.candidate_cache or job.cache_dir,
        exclusive=ExclusiveGrant(channel).held if job.exclusive_timing else no_grant,
    )
    _flush_std_streams()
    channel.send({"type": "result", "job_id": job.job_id, "result": result.to_dict()})
    return keep


def child_main(fds: list[int], device: WorkerDevice, zygote_pid: int) -> int:
    """Entry point after fork; returns the exit code (the caller calls os._exit)."""
    start = time.perf_counter()
    basic = sandbox.enter(fds, cpu_device=not device.is_cuda, zygote_pid=zygote_pid)
    channel = StreamChannel(socket.socket(fileno=basic.protocol_fd))
    message = _wait_for(channel, "sandbox")
    if message is None:
        return 0
    plan = Plan(message)
    spares: list[tuple[socket.socket, int]] = []
    try:
        sock, pid = jailer.start_candidate(device, jail=plan.candidate_jail, env=plan.candidate_env)
        for _ in range(plan.spares):  # before CUDA is touched, as the first
            spares.append(
                jailer.start_candidate(
                    device, jail=plan.candidate_jail, env=plan.candidate_env, held=True
                )
            )
    except (jailer.JailError, OSError) as e:
        channel.send({"type": "sandbox_failed", "error": f"cannot start the candidate: {e}"})
        return 3
    link = CandidateLink(sock, pid, device.torch_device())
    os.environ.update(plan.judge_env)
    judge_report: dict[str, Any] = {"jailed": False, "why_not": plan.why_not}
    if plan.judge_jail is not None:
        try:
            judge_report = {"jailed": True, **jailer.enter(plan.judge_jail)}
        except jailer.JailError as e:
            channel.send({"type": "sandbox_failed", "error": f"judge: {e}"})
            link.close()
            return 3
    else:
        sandbox.apply_fallback(cpu_device=not device.is_cuda, report=basic)
    warm, described = warm_child(device)
    try:
        ready = link.wait_ready()
        if device.is_cuda:
            warm.run("judge_clock", link.attach_clock)
    except CandidateGone as e:
        channel.send({"type": "sandbox_failed", "error": str(e)})
        return 3
    sandbox_report = {**basic.to_dict(), "judge": judge_report}
    jobs = 0
    while True:
        channel.send(
            {
                "type": "ready",
                "protocol": _protocol(),
                "pid": os.getpid(),
                "device": described,
                "warmup_ms": round((time.perf_counter() - start) * 1e3, 3),
                "warmup_steps_ms": warm.steps_ms,
                "warmup_errors": warm.errors,
                "candidate": {
                    "warmup_ms": ready.get("warmup_ms"),
                    "warmup_steps_ms": ready.get("warmup_steps_ms"),
                    "warmup_errors": ready.get("warmup_errors"),
                },
                "sandbox": {**sandbox_report, "candidate": ready.get("sandbox") or {}},
                "jobs_done": jobs,
                "spares_left": len(spares),
                # The pid the supervisor kills when this job's candidate must end while the
                # judge stays (the judge's pid namespace is the supervisor's).
                "candidate_pid": link.pid,
                # The spare a kept job wakes at its start: it warms up during the job (the
                # supervisor stops it during timed regions, as any warming process).
                "next_candidate_pid": spares[0][1] if spares else None,
            }
        )

        def wake_next() -> None:
            if spares:
                spares[0][0].sendall(encode_frame({"type": "warm"}))

        try:
            keep = serve_one_job(channel, device, link, plan, wake_next) and bool(spares)
            if keep:
                # The supervisor has killed the job's candidate (its pid 1, and with it its
                # whole pid namespace: whatever it left running). It is not reaped before
                # that, so its pid cannot have been reused when the supervisor signals it.
                keep = _wait_for(channel, "candidate_ended") is not None
        except (ProtocolError, OSError) as e:
            print(f"kforge_worker child: protocol failure: {e}", file=sys.stderr)
            _flush_std_streams()
            link.close()
            return 1
        link.close()  # the job's candidate ends with its job, whatever comes next
        jobs += 1
        if not keep:
            return 0
        if not _release_device(device):
            print("kforge_worker child: the judge's device context failed", file=sys.stderr)
            return 1
        try:
            channel.send({"type": "idle"})
            start = time.perf_counter()
            warm = WarmupReport()
            link, ready = _next_candidate(spares, device, warm)
        except CandidateGone as e:
            channel.send({"type": "sandbox_failed", "error": str(e)})
            return 3
        except (ProtocolError, OSError) as e:
            print(f"kforge_worker child: protocol failure: {e}", file=sys.stderr)
            return 1


def _release_device(device: WorkerDevice) -> bool:
    """Gives back the device memory the judge's last job left cached (a judge waiting for
    its next job holds its context only, not the GBs its last job's tensors took: four
    such judges once filled an H200 while another job needed it); False where the judge's
    own device context failed (a sticky CUDA error would fail every later job of it)."""
    if not device.is_cuda:
        return True
    import gc

    import torch

    try:
        torch.cuda.synchronize(device.torch_device())
        gc.collect()
        torch.cuda.empty_cache()
    except Exception:
        return False
    return True


def _next_candidate(
    spares: list[tuple[socket.socket, int]], device: WorkerDevice, warm: WarmupReport
) -> tuple[CandidateLink, dict[str, Any]]:
    """The next spare (woken as the last job began): its warm-up's end, then the judge's
    clock attached to it (as for the first candidate, before it has loaded any user code)."""
    sock, pid = spares.pop(0)
    link = CandidateLink(sock, pid, device.torch_device())  # woken at the job's start
    ready = link.wait_ready()
    if device.is_cuda:
        warm.run("judge_clock", link.attach_clock)
    return link, ready


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def run_forked(fds: list[int], device: WorkerDevice, zygote_pid: int) -> None:
    """Runs the child and never returns (os._exit skips the zygote's atexit handlers)."""
    code = 70
    try:
        code = child_main(fds, device, zygote_pid)
    except BaseException:
        traceback.print_exc()
    finally:
        _flush_std_streams()
        os._exit(code)
