"""A small fake supervisor: starts the real zygote and drives it over the real protocol.

The zygote gets the control socket as fd 3 (AF_UNIX SOCK_SEQPACKET); each child gets a
SOCK_STREAM protocol socket and stdout/stderr pipes, exactly as the C++ supervisor does.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kforge_worker.core.protocol import StreamChannel, recv_control, send_control

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60.0


class PipeReader:
    """Drains a pipe on a thread (a child printing megabytes must never block)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while chunk := os.read(self._fd, 1 << 16):
            self._chunks.append(chunk)
        os.close(self._fd)

    def data(self, wait_s: float = 10.0) -> bytes:
        """Everything written, once the writer closed its end."""
        self._thread.join(wait_s)
        return b"".join(self._chunks)


@dataclass
class Child:
    child_id: int
    pid: int
    channel: StreamChannel
    stdout: PipeReader
    stderr: PipeReader
    messages: list[dict[str, Any]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # perf_counter() of each message

    def recv(self) -> dict[str, Any] | None:
        message = self.channel.recv()
        if message is not None:
            self.messages.append(message)
            self.arrivals.append(time.perf_counter())
        return message

    def run_job(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """Sends the job; returns the `result` message, or None if the socket closed first."""
        self.channel.send({"type": "job", "job": job})
        while (message := self.recv()) is not None:
            if message["type"] == "result":
                return message
        return None


class FakeSupervisor:
    def __init__(
        self, device: str = "cpu", log_dir: Path | None = None, extra_args: tuple[str, ...] = ()
    ) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.settimeout(TIMEOUT_S)
        self.control = ours
        fd = theirs.fileno()
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        log = open(log_dir / "zygote.log", "wb") if log_dir else subprocess.DEVNULL  # noqa: SIM115
        # A trampoline puts the control socket on fd 3, then execs the zygote.
        trampoline = (
            "import os, sys; fd = int(sys.argv[1]); os.dup2(fd, 3); os.close(fd); "
            "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                trampoline,
                str(fd),
                "-m",
                "kforge_worker",
                "zygote",
                "--device",
                device,
                *extra_args,
            ],
            pass_fds=(fd,),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        theirs.close()
        self._pending: list[dict[str, Any]] = []
        self.hello = self.next_control("hello")

    def next_control(self, kind: str, **match: Any) -> dict[str, Any]:
        """The next control message of this type (others are kept for later)."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for i, message in enumerate(self._pending):
                if message.get("type") == kind and all(
                    message.get(k) == v for k, v in match.items()
                ):
                    return self._pending.pop(i)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {kind} message from the zygote")
            message, fds = recv_control(self.control)
            for extra in fds:
                os.close(extra)
            if message is None:
                raise EOFError("the zygote closed the control socket")
            self._pending.append(message)

    def fork(self, child_id: int) -> Child:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours.settimeout(TIMEOUT_S)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        send_control(
            self.control, {"type": "fork", "child_id": child_id}, [theirs.fileno(), out_w, err_w]
        )
        theirs.close()
        os.close(out_w)
        os.close(err_w)
        forked = self.next_control("forked", child_id=child_id)
        channel = StreamChannel(ours)
        # Protocol 2: the supervisor says how the child is jailed before anything else; this
        # fake never jails (the real supervisor's jails are tested on the real binary).
        scratch = Path(tempfile.mkdtemp(prefix=f"kforge-child{child_id}-"))
        channel.send(
            {
                "type": "sandbox",
                "enabled": False,
                "why_not": "fake supervisor",
                "dirs": {"judge": str(scratch / "judge"), "candidate": str(scratch / "candidate")},
            }
        )
        return Child(child_id, forked["pid"], channel, PipeReader(out_r), PipeReader(err_r))

    def ready_child(self, child_id: int) -> tuple[Child, dict[str, Any]]:
        child = self.fork(child_id)
        ready = child.recv()
        assert ready is not None and ready["type"] == "ready", child.stderr.data()
        return child, ready

    def exited(self, pid: int) -> dict[str, Any]:
        return self.next_control("exited", pid=pid)

    def close(self) -> int:
        with contextlib.suppress(OSError):
            send_control(self.control, {"type": "shutdown"})
        self.control.close()
        try:
            return self.process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
