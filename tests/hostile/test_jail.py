"""Hostile kernels against the process sandbox (issue #8 cases 1-4, 6, 9, 10; docs/security.md).

Each case is a kernel an attacker would submit. It runs as a real job on a real `kforge serve`
(cpu device, as root on CI: the server jails every job). The kernel probes for one way out
and raises with what it found, so a contained attack answers `correctness: true` and an
escape fails the test with the evidence. Before the sandbox, every case here escaped.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostile.jail_probes import (
    assert_contained,
    compare,
    evaluate,
    host_processes_with,
    jailed_server,
    probe_kernel,
)
from integration.kforge_server import KforgeServer

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the jail needs a root server")


@pytest.fixture(scope="module")
def server() -> Iterator[KforgeServer]:
    with jailed_server() as srv:
        yield srv


def test_health_reports_the_jail(server: KforgeServer) -> None:
    with server.client() as c:
        sandbox = c.get("/health").json()["sandbox"]
    assert sandbox["jailing"] is True and sandbox["mode"] == "required"
    assert sandbox["cgroups"]["version"] in ("v2", "hybrid")
    assert "ptrace" in sandbox["seccomp"] and "setns" in sandbox["seccomp"]


def test_kernel_runs_unprivileged(server: KforgeServer) -> None:
    # Case 1: kernels ran as the server's user (root) with all its capabilities.
    res = assert_contained(
        evaluate(
            server,
            probe_kernel("""
            if os.getuid() == 0 or os.geteuid() == 0:
                found.append(f"uid={os.getuid()}")
            status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
            for key in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
                if int(status[key].strip(), 16) != 0:
                    found.append(f"{key}={status[key].strip()}")
            if status["NoNewPrivs"].strip() != "1":
                found.append("no_new_privs is off")
            if status["Seccomp"].strip() != "2":
                found.append("no seccomp filter")
            try:
                os.setuid(0)
                found.append("setuid(0) worked")
            except PermissionError:
                pass
            # A uid with no passwd entry still has a user name (torch.compile's inductor
            # calls getpass.getuser(), which raised KeyError in the jail).
            import getpass
            if getpass.getuser() != "kforge-job":
                found.append(f"user name {getpass.getuser()!r}")
            """),
        )
    )
    jail = res["worker"]["sandbox"]
    assert jail["candidate"]["jailed"] and jail["judge"]["jailed"]
    assert jail["candidate"]["uid"] != jail["judge"]["uid"]


def test_no_way_into_another_network_namespace(server: KforgeServer) -> None:
    # Case 2: with CAP_SYS_ADMIN a kernel setns()'d into the server's network namespace.
    port = server.port
    assert_contained(
        evaluate(
            server,
            probe_kernel(f"""
            libc = ctypes.CDLL(None, use_errno=True)
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            if pids != ["1"]:
                found.append(f"sees processes {{pids[:10]}}")
            for target in ("/proc/1/ns/net", "/proc/self/ns/net"):
                try:
                    fd = os.open(target, os.O_RDONLY)
                except OSError:
                    continue
                if libc.setns(fd, 0x40000000) == 0:
                    found.append(f"setns({{target}}) worked")
                os.close(fd)
            if libc.unshare(0x40000000) == 0:
                found.append("unshare(CLONE_NEWNET) worked")
            names = [n for _, n in socket.if_nameindex()]
            if names != ["lo"]:
                found.append(f"network interfaces {{names}}")
            s = socket.socket()
            s.settimeout(2)
            try:
                s.connect(("127.0.0.1", {port}))
                found.append("reached the server's port")
            except OSError:
                pass
            """),
        )
    )


def test_job_store_and_data_directory_are_out_of_reach(server: KforgeServer) -> None:
    # Case 4: sqlite3.connect("../../kforge.db") read and rewrote other jobs.
    data = str(server.data_dir)
    db = server.data_dir / "kforge.db"
    before = db.stat().st_size
    assert_contained(
        evaluate(
            server,
            probe_kernel(f"""
            import sqlite3
            for path in ("../../kforge.db", "../../../kforge.db", "{data}/kforge.db",
                         "/proc/1/root{data}/kforge.db", "/proc/self/root{data}/kforge.db"):
                try:
                    con = sqlite3.connect(f"file:{{path}}?mode=ro", uri=True)
                    con.execute("select count(*) from jobs").fetchone()
                    found.append(f"opened {{path}}")
                except sqlite3.Error:
                    pass
            try:
                listed = os.listdir("{data}")
                # Only what the jail binds back: its own scratch dir and the zygote's
                # read-only warm Triton cache.
                leaked = [n for n in listed if n not in ("scratch", "cache")]
                if "cache" in listed and os.listdir("{data}/cache") != ["triton"]:
                    found.append(f"sees caches {{os.listdir('{data}/cache')}}")
                if leaked:
                    found.append(f"lists the data dir: {{leaked}}")
                others = os.listdir("{data}/scratch")
                if len(others) > 1:
                    found.append(f"sees other jobs' scratch: {{others}}")
            except OSError:
                pass
            for d in sorted(os.listdir("/proc/self/fd")):
                try:
                    target = os.readlink(f"/proc/self/fd/{{d}}")
                except OSError:
                    continue
                if "kforge.db" in target:
                    found.append(f"inherited fd {{d}} -> {{target}}")
            """),
        )
    )
    assert db.stat().st_size >= before  # the store is intact and still ours
    with server.client() as c:
        assert c.get("/health").status_code == 200


def test_poison_pill_cannot_kill_the_server(server: KforgeServer) -> None:
    # Case 6: a kernel walked its parent chain and SIGKILLed `kforge serve` (then again on
    # every restart). Signals can only reach its own processes now.
    kernel = probe_kernel("""
    for target in [os.getppid(), 1, -1, *range(2, 400)]:
        try:
            os.kill(target, signal.SIGKILL if target not in (1,) else signal.SIGTERM)
        except OSError:
            pass
    """)
    out = evaluate(server, kernel)
    # It may kill itself (pid 1 of its namespace); it must not reach anything else.
    assert out["kernel_exec_result"]["error_kind"] in (None, "crash"), out
    assert server.proc is not None and server.proc.poll() is None
    assert_contained(evaluate(server, probe_kernel("pass")))


def test_no_secrets_or_server_processes_in_proc(tmp_path: Path) -> None:
    # Case 7 (the process side): the token was readable in /proc/<server>/cmdline and environ.
    token = "tok-" + uuid.uuid4().hex
    srv = KforgeServer(
        data_dir=tmp_path, devices="cpu", extra_args=["--token", token], token=token
    ).start()
    try:
        srv.wait_ready("cpu")
        assert_contained(
            evaluate(
                srv,
                probe_kernel(f"""
                for pid in os.listdir("/proc"):
                    if not pid.isdigit():
                        continue
                    for name in ("cmdline", "environ"):
                        try:
                            data = open(f"/proc/{{pid}}/{{name}}", "rb").read()
                        except OSError:
                            continue
                        if b"{token}" in data:
                            found.append(f"token in /proc/{{pid}}/{{name}}")
                for key, value in os.environ.items():
                    if "{token}" in value:
                        found.append(f"token in ${{key}}")
                """),
            )
        )
    finally:
        srv.stop()


def test_escaped_daemons_die_with_the_job(server: KforgeServer) -> None:
    # Case 3: a setsid or double-forked child outlived the job, outside the timeout kill and
    # the memory watcher, and copied the next job's source out of scratch/.
    marker = "kforge-escape-" + uuid.uuid4().hex
    kernel = probe_kernel(f"""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c",
                     "import time; time.sleep(600)", "{marker}"])
        os._exit(0)
    os.wait()
    """)
    assert_contained(evaluate(server, kernel))
    deadline = time.monotonic() + 10
    while host_processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_processes_with(marker) == [], "a daemon started by the job survived it"


def test_memory_of_detached_processes_counts_and_dies(tmp_path: Path) -> None:
    # Case 3 (memory): four detached children held 9.6 GB against a 3 GiB limit while the job
    # reported 338 MB. The job's cgroup now accounts for all of it, and kills it.
    srv = KforgeServer(data_dir=tmp_path, devices="cpu", extra_args=["--child-memory-mb", "1500"])
    srv.start()
    marker = "kforge-hog-" + uuid.uuid4().hex
    try:
        srv.wait_ready("cpu")
        kernel = probe_kernel(f"""
        hog = "b = bytearray(700 << 20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\n"
        hog += "import time; time.sleep(600)"
        for _ in range(4):
            if os.fork() == 0:
                os.setsid()
                os.execv(sys.executable, [sys.executable, "-c", hog, "{marker}"])
        time.sleep(3)
        """)
        out = evaluate(srv, kernel)
        res = out["kernel_exec_result"]
        # 4 x 700 MiB cannot fit in 1500 MiB: the cgroup's OOM killer acts on the job (the
        # whole job on cgroup v2; the hogs on v1), and nothing of it is left afterwards.
        assert res["process"]["peak_rss_bytes"] <= 1600 << 20, res["process"]
        deadline = time.monotonic() + 10
        while host_processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert host_processes_with(marker) == []
    finally:
        srv.stop()


def test_forked_children_are_not_charged_for_shared_pages(tmp_path: Path) -> None:
    # Case 10: idle forked children were killed for "3857 MiB" because pages shared
    # copy-on-write with the zygote counted once per process. A 1 GiB limit is far below what
    # summing the processes' RSS gives (judge + candidate, each with torch mapped).
    srv = KforgeServer(data_dir=tmp_path, devices="cpu", extra_args=["--child-memory-mb", "1024"])
    srv.start()
    try:
        srv.wait_ready("cpu")
        res = assert_contained(evaluate(srv, probe_kernel("pass")))
        assert 0 < res["process"]["peak_rss_bytes"] < 1024 << 20
    finally:
        srv.stop()


def test_fork_bomb_is_bounded(tmp_path: Path) -> None:
    # Case 9: no process-count limit as root, so a fork bomb ran until the job timeout.
    srv = KforgeServer(data_dir=tmp_path, devices="cpu", extra_args=["--job-pids-max", "128"])
    srv.start()
    try:
        srv.wait_ready("cpu")
        kernel = probe_kernel("""
        children = 0
        try:
            for _ in range(100000):
                pid = os.fork()
                if pid == 0:
                    time.sleep(60)
                    os._exit(0)
                children += 1
        except OSError as e:
            if e.errno != errno.EAGAIN:
                found.append(f"fork failed with {e}")
        if children >= 128:
            found.append(f"forked {children} processes")
        """)
        start = time.monotonic()
        assert_contained(evaluate(srv, kernel, timeout=60))
        assert time.monotonic() - start < 30
        with srv.client() as c:
            assert c.get("/health").status_code == 200
    finally:
        srv.stop()


def test_kernel_surface_is_filtered(server: KforgeServer) -> None:
    # The seccomp filter: what kernels never need fails, with EPERM (clone3: ENOSYS).
    assert_contained(
        evaluate(
            server,
            probe_kernel("""
            libc = ctypes.CDLL(None, use_errno=True)
            calls = {"unshare": (272, 0x10000000), "ptrace": (101, 16, 1, 0, 0),
                     "bpf": (321, 0, 0, 0), "io_uring_setup": (425, 1, 0),
                     "perf_event_open": (298, 0, 0, -1, -1, 0), "keyctl": (250, 0, 0),
                     "mount": (165, 0, 0, 0, 0, 0), "init_module": (175, 0, 0, 0),
                     "userfaultfd": (323, 0)}
            for name, (nr, *args) in calls.items():
                if libc.syscall(nr, *args) != -1 or ctypes.get_errno() != errno.EPERM:
                    found.append(f"{name} was not refused with EPERM ({ctypes.get_errno()})")
            if libc.syscall(435, 0, 0) != -1 or ctypes.get_errno() != errno.ENOSYS:
                found.append("clone3 was not ENOSYS")
            # clone with a namespace flag is refused; plain fork still works.
            if libc.syscall(56, 0x20000000 | 17, 0, 0, 0, 0) != -1:
                found.append("clone(CLONE_NEWPID) worked")
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            """),
        )
    )


def test_jobs_cannot_see_or_plant_into_each_other(server: KforgeServer) -> None:
    # Case 3 (scratch) and cross-job caches: an escaped daemon copied the next job's
    # candidate.py out of scratch/; a shared writable cache lets one job plant code another loads.
    marker = "kforge-plant-" + uuid.uuid4().hex
    plant = probe_kernel(f"""
    for d in (os.getcwd(), os.environ.get("HOME", ""), os.environ.get("TRITON_CACHE_DIR", ""),
              os.environ.get("TORCH_EXTENSIONS_DIR", ""), "/tmp", "/dev/shm"):
        if d:
            os.makedirs(d, exist_ok=True)
            open(os.path.join(d, "{marker}"), "w").write("planted")
    """)
    assert_contained(evaluate(server, plant))
    look = probe_kernel(f"""
    for root in ("/", os.path.dirname(os.getcwd())):
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
            dirnames[:] = [d for d in dirnames if d not in ("proc", "sys", "usr", "lib", "lib64")]
            if "{marker}" in filenames:
                found.append(f"found the other job's file in {{dirpath}}")
                break
    """)
    assert_contained(evaluate(server, look))


def test_killed_zygote_is_not_charged_to_the_kernel(tmp_path: Path) -> None:
    # Case 10: a zygote killed during a job was reported as the kernel's crash.
    srv = KforgeServer(data_dir=tmp_path, devices="cpu").start()
    try:
        stats = srv.wait_ready("cpu")
        zygote = next(d for d in stats["devices"] if d["name"] == "cpu")["workers"]["python"][
            "zygote_pid"
        ]
        slow = probe_kernel("time.sleep(5)")
        body = {"kernel": slow, "num_correct_trials": 1, "measure_performance": False}
        with srv.client() as c:
            job = c.post("/evaluate?wait=false", json=body).json()["job_id"]
            time.sleep(2.0)
            os.kill(zygote, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while True:
                rec = c.get(f"/job/{job}").json()
                if rec["status"] in ("success", "error", "failed", "completed"):
                    break
                assert time.monotonic() < deadline, rec
                time.sleep(0.2)
        text = str(rec)
        assert "not the kernel's fault" in text, rec
    finally:
        srv.stop()


def test_a_data_dir_below_a_locked_directory_serves_jailed_jobs() -> None:
    # A data directory below a 0700 directory (root's home: every default path of `kforge
    # bench` and `kforge mcp` when run as root) was refused at start, because jobs, running as
    # uids of their own, could not pass it. The jails reach what they use of the data
    # directory only through their minimal root's binds and tmpfs mounts, so it must serve
    # jailed jobs (judge and candidate) and still show them nothing of the locked directory.
    # Under /tmp the jail rebuilds the path in its own tmpfs, so the case needs another place.
    locked = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="kforge-locked-"))
    locked.chmod(0o700)
    (locked / "data").mkdir()
    srv = KforgeServer(
        data_dir=locked / "data", devices="cpu", extra_args=["--sandbox", "required"]
    ).start()
    try:
        srv.wait_ready("cpu")
        listing = f"""
        for path in ("{locked}", "{locked}/data", "{locked}/data/scratch"):
            try:
                found.append(f"listed {{path}}: {{os.listdir(path)}}")
            except OSError:
                pass
        """
        res = assert_contained(compare(srv, probe_kernel(listing), probe_kernel(listing)))
        jail = res["worker"]["sandbox"]
        assert jail["candidate"]["jailed"] and jail["judge"]["jailed"], jail
    finally:
        srv.stop()
        shutil.rmtree(locked, ignore_errors=True)
