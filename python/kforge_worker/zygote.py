"""The zygote: imports torch and triton once, never touches CUDA, forks one child per job.

Control socket: fd 3, AF_UNIX SOCK_SEQPACKET (docs/worker-protocol.md "Zygote messages").
Children are reaped on SIGCHLD (through signal.set_wakeup_fd and a selector) and reported
with `exited`. The zygote exits on EOF or `shutdown`; its children die with it through
PR_SET_PDEATHSIG.
"""

from __future__ import annotations

import ctypes
import errno
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any

from kforge_worker import PROTOCOL_VERSION, WORKER_NAME, child
from kforge_worker.core import devinfo
from kforge_worker.core.devinfo import WorkerDevice
from kforge_worker.core.protocol import ProtocolError, recv_control, send_control
from kforge_worker.core.spec import PYTHON_KERNEL_TYPES
from kforge_worker.process import sandbox
from kforge_worker.process.warmup import warm_zygote

CONTROL_FD = 3


def _log(message: str) -> None:
    print(f"kforge_worker zygote[{os.getpid()}]: {message}", file=sys.stderr, flush=True)


def cuda_initialised() -> bool:
    """Whether the CUDA driver was initialised in this process (fork would then be unsafe).

    Only asks a libcuda that is already mapped: cuDeviceGetCount answers
    CUDA_ERROR_NOT_INITIALIZED (3) until cuInit ran, and initialises nothing itself.
    """
    try:
        with open("/proc/self/maps") as maps:
            if not any("libcuda.so" in line for line in maps):
                return False
        count = ctypes.c_int(0)
        return bool(ctypes.CDLL("libcuda.so.1").cuDeviceGetCount(ctypes.byref(count)) != 3)
    except (OSError, AttributeError):
        return False


class Zygote:
    def __init__(self, control: socket.socket, device: WorkerDevice) -> None:
        self._control = control
        self._device = device
        self._pid = os.getpid()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def serve(self) -> int:
        """Runs until EOF or `shutdown` on the control socket; returns the exit code."""
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        self._selector.register(self._control, selectors.EVENT_READ, "control")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "signal")
        self._reap()  # a child may have died before the handler existed
        while True:
            for key, _ in self._selector.select():
                if key.data == "signal":
                    self._drain_wakeup()
                    self._reap()
                elif not self._on_control():
                    self._reap()
                    return 0

    def _drain_wakeup(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _send(self, message: dict[str, Any]) -> None:
        try:
            send_control(self._control, message)
        except OSError as e:
            _log(f"cannot send {message.get('type')}: {e}")

    def _on_control(self) -> bool:
        """Handles one control message; False when the zygote should exit."""
        try:
            message, fds = recv_control(self._control)
        except ProtocolError as e:
            _log(f"ignoring a bad control message: {e}")
            return True
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EINTR):
                return True
            _log(f"control socket failed: {e}")
            return False
        if message is None:
            return False
        kind = message.get("type")
        if kind == "fork":
            self._fork(message, fds)
            return True
        for fd in fds:
            os.close(fd)
        return kind != "shutdown"

    def _fork(self, message: dict[str, Any], fds: list[int]) -> None:
        child_id = message.get("child_id")
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            self._send(
                {
                    "type": "fork_failed",
                    "child_id": child_id,
                    "error": f"expected 3 descriptors, got {len(fds)}",
                }
            )
            return
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        try:
            pid = os.fork()
        except OSError as e:
            for fd in fds:
                os.close(fd)
            self._send({"type": "fork_failed", "child_id": child_id, "error": str(e)})
            return
        if pid == 0:
            self._forget_in_child()
            child.run_forked(fds, self._device, self._pid)
        for fd in fds:
            os.close(fd)
        self._send({"type": "forked", "child_id": child_id, "pid": pid})

    def _forget_in_child(self) -> None:
        """Drops the zygote's own descriptors and handlers in a new child."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self._selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        os.close(self._control.detach())

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if os.WIFEXITED(status):
                code, sig = os.WEXITSTATUS(status), None
            elif os.WIFSIGNALED(status):
                code, sig = None, os.WTERMSIG(status)
            else:
                continue
            self._send({"type": "exited", "pid": pid, "exit_code": code, "signal": sig})


def share_with_jobs(cache_dir: str) -> str | None:
    """Makes what the warm-up wrote to Triton's cache readable by the jobs' uids: every
    child reads it as a read-only layer (process/triton_cache.py), but the server creates its files
    under umask 077, so a jailed process could read none of it and compiled the warm-up
    kernel and Triton's C modules again (0.8 s of each child's warm-up on an H100). The
    cache holds only what trusted code compiled before any job; jobs cannot write it.
    None, or why it could not."""
    if not cache_dir or not os.path.isdir(cache_dir):
        return None
    try:
        for root, _dirs, files in os.walk(cache_dir):
            os.chmod(root, os.stat(root).st_mode | 0o555)
            for name in files:
                path = os.path.join(root, name)
                os.chmod(path, os.stat(path).st_mode | 0o444)
    except OSError as e:
        return f"the zygote's Triton cache is not readable by jobs: {e}"
    return None


def main(device_text: str, arch: int | None, started: float) -> int:
    """`python -m kforge_worker zygote`: the environment is already prepared; `started` is
    the perf_counter() value when the process began importing."""
    device = devinfo.parse_device(device_text)
    sandbox.set_parent_death_signal()
    try:
        control = socket.socket(fileno=CONTROL_FD)
    except OSError as e:
        _log(f"fd {CONTROL_FD} is not the control socket: {e}")
        return 2
    if control.type != socket.SOCK_SEQPACKET:
        _log(f"fd {CONTROL_FD} must be an AF_UNIX SOCK_SEQPACKET socket")
        return 2
    control.set_inheritable(False)
    warm = warm_zygote(device, arch)
    warnings = [f"warm-up step {k} failed: {v}" for k, v in warm.errors.items()]
    if problem := share_with_jobs(os.environ.get("TRITON_CACHE_DIR", "")):
        warnings.append(problem)
    if cuda_initialised():
        warnings.append("CUDA was initialised in the zygote: children cannot use the GPU")
    hello = {
        "type": "hello",
        "protocol": {"major": PROTOCOL_VERSION[0], "minor": PROTOCOL_VERSION[1]},
        "worker": WORKER_NAME,
        "pid": os.getpid(),
        "device": device.name,
        "versions": devinfo.versions(),
        "kernel_types": list(PYTHON_KERNEL_TYPES),
        "startup_ms": round((time.perf_counter() - started) * 1e3, 3),
        "warmup_steps_ms": warm.steps_ms,
        "warnings": warnings,
    }
    try:
        send_control(control, hello)
    except OSError as e:
        _log(f"cannot send hello: {e}")
        return 1
    return Zygote(control, device).serve()
