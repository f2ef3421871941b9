"""Three `kforge serve` nodes share one PostgreSQL queue; one is killed (SIGKILL) mid-batch.

A real PostgreSQL server from Debian's package is started by the test (initdb/pg_ctl, as an
unprivileged user, in a temp dir). Checked: every accepted job completes exactly once (the
store's run history: one successful run per job, the dead node's run ended by its lease), no
job is lost, results are readable from every surviving node, and a wait on one node is
answered by a completion on another.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from integration.kernels import model_source, torch_kernel
from integration.kforge_server import KforgeServer, kforge_binary
from integration.mcp_support import RawMcp

TERMINAL = {"success", "failed", "cancelled"}
LEASE_S = 3


def pg_bin_dir() -> Path | None:
    """Debian's PostgreSQL server binaries (the newest version installed), or None."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(d, "initdb").exists() and Path(d, "pg_ctl").exists():
            return Path(d)
    return None


PG_BIN = pg_bin_dir()
pytestmark = pytest.mark.skipif(
    PG_BIN is None,
    reason="PostgreSQL server binaries (initdb, pg_ctl) not found under "
    "/usr/lib/postgresql/*/bin: scripts/setup.sh installs Debian's postgresql package",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Postgres:
    """A throw-away PostgreSQL server on 127.0.0.1, run as `nobody` when the test is root."""

    def __init__(self) -> None:
        assert PG_BIN is not None
        self.dir = Path(tempfile.mkdtemp(prefix="kforge-pg-"))
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root
            os.chown(self.dir, 65534, 65534)
            self.as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        self.data = self.dir / "data"
        self.url = f"postgresql://kforge@127.0.0.1:{self.port}/postgres"

    def run(self, *args: str) -> str:
        out = subprocess.run(
            [*self.as_user, *args], capture_output=True, text=True, cwd=self.dir, check=False
        )
        assert out.returncode == 0, f"{args[0]} failed: {out.stdout}\n{out.stderr}"
        return out.stdout

    def start(self) -> Postgres:
        assert PG_BIN is not None
        self.run(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "kforge", "--auth=trust",
                 "-E", "UTF8", "--no-sync")  # fmt: skip
        opts = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.dir} -c fsync=off -c max_connections=50"
        )
        self.run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "pg.log"),
                 "-o", opts, "-w", "start")  # fmt: skip
        return self

    def restart(self) -> None:
        """A fast restart: every client connection is cut."""
        assert PG_BIN is not None
        # -l: a server writing to pg_ctl's (captured) output would hold the pipe open.
        self.run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "pg.log"),
                 "-m", "fast", "-w", "restart")  # fmt: skip

    def stop(self) -> None:
        assert PG_BIN is not None
        subprocess.run(
            [*self.as_user, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
             "stop"],
            capture_output=True, cwd=self.dir, check=False,
        )  # fmt: skip
        shutil.rmtree(self.dir, ignore_errors=True)

    def rows(self, sql: str) -> list[list[str]]:
        """Rows of `sql` through psql, each a list of text columns."""
        psql = PG_BIN / "psql" if PG_BIN and (PG_BIN / "psql").exists() else Path("psql")
        out = subprocess.run(
            [str(psql), self.url, "-X", "-At", "-F", "\t", "-c", sql],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return [line.split("\t") for line in out.stdout.splitlines() if line]

    def running_owner(self, job_id: str) -> str:
        """The node running `job_id`, or "" when it is not running."""
        rows = self.rows(f"SELECT owner FROM jobs WHERE id = '{job_id}' AND state = 'running'")
        return rows[0][0] if rows else ""


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    pg = Postgres().start()
    try:
        yield pg
    finally:
        pg.stop()


def node(pg: Postgres, name: str) -> KforgeServer:
    return KforgeServer(
        extra_args=["--store", pg.url, "--node-id", name, "--lease-seconds", str(LEASE_S)]
    )


@contextlib.contextmanager
def running_nodes(pg: Postgres, *names: str) -> Iterator[list[KforgeServer]]:
    """Nodes started one after the other, warm, killed at the end."""
    nodes = [node(pg, n) for n in names]
    try:
        for s in nodes:
            s.start()
            s.wait_ready()
        yield nodes
    finally:
        for s in nodes:
            s.kill(signal.SIGKILL)


def submit(server: KforgeServer, body: dict[str, object]) -> str:
    with server.client() as c:
        r = c.post("/evaluate", params={"wait": "false"}, json=body)
        assert r.status_code == 202, r.text
        return str(r.json()["job_id"])


def sleeping_job(seconds: float) -> dict[str, object]:
    return {
        "kernel": torch_kernel(model_source(f"import time\ntime.sleep({seconds})\nreturn x")),
        "num_correct_trials": 1,
        "measure_performance": False,
    }


def wait_for(what: str, check: object, timeout_s: float, log: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{log}"
        time.sleep(0.1)


def test_three_nodes_one_killed_mid_batch_every_job_completes_once(postgres: Postgres) -> None:
    names = ["node-0", "node-1", "node-2"]
    nodes = [node(postgres, n) for n in names]
    try:
        # Started together: their schema migrations race (an advisory lock serialises them).
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda s: s.start(), nodes))
        for s in nodes:
            s.wait_ready()
        assert postgres.rows("SELECT version FROM kforge_schema_version") == [["3"]]
        victim = nodes[2]

        ids: list[str] = []
        submitted_to: dict[str, int] = {}
        body = sleeping_job(0.5)
        for i in range(15):
            ids.append(submit(nodes[i % 3], body))
            submitted_to[ids[-1]] = i % 3

        def victim_running() -> bool:
            return bool(
                postgres.rows("SELECT id FROM jobs WHERE state = 'running' AND owner = 'node-2'")
            )

        wait_for("a job running on node-2", victim_running, 240, victim.log())
        victim.kill(signal.SIGKILL)
        killed_at = time.monotonic()
        survivors = nodes[:2]

        # Every accepted job (those given to the dead node included) finishes on the others.
        def all_finished() -> bool:
            with survivors[0].client() as c:
                return all(c.get(f"/job/{i}").json()["state"] in TERMINAL for i in ids)

        wait_for("every job to finish", all_finished, 300, survivors[0].log())
        assert time.monotonic() - killed_at >= LEASE_S * 0.5  # the dead node's lease had to run out

        # Exactly once: one successful run per job; the dead node's interrupted run ended by
        # its lease; no run left open.
        quoted = ",".join(f"'{i}'" for i in ids)
        states = postgres.rows(f"SELECT id, state, attempts FROM jobs WHERE id IN ({quoted})")
        assert sorted(r[0] for r in states) == sorted(ids)
        assert all(r[1] == "success" for r in states), states
        runs = postgres.rows(
            f"SELECT job_id, attempt, node, COALESCE(outcome, 'open') FROM job_runs "
            f"WHERE job_id IN ({quoted}) ORDER BY job_id, attempt"
        )
        for i in ids:
            mine = [r for r in runs if r[0] == i]
            assert [r[3] for r in mine].count("success") == 1, mine
            assert all(r[3] in ("success", "lease_expired") for r in mine), mine
        expired = [r for r in runs if r[3] == "lease_expired"]
        assert expired, runs
        assert all(r[2] == "node-2" for r in expired), expired
        for r in expired:  # re-run elsewhere, under the attempt rules of a restart
            again = [x for x in runs if x[0] == r[0] and x[3] == "success"]
            assert again[0][2] != "node-2" and int(again[0][1]) == int(r[1]) + 1, (r, again)
        # The dead node's own accepted jobs were not lost.
        assert any(submitted_to[i] == 2 for i in ids)

        # Results are the same from every surviving node.
        for i in ids:
            views = []
            for s in survivors:
                with s.client() as c:
                    r = c.get(f"/job/{i}")
                    assert r.status_code == 200, r.text
                    views.append(r.json())
            assert views[0]["state"] == views[1]["state"] == "success"
            assert views[0].get("result") == views[1].get("result"), i

        # A wait on one node, answered by a completion on another: keep one node busy (a long
        # job), then wait on it for a job only the other node is free to run.
        busy_id = submit(survivors[0], sleeping_job(120))

        def busy_owner() -> str:
            return postgres.running_owner(busy_id)

        wait_for("the long job to start", lambda: busy_owner() != "", 120)
        busy_name = busy_owner()
        busy_node = survivors[names.index(busy_name)]
        with busy_node.client() as c:
            r = c.post("/evaluate", params={"wait": "true"}, json=sleeping_job(0))
        assert r.status_code == 200, r.text
        answered = r.json()
        assert answered.get("state", "success") == "success", answered
        ran_on = postgres.rows(
            f"SELECT node, outcome FROM job_runs WHERE job_id = '{answered['job_id']}'"
        )
        other_name = names[1 - names.index(busy_name)]
        assert ran_on == [[other_name, "success"]], ran_on
        assert busy_owner() == busy_name, "the long job kept the waited node busy throughout"
        with busy_node.client() as c:
            assert c.post(f"/job/{busy_id}/cancel").status_code == 200
    finally:
        for s in nodes:
            s.kill(signal.SIGKILL)


def test_cancel_on_one_node_stops_a_job_running_on_another(postgres: Postgres) -> None:
    with running_nodes(postgres, "node-a", "node-b") as (a, b):
        job_id = submit(a, sleeping_job(60))
        wait_for("the job to start", lambda: postgres.running_owner(job_id) != "", 120)
        other = b if postgres.running_owner(job_id) == "node-a" else a
        started = time.monotonic()
        with other.client() as c:
            r = c.post(f"/job/{job_id}/cancel", json={"reason": "stop it"})
        assert r.status_code == 200, r.text
        assert r.json()["state"] == "cancelled", r.json()
        assert time.monotonic() - started < 30
        rows = postgres.rows(f"SELECT state, error FROM jobs WHERE id = '{job_id}'")
        assert rows == [["cancelled", "stop it"]], rows


def test_a_node_paused_past_its_lease_has_its_late_result_refused(postgres: Postgres) -> None:
    """SIGSTOP, not SIGKILL: the node comes back after its job ran elsewhere (fencing)."""
    with running_nodes(postgres, "node-a", "node-b") as (a, b):
        job_id = submit(a, sleeping_job(6))

        def owner() -> str:
            return postgres.running_owner(job_id)

        wait_for("the job to start", lambda: owner() != "", 120)
        paused_name = owner()
        paused, other = (a, b) if paused_name == "node-a" else (b, a)
        assert paused.proc is not None
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(
                "another node to take the job over",
                lambda: owner() == other_name(paused_name),
                60,
                other.log(),
            )
        finally:
            paused.proc.send_signal(signal.SIGCONT)

        def finished() -> bool:
            return postgres.rows(f"SELECT state FROM jobs WHERE id = '{job_id}'") == [["success"]]

        wait_for("the job to finish", finished, 120, other.log())
        # Refused either way: "no longer this node's" (the other node still runs it) or
        # "already success" (it finished there first).
        wait_for(
            "the paused node's late result",
            lambda: f"job={job_id} result could not be stored" in paused.log(),
            60,
            paused.log(),
        )
        runs = postgres.rows(
            f"SELECT node, COALESCE(outcome, 'open') FROM job_runs WHERE job_id = '{job_id}' "
            "ORDER BY attempt"
        )
        assert runs == [[paused_name, "lease_expired"], [other_name(paused_name), "success"]], runs
        with paused.client() as c:  # the paused node serves the stored (other node's) result
            assert c.get(f"/job/{job_id}").json()["state"] == "success"


def other_name(name: str) -> str:
    return "node-b" if name == "node-a" else "node-a"


def test_nodes_ride_out_a_database_restart(postgres: Postgres) -> None:
    """Connections cut mid-batch: nodes reconnect; every job still completes exactly once."""
    with running_nodes(postgres, "node-a", "node-b") as (a, b):
        ids = [submit((a, b)[i % 2], sleeping_job(1)) for i in range(6)]
        wait_for("a job to run", lambda: any(postgres.running_owner(i) for i in ids), 120)
        postgres.restart()
        ids += [submit_retrying((a, b)[i % 2], sleeping_job(0.2)) for i in range(4)]

        def all_done() -> bool:
            quoted = ",".join(f"'{i}'" for i in ids)
            rows = postgres.rows(f"SELECT state FROM jobs WHERE id IN ({quoted})")
            return len(rows) == len(ids) and all(r[0] in TERMINAL for r in rows)

        wait_for("every job to finish", all_done, 240, a.log() + b.log())
        for i in ids:
            runs = postgres.rows(f"SELECT outcome FROM job_runs WHERE job_id = '{i}'")
            assert [r[0] for r in runs].count("success") == 1, (i, runs)
            with b.client() as c:
                assert c.get(f"/job/{i}").json()["state"] == "success"


def submit_retrying(server: KforgeServer, body: dict[str, object]) -> str:
    """Submits, retrying while the node answers 5xx (its database is coming back)."""
    deadline = time.monotonic() + 60
    while True:
        with server.client() as c:
            r = c.post("/evaluate", params={"wait": "false"}, json=body)
        if r.status_code == 202:
            return str(r.json()["job_id"])
        assert r.status_code >= 500 and time.monotonic() < deadline, r.text
        time.sleep(0.5)


def test_a_schema_newer_than_the_binary_is_refused(postgres: Postgres) -> None:
    first = node(postgres, "node-a").start()
    first.stop()
    assert postgres.rows("SELECT version FROM kforge_schema_version") == [["3"]]
    postgres.rows("UPDATE kforge_schema_version SET version = 99")
    out = subprocess.run(
        [str(kforge_binary()), "serve", "--port", "0", "--devices", "cpu",
         "--data-dir", tempfile.mkdtemp(prefix="kforge-it-"), "--store", postgres.url],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode != 0, out
    text = out.stdout + out.stderr
    assert "--store" in text and "schema version 99" in text, text


def test_a_bad_store_is_a_startup_error_naming_store(tmp_path: Path) -> None:
    for value, expected in [
        ("mysql://db/kforge", "--store"),
        ("postgresql://kforge@127.0.0.1:1/none?connect_timeout=2", "--store"),
    ]:
        out = subprocess.run(
            [str(kforge_binary()), "serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
             "--devices", "cpu", "--store", value],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert out.returncode != 0, out
        text = out.stdout + out.stderr
        assert expected in text, text
        assert "mysql://db" not in text  # only the scheme is echoed


TOKENS = {
    "alice": ("user", "alice-token-0123456789"),
    "bob": ("user", "bob-token-0123456789ab"),
    "ops": ("admin", "ops-token-0123456789ab"),
}


def test_the_submitter_column_is_migrated_and_jobs_stay_private_across_nodes(
    postgres: Postgres, tmp_path: Path
) -> None:
    """Issue #37: schema 1 -> 2 adds jobs.submitter (a database of the previous version keeps
    its jobs); a job submitted on one node is its submitter's on every node."""
    first = node(postgres, "node-a").start()
    first.stop()
    # Back to schema 1, as the previous release left it, with a job of that time (finished
    # now: --job-retention would delete an older one at start).
    postgres.rows("ALTER TABLE jobs DROP COLUMN submitter")
    postgres.rows("UPDATE kforge_schema_version SET version = 1")
    postgres.rows(
        "INSERT INTO jobs (id, kind, state, request, created_ms, finished_ms) "
        "VALUES ('0123456789abcdef0123456789abcdef', 'evaluate', 'success', '{}', "
        "(extract(epoch FROM now()) * 1000)::bigint, (extract(epoch FROM now()) * 1000)::bigint)"
    )
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{name} {role} {t}\n" for name, (role, t) in TOKENS.items()))
    tokens.chmod(0o600)
    args = ["--store", postgres.url, "--lease-seconds", str(LEASE_S), "--tokens-file", str(tokens)]
    nodes = [
        KforgeServer(token=TOKENS["ops"][1], extra_args=[*args, "--node-id", name])
        for name in ("node-a", "node-b")
    ]
    try:
        for s in nodes:
            s.start()
            s.wait_ready()
        assert postgres.rows("SELECT version FROM kforge_schema_version") == [["3"]]
        assert postgres.rows(
            "SELECT submitter = '' FROM jobs WHERE id = '0123456789abcdef0123456789abcdef'"
        ) == [["t"]]

        def as_(srv: KforgeServer, who: str) -> httpx.Client:
            headers = {"Authorization": f"Bearer {TOKENS[who][1]}"}
            return httpx.Client(base_url=srv.url, timeout=60, headers=headers)

        with as_(nodes[0], "alice") as alice:
            r = alice.post("/evaluate", params={"wait": "false"}, json=sleeping_job(0.1))
            assert r.status_code == 202, r.text
            job = r.json()["job_id"]
        assert postgres.rows(f"SELECT submitter FROM jobs WHERE id = '{job}'") == [["alice"]]
        with as_(nodes[1], "alice") as alice, as_(nodes[1], "bob") as bob:
            assert alice.get(f"/job/{job}").status_code == 200  # hers on the other node too
            assert bob.get(f"/job/{job}").status_code == 404
            assert bob.get("/job/0123456789abcdef0123456789abcdef").status_code == 404
        with nodes[1].client() as ops:
            assert ops.get("/job/0123456789abcdef0123456789abcdef").status_code == 200
    finally:
        for s in nodes:
            s.kill(signal.SIGKILL)


def test_workbench_sessions_stay_on_the_node(postgres: Postgres) -> None:
    """With a PostgreSQL store the workbench keeps its sessions in <data-dir>/workbench.db, a
    file of the node's own (their workspace files are on its disk), and no SQLite job store
    (kforge.db) appears beside it (docs/deployment.md "Several nodes (PostgreSQL)")."""
    srv = node(postgres, "wb-node")
    try:
        srv.start()
        srv.wait_ready()
        mcp = RawMcp(srv.url)
        try:
            mcp.initialize()
            r = mcp.request(
                "tools/call", {"name": "set_kernel_name", "arguments": {"name": "vector_add"}}
            )
            assert r.status_code == 200, r.text
            assert "vector_add" in r.text, r.text
        finally:
            mcp.close()
        assert not (srv.data_dir / "kforge.db").exists(), sorted(
            p.name for p in srv.data_dir.iterdir()
        )
        with contextlib.closing(sqlite3.connect(srv.data_dir / "workbench.db")) as db:
            kernels = [row[0] for row in db.execute("SELECT kernel_name FROM workbench_sessions")]
        assert kernels == ["vector_add"]
        assert postgres.rows("SELECT count(*) FROM jobs") == [["0"]]
    finally:
        srv.stop()
