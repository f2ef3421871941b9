"""Issue #37 "job privacy": /stats listed running job ids, and any client could then read another
client's result (its traceback quotes the other client's source) and cancel its job. With
tokens, each job records its submitter (a name from the tokens file, never the token); a
client sees, reads and cancels only its own jobs and batches, another's answer exactly as
unknown ones (404); /stats and /health show job ids to admins only; cleanup is the admins'.
A batch's reference results reach only that batch's judges."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hostile.conftest import mcp_call, mcp_session, wait_until
from integration.kernels import model_source
from integration.kforge_server import KforgeServer

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef00"
OPS = "ops-admin-token-0123456789ab"
SECRET = "alice-private-kernel-marker-7f3a"

# Alice's kernels: their source (and so a traceback) holds SECRET. One sleeps until cancelled,
# one raises (its result quotes the line).
ALICE_SLEEPER = model_source(f"import time\n# {SECRET}\ntime.sleep(60)\nreturn x * 2")
ALICE_RAISER = model_source(f"raise ValueError('no')  # {SECRET}")


def token_files(tmp_path: Path) -> list[str]:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# name role token\nalice user {ALICE}\nbob user {BOB}\n")
    tokens.chmod(0o600)
    admin = tmp_path / "admin-token"
    admin.write_text(OPS + "\n")
    admin.chmod(0o600)
    return ["--tokens-file", str(tokens), "--admin-token-file", str(admin)]


def as_(srv: KforgeServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=srv.url, timeout=120, headers={"Authorization": f"Bearer {token}"})


def submit_sleeper(c: httpx.Client) -> str:
    body = {"kernel": {"source_code": ALICE_SLEEPER, "kernel_type": "torch"},
            "measure_performance": False, "timeout": 120}  # fmt: skip
    r = c.post("/evaluate", params={"wait": "false"}, json=body)
    assert r.status_code == 202, r.text
    return str(r.json()["job_id"])


def wait_running(c: httpx.Client, job_id: str) -> None:
    assert wait_until(lambda: c.get(f"/job/{job_id}").json()["state"] == "running", 120)


def without_ids(body: dict[str, Any], *ids: str) -> str:
    text = json.dumps(body, sort_keys=True)
    for i in ids:
        text = text.replace(i, "<id>")
    return text


def test_a_client_sees_reads_and_cancels_only_its_own_jobs(make_server, tmp_path: Path) -> None:
    srv: KforgeServer = make_server(*token_files(tmp_path), token=OPS, ready=True)
    with as_(srv, ALICE) as alice, as_(srv, BOB) as bob, as_(srv, OPS) as ops:
        raised = alice.post("/evaluate", json={
            "kernel": {"source_code": ALICE_RAISER, "kernel_type": "torch"},
            "measure_performance": False}).json()["job_id"]  # fmt: skip
        assert SECRET in alice.get(f"/job/{raised}").text  # her traceback quotes her source
        assert bob.get(f"/job/{raised}").status_code == 404
        job = submit_sleeper(alice)
        wait_running(alice, job)

        # Bob cannot find it: /stats and /health name no job, only counts.
        stats = bob.get("/stats")
        assert stats.status_code == 200
        assert job not in stats.text
        assert stats.json()["jobs"]["running"] == 1
        assert all("current_job" not in d for d in stats.json()["devices"])
        for key in ("job_stats", "compilation_metrics", "profiling_metrics", "gpu_utilization",
                    "throughput", "timestamp"):  # fmt: skip
            assert key in stats.json(), key  # the old server's /stats shape
        assert job not in bob.get("/health").text
        # Nor read it or cancel it: the answers are those of a job that does not exist.
        unknown = "0" * 32
        theirs, missing = bob.get(f"/job/{job}"), bob.get(f"/job/{unknown}")
        assert theirs.status_code == missing.status_code == 404
        assert without_ids(theirs.json(), job) == without_ids(missing.json(), unknown)
        assert SECRET not in theirs.text
        cancel = bob.post(f"/job/{job}/cancel", json={"reason": "mine now"})
        assert cancel.status_code == 404
        assert alice.get(f"/job/{job}").json()["state"] == "running"
        assert bob.post("/admin/cleanup-jobs").status_code == 403

        # Alice reads her job; the admin sees every id and every job.
        assert alice.get(f"/job/{job}").status_code == 200
        assert job not in alice.get("/stats").text  # users see counts, never ids
        assert job in ops.get("/stats").text
        assert ops.get(f"/job/{job}").status_code == 200
        assert ops.post("/admin/cleanup-jobs").json()["status"] == "cleanup_completed"
        done = alice.post(f"/job/{job}/cancel", json={"reason": "done"})
        assert done.status_code == 200 and done.json()["state"] == "cancelled", done.text

    # The store names the submitter, never the token.
    db = srv.data_dir / "kforge.db"
    rows = sqlite3.connect(db).execute("SELECT submitter FROM jobs WHERE id = ?", (job,)).fetchall()
    assert rows == [("alice",)]
    for path in srv.data_dir.glob("kforge.db*"):
        assert ALICE.encode() not in path.read_bytes(), path


def test_batches_are_their_submitters(make_server, tmp_path: Path) -> None:
    srv: KforgeServer = make_server(*token_files(tmp_path), token=OPS, ready=True)
    kernel = {"source_code": model_source("return x * 2"), "kernel_type": "torch"}
    body = {"ref_kernel": kernel, "candidates": [kernel], "measure_performance": False}
    with as_(srv, ALICE) as alice, as_(srv, BOB) as bob, as_(srv, OPS) as ops:
        r = alice.post("/batch", params={"wait": "false"}, json=body)
        assert r.status_code == 202, r.text
        batch, (job,) = r.json()["batch_id"], r.json()["jobs"]
        assert alice.get(f"/batch/{batch}").status_code == 200
        assert bob.get(f"/batch/{batch}").status_code == 404
        assert bob.get(f"/job/{job}").status_code == 404
        assert ops.get(f"/batch/{batch}").status_code == 200
        assert wait_until(lambda: alice.get(f"/job/{job}").json()["state"] == "success", 300)
        assert bob.get(f"/batch/{batch}").status_code == 404


def test_mcp_tools_and_sessions_are_their_principals(make_server, tmp_path: Path) -> None:
    srv: KforgeServer = make_server(*token_files(tmp_path), token=OPS, ready=True)
    with as_(srv, ALICE) as alice, as_(srv, BOB) as bob:
        job = submit_sleeper(alice)
        bob_session = mcp_session(bob)
        r = mcp_call(bob, bob_session, "get_job_status", {"job_id": job})
        assert r.status_code == 200, r.text
        view = r.json()["result"]["structuredContent"]
        assert view["status"] == "not_found", view
        assert SECRET not in r.text
        stats = mcp_call(bob, bob_session, "get_server_stats", {})
        assert stats.status_code == 200 and job not in stats.text
        # Alice's session, used with Bob's token, is an unknown session.
        alice_session = mcp_session(alice)
        stolen = mcp_call(bob, alice_session, "get_job_status", {"job_id": job})
        assert stolen.status_code == 404, stolen.text
        assert bob.delete("/mcp", headers=alice_session).status_code == 404
        mine = mcp_call(alice, alice_session, "get_job_status", {"job_id": job})
        assert mine.json()["result"]["structuredContent"]["job_id"] == job
        assert alice.post(f"/job/{job}/cancel").status_code == 200
        # Her workbench session (its kernel versions) is hers too.
        named = mcp_call(alice, alice_session, "set_kernel_name", {"name": "alice_relu"})
        workbench = named.json()["result"]["structuredContent"]["session"]["id"]
        listed = mcp_call(bob, bob_session, "list_sessions", {})
        assert workbench not in listed.text and "alice_relu" not in listed.text, listed.text
        resumed = mcp_call(bob, bob_session, "resume_session", {"session_id": workbench})
        assert resumed.json()["result"]["isError"] is True, resumed.text
        assert "no workbench session" in resumed.text


def test_without_tokens_stats_shows_no_job_ids(make_server) -> None:
    """One principal for every client (all local users of a loopback server): each reads and
    cancels any job whose id it knows, as before, but /stats no longer lists the ids."""
    srv: KforgeServer = make_server(ready=True)
    with srv.client() as c:
        job = submit_sleeper(c)
        wait_running(c, job)
        stats = c.get("/stats")
        assert job not in stats.text and stats.json()["jobs"]["running"] == 1
        assert all("current_job" not in d for d in stats.json()["devices"])
        assert c.get(f"/job/{job}").status_code == 200
        assert c.post(f"/job/{job}/cancel").json()["state"] == "cancelled"
        assert c.post("/admin/cleanup-jobs").status_code == 200


# A reference (it runs in a judge) that reports every file under the batches' reference
# directory it can list and read: another client's batch's outputs, before the fix.
SPY_REFERENCE = """
import hashlib, json, os
ROOT = {root!r}
found = {{"root_listed": os.path.isdir(ROOT), "files": {{}}}}
for path, _, names in os.walk(ROOT):
    for name in names:
        full = os.path.join(path, name)
        try:
            with open(full, "rb") as f:
                found["files"][full] = hashlib.sha256(f.read()).hexdigest()[:16]
        except OSError as e:
            found["files"][full] = "unreadable: " + str(e.strerror)
raise RuntimeError("SPY " + json.dumps(found))
"""


def spy_report(result: dict[str, Any]) -> dict[str, Any]:
    """What SPY_REFERENCE found, from the reference's error in a compare's result."""
    for text in result.values():
        if isinstance(text, str) and "SPY " in text:
            found, _ = json.JSONDecoder().raw_decode(text[text.rindex("SPY ") + 4 :])
            return dict(found)
    raise AssertionError(f"no SPY report in {result}")


@pytest.mark.skipif(os.geteuid() != 0, reason="the judges' jails need root (--sandbox auto)")
def test_a_batchs_reference_results_reach_only_its_own_judges(make_server, tmp_path) -> None:
    """Alice's batch keeps its reference's outputs on disk while its second job runs; Bob's
    compare runs beside it (two jobs in flight) with a reference that looks for them."""
    srv: KforgeServer = make_server(*token_files(tmp_path), "--test-cpu-pipeline-depth", "2",
                                    "--warm-children-cpu", "2", token=OPS, ready=True)  # fmt: skip
    source = model_source("return x * 2", inputs="[torch.randn(4096)]")
    ref = {"source_code": source, "kernel_type": "torch"}
    quick = {"source_code": source.replace("class Model", "class ModelNew"), "kernel_type": "torch"}
    slow_source = model_source("import time\ntime.sleep(1.0)\nreturn x * 2",
                               inputs="[torch.randn(4096)]")  # fmt: skip
    slow = {"source_code": slow_source.replace("class Model", "class ModelNew"),
            "kernel_type": "torch"}  # fmt: skip
    batch = {"ref_kernel": ref, "candidates": [quick, slow], "measure_performance": False,
             "num_correct_trials": 40, "timeout": 300}  # fmt: skip
    with as_(srv, ALICE) as alice, as_(srv, BOB) as bob:
        r = alice.post("/batch", params={"wait": "false"}, json=batch)
        assert r.status_code == 202, r.text
        first, second = r.json()["jobs"]
        assert wait_until(lambda: alice.get(f"/job/{first}").json()["state"] == "success", 300)
        stored = alice.get(f"/job/{first}").json()["kernel_exec_result"]["reference_reuse"]
        assert stored["stored"] is True, stored  # Alice's reference outputs are on disk now
        assert alice.get(f"/job/{second}").json()["state"] in ("queued", "running")
        root = str(srv.data_dir / "cache" / "reference")
        spy = {"ref_kernel": {"source_code": SPY_REFERENCE.format(root=root),
                              "kernel_type": "torch"},
               "custom_kernel": quick, "measure_performance": False}  # fmt: skip
        answer = bob.post("/compare", json=spy)
        assert answer.status_code == 200, answer.text
        assert alice.get(f"/job/{second}").json()["state"] == "running"  # they overlapped
        found = spy_report(answer.json()["kernel_exec_result"])
        assert found["files"] == {}, found  # nothing of Alice's batch reaches Bob's judge
        assert found["root_listed"] is False, found
        (done,) = srv.wait_jobs([second], timeout_s=600)
        assert done["kernel_exec_result"]["correctness"] is True, done


def test_the_token_file_names_the_principal_not_the_token(make_server, tmp_path: Path) -> None:
    """The server's log and /stats never show a token; a request without one is 401."""
    srv: KforgeServer = make_server(*token_files(tmp_path), token=OPS, ready=True)
    with httpx.Client(base_url=srv.url, timeout=30) as anonymous:
        assert anonymous.get("/stats").status_code == 401
    with as_(srv, OPS) as ops:
        assert ops.get("/stats").status_code == 200
    time.sleep(0.2)
    for token in (ALICE, BOB, OPS):
        assert token not in srv.log()


def test_job_listings_show_each_user_only_its_own_jobs(make_server, tmp_path: Path) -> None:
    """GET /jobs (and so the web UI's jobs page): a user lists its own jobs whatever filter it
    sends; an admin lists everyone's."""
    srv: KforgeServer = make_server(*token_files(tmp_path), token=OPS, ready=True)
    with as_(srv, ALICE) as alice, as_(srv, BOB) as bob, as_(srv, OPS) as ops:
        body = {"kernel": {"source_code": ALICE_RAISER, "kernel_type": "torch"},
                "measure_performance": False}  # fmt: skip
        hers = alice.post("/evaluate", json=body).json()["job_id"]
        his = bob.post("/evaluate", json=body).json()["job_id"]

        def listed(c: httpx.Client, **params: str) -> list[str]:
            r = c.get("/jobs", params=params)
            assert r.status_code == 200, r.text
            assert SECRET not in r.text  # summaries never carry sources or tracebacks
            return [j["job_id"] for j in r.json()["jobs"]]

        assert listed(alice) == [hers]
        assert listed(bob) == [his]
        assert listed(bob, submitter="alice") == []
        assert bob.get("/jobs", params={"format": "jsonl"}).text.count(hers) == 0
        assert set(listed(ops)) == {hers, his}
        assert listed(ops, submitter="alice") == [hers]
        # A cursor made from another user's job does not reach past the caller's own jobs.
        page = ops.get("/jobs", params={"limit": 1}).json()
        assert listed(bob, cursor=page["next_cursor"]) in ([], [his])
