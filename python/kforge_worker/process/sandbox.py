"""The first steps of a forked child (docs/worker-protocol.md "Isolation rules").

`enter`: a session of its own (setsid), death with the zygote (PR_SET_PDEATHSIG), stdin from
/dev/null and stdout/stderr to the supervisor's pipes, the protocol socket moved to a high
descriptor (close-on-exec) and every other inherited descriptor closed. The real isolation
— identity, namespaces, seccomp, cgroup — is the jail the supervisor sends (jailer.py); where
the server cannot jail (not privileged, or --sandbox off), `apply_fallback` applies what an
unprivileged process can: resource limits, and no network where the host allows it.

Fallback limits come from the environment; 0 leaves a limit as inherited:

| variable | limit | default |
|---|---|---|
| KFORGE_CHILD_AS_BYTES | RLIMIT_AS, cpu device only (CUDA reserves huge address space) | 32 GiB |
| KFORGE_CHILD_FSIZE_BYTES | RLIMIT_FSIZE (largest file the job may write) | 8 GiB |
| KFORGE_CHILD_NOFILE | RLIMIT_NOFILE | 4096 |
| KFORGE_CHILD_NPROC | RLIMIT_NPROC (per user, threads count too; never as root) | 0 (unset) |
| KFORGE_CHILD_UNSHARE_NET | 1: unshare(CLONE_NEWNET), best effort (`lo` up); 0: keep it | 1 |

RLIMIT_CORE is always 0. In a new network namespace `lo` is brought up, as the jail does, so a
tool that talks to a process it started over the loopback (a profiler and its target) works.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import signal
import socket
import struct
import sys
from dataclasses import dataclass, field
from typing import Any

PROTOCOL_FD = 1000  # where the protocol socket lives in the child (or lower, see below)
_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP_RUNNING = 0x1 | 0x40
_GIB = 1 << 30
_OLD_STREAMS: list[Any] = []
_DEFAULTS = {
    "KFORGE_CHILD_AS_BYTES": 32 * _GIB,
    "KFORGE_CHILD_FSIZE_BYTES": 8 * _GIB,
    "KFORGE_CHILD_NOFILE": 4096,
    "KFORGE_CHILD_NPROC": 0,
    "KFORGE_CHILD_UNSHARE_NET": 1,
}


@dataclass
class SandboxReport:
    protocol_fd: int = -1
    setsid: bool = False
    parent_death_signal: bool = False
    network_isolated: bool = False
    network_error: str = ""
    loopback_up: bool = False
    limits: dict[str, int] = field(default_factory=dict)
    limit_errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "setsid": self.setsid,
            "parent_death_signal": self.parent_death_signal,
            "network_isolated": self.network_isolated,
            "network_error": self.network_error,
            "loopback_up": self.loopback_up,
            "limits": self.limits,
            "limit_errors": self.limit_errors,
        }


def keep_only_fds(keep: list[int]) -> None:
    """Closes every descriptor above 2 except `keep`."""
    last = 3
    for fd in sorted(keep):
        if fd > last:
            os.closerange(last, fd)
        last = max(last, fd + 1)
    os.closerange(last, 65536)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """prctl(PR_SET_PDEATHSIG): the kernel sends `sig` when the parent dies."""
    try:
        return bool(_libc().prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def env_int(name: str) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw.strip() else _DEFAULTS[name]
    except ValueError:
        return _DEFAULTS[name]


def wire_descriptors(protocol_fd: int, stdout_fd: int, stderr_fd: int) -> int:
    """Installs the three received descriptors and closes all others; returns the protocol
    socket's new number. Works whatever numbers the inputs have (even 0-2)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(PROTOCOL_FD, max(soft - 4, 3))
    proto = fcntl.fcntl(protocol_fd, fcntl.F_DUPFD_CLOEXEC, target)
    out = fcntl.fcntl(stdout_fd, fcntl.F_DUPFD_CLOEXEC, 3)
    err = fcntl.fcntl(stderr_fd, fcntl.F_DUPFD_CLOEXEC, 3)
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.closerange(3, proto)
    os.closerange(proto + 1, max(soft, proto + 1, 65536))
    return proto


def rebind_std_streams() -> None:
    """New line-buffered sys.stdout/stderr on fds 1/2. The zygote's stream objects are kept
    referenced (never closed or reconfigured: they were made for other files, and a
    reconfigure may seek)."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        _OLD_STREAMS.append(getattr(sys, name))
        new = open(  # noqa: SIM115 - it lives on as sys.stdout/sys.stderr
            fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
        )
        setattr(sys, name, new)


def apply_limits(cpu_device: bool, report: SandboxReport) -> None:
    wanted: list[tuple[str, int, int]] = [
        ("core", resource.RLIMIT_CORE, 0),
        ("fsize", resource.RLIMIT_FSIZE, env_int("KFORGE_CHILD_FSIZE_BYTES")),
        ("nofile", resource.RLIMIT_NOFILE, env_int("KFORGE_CHILD_NOFILE")),
    ]
    if cpu_device:
        wanted.append(("as", resource.RLIMIT_AS, env_int("KFORGE_CHILD_AS_BYTES")))
    if os.geteuid() != 0:
        wanted.append(("nproc", resource.RLIMIT_NPROC, env_int("KFORGE_CHILD_NPROC")))
    for name, which, wanted_value in wanted:
        if wanted_value <= 0 and name != "core":
            continue
        try:
            _, hard = resource.getrlimit(which)
            value = wanted_value if hard == resource.RLIM_INFINITY else min(wanted_value, hard)
            resource.setrlimit(which, (value, value))
            report.limits[name] = value
        except (OSError, ValueError) as e:
            report.limit_errors.append(f"{name}: {e}")


def isolate_network(report: SandboxReport) -> None:
    """unshare(CLONE_NEWNET): an empty network namespace (needs CAP_SYS_ADMIN)."""
    if env_int("KFORGE_CHILD_UNSHARE_NET") == 0:
        report.network_error = "disabled by KFORGE_CHILD_UNSHARE_NET=0"
        return
    try:
        libc = _libc()
        if libc.unshare(_CLONE_NEWNET) == 0:
            report.network_isolated = True
            report.loopback_up = loopback_up()
        else:
            report.network_error = os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as e:
        report.network_error = str(e)


def loopback_up() -> bool:
    """Brings `lo` of this (new) network namespace up, as the jail does; False if it cannot."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("16sH14x", b"lo", 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP_RUNNING))
        return True
    except OSError:
        return False


def apply_fallback(cpu_device: bool, report: SandboxReport) -> None:
    """Resource limits and an empty network namespace, for an unjailed child."""
    apply_limits(cpu_device, report)
    isolate_network(report)


def enter(fds: list[int], cpu_device: bool, zygote_pid: int) -> SandboxReport:
    """The first isolation steps of the current (freshly forked) process."""
    report = SandboxReport()
    try:
        os.setsid()
        report.setsid = True
    except OSError:
        report.setsid = False
    report.parent_death_signal = set_parent_death_signal()
    if os.getppid() != zygote_pid:  # the zygote died before prctl took effect
        os._exit(1)
    report.protocol_fd = wire_descriptors(fds[0], fds[1], fds[2])
    rebind_std_streams()
    return report
