"""Hostile kernels against the jail's file system, sockets and compiler includes (issue 37,
"the jail"; docs/security.md "Process isolation").

A held-out hostile suite found these holes in the jail of test_jail.py: the host's root file
system was the jail's `/` (host files readable, `/var/tmp` and `/run/lock` writable and
persistent, host unix sockets reachable), every socket family could be created, and a `cuda`
source could `#include` a host file into its compile error (the end of a job:
test_jail_teardown.py). Each case below is a kernel (or a request) an attacker would send;
tests/hostile/README.md lists each with what it did before the fix.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostile.jail_probes import (
    compare,
    evaluate,
    health_sandbox,
    jailed_server,
    probe_both,
)
from integration.cuda_kernels import TORCH_ADD_REF, VECTOR_ADD, vector_add
from integration.kernels import torch_kernel
from integration.kforge_server import REPO, KforgeServer

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the jail needs a root server")


@pytest.fixture(scope="module")
def server() -> Iterator[KforgeServer]:
    with jailed_server() as srv:
        yield srv


# --- 1. the jail's root is minimal ---------------------------------------------------------


def test_health_reports_the_minimal_root(server: KforgeServer) -> None:
    root = health_sandbox(server)["root"]
    assert root["kind"] == "minimal", root
    read_only = root["read_only"]
    assert any(p.endswith("/kforge_worker") for p in read_only), read_only
    for forbidden in ("/", "/etc", "/home", "/root", "/var", "/run", str(REPO)):
        assert forbidden not in read_only, forbidden
    data = str(server.data_dir)
    assert not [p for p in read_only if p == data or p.startswith(data + "/")]
    assert set(root["writable"]) >= {"/tmp", "/dev/shm"}, root


def test_host_files_are_not_in_the_jail(server: KforgeServer) -> None:
    # The jail's / was the host's /: /etc/passwd, the checkout, the data directory's files
    # and other users' homes were readable by every kernel.
    data = server.data_dir
    files = [
        "/etc/passwd", "/etc/shadow", "/etc/group", "/etc/hostname", "/etc/machine-id",
        f"{REPO}/README.md", f"{REPO}/CMakeLists.txt", f"{REPO}/.git",
        f"{data}/kforge.db", f"{data}/server.log", "/root/.bashrc", "/root/.profile",
    ]  # fmt: skip
    dirs = ["/root", "/home", "/srv", "/opt", "/var", "/run", "/mnt", str(REPO)]
    probe_both(
        server,
        f"""
        for path in {files!r}:
            try:
                with open(path, "rb") as f:
                    found.append(f"read {{path}}: {{f.read(24)!r}}")
            except OSError as e:
                if e.errno not in (errno.ENOENT, errno.EACCES):
                    found.append(f"{{path}}: {{e}}")
        for path in {dirs!r}:
            try:
                found.append(f"listed {{path}}: {{sorted(os.listdir(path))[:8]}}")
            except OSError as e:
                if e.errno not in (errno.ENOENT, errno.EACCES):
                    found.append(f"{{path}}: {{e}}")
        # /etc holds only what a job needs: the loader's cache, two synthesized files and
        # the alternatives' links (/usr/bin/cc -> /etc/alternatives/cc).
        extra = set(os.listdir("/etc")) - {{"ld.so.cache", "hosts", "nsswitch.conf",
                                            "alternatives"}}
        if extra:
            found.append(f"/etc holds {{sorted(extra)[:12]}}")
        """,
    )


def test_what_jobs_need_still_works_in_the_minimal_root(server: KforgeServer) -> None:
    # Triton builds its launcher with cc and the Python headers, finds libcuda with ldconfig;
    # tools start the interpreter again; names resolve through the synthesized /etc/hosts.
    probe_both(
        server,
        """
        import ctypes, shutil, sysconfig, tempfile
        d = tempfile.mkdtemp()
        with open(d + "/p.c", "w") as f:
            f.write("#include <Python.h>\\nint probe(void) { return 42; }\\n")
        cc = shutil.which("gcc") or shutil.which("cc")
        include = sysconfig.get_paths()["include"]
        r = subprocess.run([cc, "-shared", "-fPIC", "-I", include, d + "/p.c", "-o", d + "/p.so"],
                           capture_output=True, text=True)
        if r.returncode != 0 or ctypes.CDLL(d + "/p.so").probe() != 42:
            found.append(f"{cc}: {r.stderr[-600:]}")
        r = subprocess.run([sys.executable, "-c", "import torch, triton"], capture_output=True,
                           text=True)
        if r.returncode != 0:
            found.append("a new interpreter cannot import torch: " + r.stderr[-600:])
        # ncu's replay: a new interpreter finds the worker package on PYTHONPATH (its parent,
        # a directory made on the way, must be listable; an H200 run read "No module named
        # kforge_worker").
        import kforge_worker
        package_parent = os.path.dirname(os.path.dirname(os.path.realpath(kforge_worker.__file__)))
        r = subprocess.run([sys.executable, "-m", "kforge_worker", "--help"], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=package_parent))
        if r.returncode != 0:
            found.append("a new interpreter cannot find kforge_worker: " + r.stderr[-600:])
        r = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True)
        if "libc.so.6" not in r.stdout:
            found.append("ldconfig -p: " + r.stderr[-300:])
        socket.getaddrinfo("localhost", 80)
        socket.gethostbyname(socket.gethostname())
        """,
    )


# --- 2. every writable place is private, bounded and gone with the job ------------------

WALK_WRITABLE = """
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
TMPFS = 0x01021994
def fs_type(path):
    buf = ctypes.create_string_buffer(256)
    return struct.unpack_from("l", buf)[0] if libc.statfs(path.encode(), buf) == 0 else -1
writable = []
deadline = time.monotonic() + 120
for dirpath, dirnames, _ in os.walk("/", onerror=lambda e: None):
    if dirpath == "/":
        dirnames[:] = [d for d in dirnames if d not in ("proc", "sys")]
    if time.monotonic() > deadline:
        found.append("the walk took longer than 120 s")
        break
    if not os.access(dirpath, os.W_OK):
        continue
    try:
        with open(os.path.join(dirpath, MARKER), "w") as f:
            f.write("left by job A")
    except OSError:
        continue
    writable.append(dirpath)
    if fs_type(dirpath) != TMPFS and not dirpath.startswith(SHARED_BY_DESIGN):
        found.append(f"{dirpath} is writable and not a private tmpfs")
"""


def test_writable_places_are_private_and_die_with_the_job(server: KforgeServer) -> None:
    # /var/tmp and /run/lock were writable in the jail, kept what a job wrote, and showed it
    # to the next job. Job A writes a marker wherever it can; job B must find none, and the
    # host must hold none after job A.
    marker = "kforge-left-" + uuid.uuid4().hex
    # The judges' batch reference results are shared on purpose (docs/security.md).
    shared = str(server.data_dir / "cache" / "reference")
    plant = WALK_WRITABLE.replace("MARKER", repr(marker)).replace("SHARED_BY_DESIGN", repr(shared))
    probe_both(server, plant + "\nif not writable:\n    found.append('nothing writable')\n")
    look = f"""
    for dirpath, dirnames, filenames in os.walk("/", onerror=lambda e: None):
        if dirpath == "/":
            dirnames[:] = [d for d in dirnames if d not in ("proc", "sys")]
        if {marker!r} in filenames:
            found.append(f"job A's file is in {{dirpath}}")
    """
    probe_both(server, look)
    left = []
    for top in ("/var/tmp", "/run/lock", "/run", "/tmp", "/dev/shm", str(server.data_dir)):
        for dirpath, _, filenames in os.walk(top):
            if marker in filenames:
                left.append(dirpath)
    assert left == [], f"job A's files outlived it on the host: {left}"


def test_writable_places_have_a_quota(tmp_path: Path) -> None:
    # No quota: a job left 3 GiB in /var/tmp. Every writable place is a tmpfs of
    # --job-tmp-mb, charged to the job's memory.
    srv = KforgeServer(data_dir=tmp_path, devices="cpu", extra_args=["--job-tmp-mb", "64"])
    srv.start()
    try:
        srv.wait_ready("cpu")
        fill = """
        chunk = b"x" * (1 << 20)
        for place in ("/tmp", "/dev/shm", os.getcwd()):
            written = 0
            try:
                with open(os.path.join(place, "fill"), "wb") as f:
                    for _ in range(256):
                        f.write(chunk)
                        f.flush()
                        written += 1
                found.append(f"wrote {written} MiB to {place}")
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    found.append(f"{place}: {e} after {written} MiB")
                elif written > 64:
                    found.append(f"{place} took {written} MiB")
            finally:
                try:
                    os.unlink(os.path.join(place, "fill"))
                except OSError:
                    pass
        """
        probe_both(srv, fill)
        assert health_sandbox(srv)["root"]["writable"]["/tmp"] == 64 << 20
    finally:
        srv.stop()


# --- 3. host unix sockets, 4. socket families --------------------------------------------


def test_host_unix_sockets_are_unreachable(server: KforgeServer) -> None:
    # /var/tmp/*.sock and /run/*.sock of the host were reachable (PostgreSQL's socket in
    # /run/postgresql would be too). Abstract sockets live in the network namespace.
    tag = uuid.uuid4().hex[:12]
    paths = [f"/run/kforge-hostile-{tag}.sock", f"/var/tmp/kforge-hostile-{tag}.sock"]
    abstract = f"kforge-hostile-{tag}"
    listeners = []
    try:
        for path in [*paths, "\0" + abstract]:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            if not path.startswith("\0"):
                os.chmod(path, 0o777)  # as PostgreSQL's socket is
            s.listen(8)
            listeners.append(s)
        probe_both(
            server,
            f"""
            targets = {paths!r} + ["\\0" + {abstract!r}, "/run/postgresql/.s.PGSQL.5432"]
            for path in targets:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(2)
                try:
                    s.connect(path)
                    found.append(f"connected to {{path!r}}")
                except OSError:
                    pass
                finally:
                    s.close()
            import stat
            for dirpath, dirnames, filenames in os.walk("/", onerror=lambda e: None):
                if dirpath == "/":
                    dirnames[:] = [d for d in dirnames if d not in ("proc", "sys")]
                for name in filenames:
                    try:
                        if stat.S_ISSOCK(os.lstat(os.path.join(dirpath, name)).st_mode):
                            found.append(f"a socket file: {{dirpath}}/{{name}}")
                    except OSError:
                        pass
            """,
        )
    finally:
        for s in listeners:
            s.close()
        for path in paths:
            Path(path).unlink(missing_ok=True)


def test_socket_families_are_limited(server: KforgeServer) -> None:
    # socket(AF_VSOCK) (and AF_ALG, ...) could be created: kernel code no job needs.
    assert "socket(AF_VSOCK)" in health_sandbox(server)["seccomp"]
    probe_both(
        server,
        """
        libc = ctypes.CDLL(None, use_errno=True)
        refused = {"AF_VSOCK": 40, "AF_PACKET": 17, "AF_BLUETOOTH": 31, "AF_ALG": 38,
                   "AF_KEY": 15, "AF_XDP": 44, "AF_CAN": 29, "AF_TIPC": 30, "AF_RDS": 21,
                   "AF_KCM": 41, "AF_QIPCRTR": 42, "AF_SMC": 43, "AF_NFC": 39, "AF_UNSPEC": 0}
        for name, family in refused.items():
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, 3):
                fd = libc.socket(family, kind, 0)
                if fd >= 0:
                    os.close(fd)
                    found.append(f"created {name} type {kind}")
                elif ctypes.get_errno() != errno.EAFNOSUPPORT:
                    found.append(f"{name}: errno {ctypes.get_errno()}, not EAFNOSUPPORT")
        # The family is an int: high bits set above AF_VSOCK must not slip past the filter.
        fd = libc.syscall(41, ctypes.c_long((1 << 32) | 40), 1, 0)
        if fd >= 0:
            found.append("created AF_VSOCK with high bits set")
        pair = (ctypes.c_int * 2)()
        if libc.socketpair(40, 1, 0, pair) == 0:
            found.append("socketpair(AF_VSOCK)")
        # What torch, Triton, CUDA and the jail itself use still works.
        for family, kind in ((socket.AF_UNIX, socket.SOCK_STREAM),
                             (socket.AF_INET, socket.SOCK_STREAM),
                             (socket.AF_INET6, socket.SOCK_DGRAM),
                             (socket.AF_NETLINK, socket.SOCK_RAW)):
            socket.socket(family, kind).close()
        for end in socket.socketpair():
            end.close()
        if [n for _, n in socket.if_nameindex()] != ["lo"]:
            found.append("if_nameindex broke")
        """,
    )


# --- 5. includes of host files in `cuda` sources -----------------------------------------

# (directive, the line of the source it is on)
HOSTILE_INCLUDES = [
    ('#include "/etc/passwd"', 2),
    ("#include </etc/passwd>", 2),
    ('#include "../../../../../../../../../../etc/passwd"', 2),
    ('#include "../kforge.db"', 2),
    ('#/**/include "/etc/passwd"', 2),
    ('#inc\\\nlude "/etc/passwd"', 2),
    ('%:include "/etc/passwd"', 2),
    ('#define HOST_FILE "/etc/passwd"\n#include HOST_FILE', 3),
    ('#if __has_include("/etc/shadow")\n#error the host has a shadow file\n#endif', 2),
]


@pytest.mark.parametrize(("directive", "line"), HOSTILE_INCLUDES)
def test_cuda_sources_cannot_include_host_files(
    server: KforgeServer, directive: str, line: int
) -> None:
    # An `#include "/etc/passwd"` compiled: NVRTC quoted the host file's lines in its error.
    source = "// a kernel\n" + directive + "\n" + VECTOR_ADD.replace("EXTRA", "")
    native = evaluate(server, vector_add(source=source))["kernel_exec_result"]
    mixed = compare(server, torch_kernel(TORCH_ADD_REF), vector_add(source=source))
    for res in (native, mixed["kernel_exec_result"]):
        assert res["compiled"] is False, res
        log = res["compilation_error"]
        assert "root:" not in log and "/bin/" not in log, log
        assert f"line {line}" in log and "include" in log, log


def test_cuda_headers_still_compile(server: KforgeServer) -> None:
    source = '#include <cuda_fp16.h>\n#include "cuda_runtime.h"\n' + VECTOR_ADD.replace("EXTRA", "")
    res = evaluate(server, vector_add(source=source))["kernel_exec_result"]
    assert res["compiled"] is True, res
