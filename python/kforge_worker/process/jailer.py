"""Jailing this process, and starting the candidate process (docs/security.md).

The jail itself is C++ (src/kforge/sandbox/jail.cc), reached through libkforge_sandbox.so
(KFORGE_SANDBOX_LIB, set by the supervisor) so both workers jail with the same code.
`start_candidate` forks the candidate before the judge touches CUDA: with a jail, as pid 1 of
a new pid namespace (a clone wrapped in Python's fork hooks) that then enters its own jail;
without one, as a plain fork. Where the calling process has already initialised CUDA (a
test, `run-job` on a GPU), the candidate is a fresh interpreter instead (fork would copy a
CUDA context that cannot work in the child).
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from kforge_worker.core.devinfo import WorkerDevice
from kforge_worker.process import sandbox

_REPO = Path(__file__).resolve().parents[3]
CANDIDATE_FD = 990  # where the judge link lives in the candidate


class JailError(RuntimeError):
    """The jail could not be entered; the message names the failing step."""


def library_path() -> Path | None:
    if env := os.environ.get("KFORGE_SANDBOX_LIB"):
        return Path(env)
    for preset in ("release", "dev", "asan", "gpu"):
        for candidate in (
            _REPO / "build" / preset / "lib" / "libkforge_sandbox.so",
            _REPO / "build" / preset / "libkforge_sandbox.so",
        ):
            if candidate.exists():
                return candidate
    return None


@cache
def _lib() -> ctypes.CDLL:
    path = library_path()
    if path is None:
        raise JailError("libkforge_sandbox.so not found (KFORGE_SANDBOX_LIB is not set)")
    try:
        lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    except OSError as e:
        raise JailError(f"cannot load {path}: {e}") from e
    lib.kforge_sandbox_enter.argtypes = [ctypes.c_char_p]
    lib.kforge_sandbox_enter.restype = ctypes.c_int
    lib.kforge_sandbox_last_report.restype = ctypes.c_char_p
    lib.kforge_sandbox_last_error.restype = ctypes.c_char_p
    lib.kforge_sandbox_clone.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.kforge_sandbox_clone.restype = ctypes.c_int
    return lib


def enter(jail: dict[str, Any]) -> dict[str, Any]:
    """Enters the jail; returns its report. Raises JailError."""
    lib = _lib()
    if lib.kforge_sandbox_enter(json.dumps(jail).encode()) != 0:
        raise JailError((lib.kforge_sandbox_last_error() or b"").decode(errors="replace"))
    report = json.loads(lib.kforge_sandbox_last_report() or b"{}")
    return report if isinstance(report, dict) else {}


def fork_into_pid_namespace() -> int:
    """fork() into a new pid namespace (the child is its pid 1), with Python's fork hooks."""
    lib = _lib()
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = lib.kforge_sandbox_clone(1, 0, 0)
    if pid == 0:
        api.PyOS_AfterFork_Child()
    else:
        api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise JailError((lib.kforge_sandbox_last_error() or b"").decode(errors="replace"))
    return int(pid)


def start_candidate(
    device: WorkerDevice,
    *,
    jail: dict[str, Any] | None,
    env: dict[str, str],
    fresh_interpreter: bool = False,
    held: bool = False,
) -> tuple[socket.socket, int]:
    """Starts the candidate process; returns the judge's end of the link and its pid. A
    `held` one (a spare for the judge's next job) enters its jail and then waits for the
    judge's `warm` before it warms up: it has run nothing of a job until then."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if fresh_interpreter:
        child_env = {**os.environ, **env}
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kforge_worker",
                "candidate",
                "--device",
                device.name,
                "--fd",
                str(theirs.fileno()),
            ],
            pass_fds=[theirs.fileno()],
            env=child_env,
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        return ours, proc.pid
    pid = fork_into_pid_namespace() if jail is not None else os.fork()
    if pid == 0:
        code = 70
        try:
            ours.close()
            fd = os.dup2(theirs.fileno(), CANDIDATE_FD)
            theirs.close()
            sandbox.keep_only_fds([fd])
            os.environ.update(env)
            code = candidate_main(socket.socket(fileno=fd), device, jail, held=held)
        finally:
            os._exit(code)
    theirs.close()
    return ours, pid


def candidate_main(
    sock: socket.socket, device: WorkerDevice, jail: dict[str, Any] | None, held: bool = False
) -> int:
    """The candidate process: jail, (held: wait for `warm`), warm up, say `ready`, serve the
    judge."""
    import time

    from kforge_worker.candidate import server as candidate
    from kforge_worker.core.protocol import ProtocolError, StreamChannel
    from kforge_worker.process.warmup import warm_child

    start = time.perf_counter()
    channel = StreamChannel(sock)
    report: dict[str, Any] = {"jailed": False}
    if jail is not None:
        try:
            report = {"jailed": True, **enter(jail)}
        except JailError as e:
            channel.send({"type": "jail_failed", "error": str(e)})
            return 3
    else:
        fallback = sandbox.SandboxReport()
        fallback.parent_death_signal = sandbox.set_parent_death_signal()
        sandbox.apply_fallback(cpu_device=not device.is_cuda, report=fallback)
        report.update(fallback.to_dict())
    if held:
        try:
            message = channel.recv()
        except (ProtocolError, OSError):
            message = None
        if message is None or message.get("type") != "warm":
            return 0  # the judge ended without needing this spare
        start = time.perf_counter()
    warm, described = warm_child(device, role="candidate")
    channel.send(
        {
            "type": "ready",
            "pid": os.getpid(),
            "device": described,
            "warmup_ms": round((time.perf_counter() - start) * 1e3, 3),
            "warmup_steps_ms": warm.steps_ms,
            "warmup_errors": warm.errors,
            "sandbox": report,
        }
    )
    budget = int(os.environ.get("KFORGE_CANDIDATE_BUDGET_BYTES", str(64 << 30)))
    return candidate.serve(channel, device, budget)
