"""Hostile kernels against the end of a job (issue 37, "the jail", hole 6; docs/security.md
"Memory, processes and the job's end"): a fork bomb in the judge, and job cgroups left behind
by it or by a server that is gone. tests/hostile/README.md lists each with what it did before.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from hostile.jail_probes import compare, health_sandbox, probe_kernel
from integration.kforge_server import KforgeServer

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the jail needs a root server")


def job_cgroup_dirs(sandbox: dict[str, Any]) -> list[Path]:
    """The job cgroups under the server's tree (v2, or every hierarchy of a hybrid host)."""
    cgroups = sandbox["cgroups"]
    tops = [cgroups.get(k) for k in ("path", "pids_path", "unified_path")]
    return [d for top in tops if top for d in Path(top).iterdir() if d.is_dir()]


def processes_of_uids(uids: set[int]) -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uid_line = next((line for line in status.splitlines() if line.startswith("Uid:")), "")
        if uid_line and int(uid_line.split()[1]) in uids:
            pids.append(int(pid))
    return pids


def dying(pid: int) -> bool:
    """Gone, exiting (PF_EXITING, zombie) or with SIGKILL pending: it runs no more code."""
    try:
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        flags = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[6])
    except (OSError, ValueError, IndexError):
        return True
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    exiting = flags & 0x4 or status["State"].split()[0] in ("Z", "X")
    return bool(exiting or pending & (1 << (signal.SIGKILL - 1)))


def not_dying(pids: list[int], within_s: float = 3.0) -> list[int]:
    """Of `pids`, those never seen dying within `within_s`. A process that took its SIGKILL
    but has not set PF_EXITING yet (a short window in the kernel) shows as dying once it runs
    again; one that still runs user code never does."""
    left = [pid for pid in pids if not dying(pid)]
    deadline = time.monotonic() + within_s
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [pid for pid in left if not dying(pid)]
    return left


def empty_cgroups(dirs: list[Path]) -> list[Path]:
    """Job cgroups with no process: left behind (a warm child's cgroup always has one)."""
    out = []
    for d in dirs:
        try:
            if not (d / "cgroup.procs").read_text().split():
                out.append(d)
        except OSError:
            continue  # removed meanwhile
    return out


def test_fork_bomb_in_the_judge_is_gone_with_its_cgroup(tmp_path: Path) -> None:
    # A reference that fork-bombs: its processes outlived the answer by ~2 s and its cgroup
    # directories could stay behind. cgroup.kill goes out before the answer; the teardown
    # removes the directories once the kernel has reaped the processes.
    pids_max = os.environ.get("KFORGE_TEST_BOMB_PIDS", "256")  # 1024 (the default) takes longer
    # Job uids of its own: other servers on this host hand out the same default range.
    uid_base = str(1_000_000_000 + random.randrange(1_000_000) * 1000)
    srv = KforgeServer(
        data_dir=tmp_path,
        devices="cpu",
        extra_args=["--job-pids-max", pids_max, "--sandbox-uid-base", uid_base],
    )
    srv.start()
    try:
        srv.wait_ready("cpu")
        bomb = probe_kernel("""
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(120)
                    os._exit(0)
        except OSError:
            pass
        """)
        out = compare(srv, bomb, probe_kernel("pass"), timeout=120)
        answered = time.monotonic()
        jail = out["kernel_exec_result"]["worker"]["sandbox"]
        uids = {jail["judge"]["uid"], jail["candidate"]["uid"]}
        # cgroup.kill went out before the answer: what is still there is only being reaped.
        at_answer = processes_of_uids(uids)
        print(f"{len(at_answer)} job processes at the answer")
        running = not_dying(at_answer)
        assert running == [], f"job processes still run after the answer: {running}"
        sandbox = health_sandbox(srv)
        deadline = answered + 10
        while time.monotonic() < deadline:
            left = processes_of_uids(uids)
            stale = empty_cgroups(job_cgroup_dirs(sandbox))
            if not left and not stale:
                break
            time.sleep(0.05)
        gone_after = time.monotonic() - answered
        assert processes_of_uids(uids) == [], "the job's processes outlived it"
        assert empty_cgroups(job_cgroup_dirs(sandbox)) == [], "job cgroups were left behind"
        print(f"job processes and cgroups gone {gone_after:.2f} s after the answer")
    finally:
        srv.stop()
    tops = [sandbox["cgroups"].get(k) for k in ("path", "pids_path", "unified_path")]
    assert [t for t in tops if t and Path(t).exists()] == [], "the server's cgroup tree stayed"


def stale_instance_dirs() -> list[Path]:
    """Where a dead server would have left job cgroups, on this host's layout."""
    own = dict(line.split(":", 2)[1:] for line in Path("/proc/self/cgroup").read_text().split())
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():  # pure v2
        return [base / "kforge"]
    dirs = [base / "memory" / own.get("memory", "/").lstrip("/")]
    dirs.append(base / "pids" / own.get("pids", "/").lstrip("/"))
    if (base / "unified" / "cgroup.procs").exists():
        dirs.append(base / "unified" / own.get("", "/").lstrip("/"))
    return dirs


def test_stale_job_cgroups_are_swept_at_start(tmp_path: Path) -> None:
    # Job cgroups of a server that died (or of a pid reused by another program) stayed
    # forever. A starting server removes every kforge-<pid> tree whose pid is not a live kforge.
    made = []
    for parent in stale_instance_dirs():
        for instance in (f"kforge-{4_000_000 + os.getpid() % 100_000}", "kforge-1"):
            job = parent / instance / "py-cpu-7"
            job.mkdir(parents=True, exist_ok=True)
            made.append(job)
    srv = KforgeServer(data_dir=tmp_path, devices="cpu").start()
    try:
        srv.wait_ready("cpu")
        assert [m for m in made if m.exists()] == [], "stale job cgroups were not swept"
    finally:
        srv.stop()
        for m in made:
            for d in (m, m.parent):
                try:
                    d.rmdir()
                except OSError as e:
                    assert e.errno == errno.ENOENT
