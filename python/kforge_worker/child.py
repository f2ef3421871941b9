"""A forked child: sandbox, warm-up, `ready`, one `job`, `result`, exit 0.

Runs in the process the zygote forked; everything it needs was imported by the zygote.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from typing import Any

from kforge_worker import PROTOCOL_VERSION, sandbox
from kforge_worker.devinfo import WorkerDevice, parse_device
from kforge_worker.evaluate import run_job
from kforge_worker.protocol import ProtocolError, StreamChannel
from kforge_worker.results import JobResult
from kforge_worker.spec import SpecError, parse_job
from kforge_worker.warmup import warm_child


def _protocol() -> dict[str, int]:
    return {"major": PROTOCOL_VERSION[0], "minor": PROTOCOL_VERSION[1]}


def _wait_for_job(channel: StreamChannel) -> dict[str, Any] | None:
    """The `job` object of the first `job` message; None if the supervisor hangs up."""
    while True:
        message = channel.recv()
        if message is None or message.get("type") == "shutdown":
            return None
        if message.get("type") == "job":
            job = message.get("job")
            return job if isinstance(job, dict) else {}


def _worker_failure(job_id: str, message: str) -> dict[str, Any]:
    result = JobResult()
    result.fail("worker", message)
    return {"type": "result", "job_id": job_id, "result": result.to_dict()}


def serve_one_job(channel: StreamChannel, device: WorkerDevice) -> None:
    """Receives one job, runs it, sends its result (with progress messages on the way)."""
    raw = _wait_for_job(channel)
    if raw is None:
        return
    job_id = str(raw.get("job_id", ""))
    try:
        job = parse_job(raw)
    except SpecError as e:
        channel.send(_worker_failure(job_id, f"bad job spec: {e}"))
        return
    try:
        wanted = parse_device(job.device or device.name)
    except ValueError as e:
        channel.send(_worker_failure(job_id, str(e)))
        return
    if wanted.kind != device.kind:
        channel.send(
            _worker_failure(job_id, f"job is for {job.device}, worker runs on {device.name}")
        )
        return
    if job.scratch_dir:
        os.makedirs(job.scratch_dir, exist_ok=True)
        os.chdir(job.scratch_dir)

    def progress(phase: str, message: str, partial: dict[str, Any]) -> None:
        channel.send({"type": "progress", "phase": phase, "message": message, "partial": partial})

    result = run_job(job, device, progress)
    _flush_std_streams()
    channel.send({"type": "result", "job_id": job.job_id, "result": result.to_dict()})


def child_main(fds: list[int], device: WorkerDevice, zygote_pid: int) -> int:
    """Entry point after fork; returns the exit code (the caller calls os._exit)."""
    start = time.perf_counter()
    report = sandbox.enter(fds, cpu_device=not device.is_cuda, zygote_pid=zygote_pid)
    channel = StreamChannel(socket.socket(fileno=report.protocol_fd))
    warm, described = warm_child(device)
    channel.send(
        {
            "type": "ready",
            "protocol": _protocol(),
            "pid": os.getpid(),
            "device": described,
            "warmup_ms": round((time.perf_counter() - start) * 1e3, 3),
            "warmup_steps_ms": warm.steps_ms,
            "warmup_errors": warm.errors,
            "sandbox": report.to_dict(),
        }
    )
    try:
        serve_one_job(channel, device)
    except (ProtocolError, OSError) as e:
        print(f"kforge_worker child: protocol failure: {e}", file=sys.stderr)
        _flush_std_streams()
        return 1
    return 0


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
