"""The REST resources behind the web UI's session and bench pages, and the live-update streams,
on a real server with user and admin tokens: GET /workbench/sessions[/{id}] (sessions made
through MCP on the cpu device), GET /bench/reports[/{id}] (a real POST /bench), GET
/jobs/events and GET /job/{id}/events. Each is scoped by token as jobs are: a user sees its
own only, an admin every one, nothing without a token; a bad parameter is a 400 naming it."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.kernels import model_source, torch_kernel
from integration.kforge_server import KforgeServer
from integration.workbench_rest import HOSTILE_COMMENT, HOSTILE_DOC, make_session

TOKENS = {"alice": "alice-user-token", "bob": "bob-the-user-token", "root": "root-admin-token"}
BENCH = {"ops": ["add"], "sizes": ["small"], "runs": 2, "peaks": False, "torch_compile": False}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[KforgeServer, dict[str, Any]]]:
    tokens = Path(tempfile.mkdtemp(prefix="kforge-tokens-")) / "tokens"
    tokens.touch(mode=0o600)
    tokens.write_text(
        "".join(f"{n} {'admin' if n == 'root' else 'user'} {t}\n" for n, t in TOKENS.items())
    )
    srv = KforgeServer(token=TOKENS["root"], extra_args=["--tokens-file", str(tokens)]).start()
    try:
        srv.wait_ready()
        made = {
            "alice": make_session(srv.url, TOKENS["alice"], srv.devices, hostile=True),
            "bob": make_session(srv.url, TOKENS["bob"], srv.devices),
        }
        with client(srv, "alice") as c:
            r = c.post("/bench", json={**BENCH, "device": srv.devices})
            assert r.status_code == 200, r.text
            made["report"] = r.json()
        yield srv, made
    finally:
        srv.stop()


def client(srv: KforgeServer, who: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {TOKENS[who]}"} if who else {}
    return httpx.Client(base_url=srv.url, headers=headers, timeout=120)


def get(srv: KforgeServer, who: str | None, path: str, **params: Any) -> httpx.Response:
    with client(srv, who) as c:
        return c.get(path, params=params)


def test_sessions_are_listed_to_their_owner_and_to_admins(
    served: tuple[KforgeServer, dict[str, Any]],
) -> None:
    srv, made = served
    ids = lambda r: [s["session_id"] for s in r.json()["sessions"]]  # noqa: E731
    assert ids(get(srv, "alice", "/workbench/sessions")) == [made["alice"]]
    assert ids(get(srv, "bob", "/workbench/sessions")) == [made["bob"]]
    everyone = get(srv, "root", "/workbench/sessions")
    assert ids(everyone) == [made["bob"], made["alice"]]  # the latest updated first
    # Another owner asked for by a user lists nothing; an admin may filter by owner.
    assert ids(get(srv, "alice", "/workbench/sessions", owner="bob")) == []
    assert ids(get(srv, "root", "/workbench/sessions", owner="alice")) == [made["alice"]]
    # Pages of one, following the cursor.
    first = get(srv, "root", "/workbench/sessions", limit=1).json()
    assert [s["session_id"] for s in first["sessions"]] == [made["bob"]]
    second = get(srv, "root", "/workbench/sessions", limit=1, cursor=first["next_cursor"]).json()
    assert [s["session_id"] for s in second["sessions"]] == [made["alice"]]
    assert second["next_cursor"] is None
    # Filters.
    assert ids(get(srv, "root", "/workbench/sessions", state="end")) == []
    assert ids(get(srv, "root", "/workbench/sessions", kernel_name="softmax")) == ids(everyone)
    summary = next(s for s in everyone.json()["sessions"] if s["session_id"] == made["alice"])
    assert summary["owner"] == "alice" and summary["kernel_name"] == "softmax"
    assert summary["versions"] == 2 and summary["correct_versions"] == 1
    assert summary["best_version"] == 2 and summary["best_time_ms"] > 0


def test_a_session_shows_its_versions_results_and_log(
    served: tuple[KforgeServer, dict[str, Any]],
) -> None:
    srv, made = served
    r = get(srv, "alice", f"/workbench/sessions/{made['alice']}")
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["session_id"] == made["alice"] and s["state"] == "evaluation"
    v1, v2 = s["versions"]
    assert v1["version"] == 1 and v1["correct"] is False and HOSTILE_COMMENT in v1["source"]
    assert v2["correct"] is True and v2["best"] is True and v2["time_ms"] > 0
    assert v1["results"]["validation"]["passed"] is False
    cases = v2["results"]["benchmark"]["cases"]
    assert cases and all(c["timing"]["median_ms"] > 0 for c in cases), cases
    assert s["log"].startswith("# softmax Triton kernel development log")
    # The log quotes v1's first comment (its intent): the UI must show that markup as text.
    assert HOSTILE_COMMENT.removeprefix("# ") in s["log"]
    assert HOSTILE_DOC in v1["source"]
    assert any(h["to"] == "write" for h in s["history"]), s["history"]


def test_sessions_are_scoped_by_token(served: tuple[KforgeServer, dict[str, Any]]) -> None:
    srv, made = served
    for path in ["/workbench/sessions", f"/workbench/sessions/{made['alice']}"]:
        assert get(srv, None, path).status_code == 401, path
    theirs = get(srv, "bob", f"/workbench/sessions/{made['alice']}")
    unknown = get(srv, "bob", "/workbench/sessions/wb_nope")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["error"].replace(made["alice"], "X") == unknown.json()["error"].replace(
        "wb_nope", "X"
    )  # another's session reads exactly as an unknown one
    assert get(srv, "root", f"/workbench/sessions/{made['alice']}").status_code == 200


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"state": "done"}, "query.state"),
        ({"limit": "0"}, "query.limit"),
        ({"limit": "101"}, "query.limit"),
        ({"cursor": "nope"}, "query.cursor"),
        ({"kernel_name": "x" * 129}, "query.kernel_name"),
        ({"sort": "name"}, "query.sort"),
    ],
)
def test_bad_session_queries_name_the_field(
    served: tuple[KforgeServer, dict[str, Any]], params: dict[str, str], field: str
) -> None:
    r = get(served[0], "root", "/workbench/sessions", **params)
    assert r.status_code == 400 and r.json()["field"] == field, r.text


def test_bench_reports_are_kept_and_scoped(served: tuple[KforgeServer, dict[str, Any]]) -> None:
    srv, made = served
    answer = made["report"]
    report_id = answer["report_id"]
    mine = get(srv, "alice", "/bench/reports").json()
    assert [r["report_id"] for r in mine["reports"]] == [report_id]
    summary = mine["reports"][0]
    assert summary["submitter"] == "alice" and summary["device"] == srv.devices
    assert summary["ops"][0]["op"] == "add" and summary["ops"][0]["best"] is not None
    assert get(srv, "bob", "/bench/reports").json()["reports"] == []
    assert [r["report_id"] for r in get(srv, "root", "/bench/reports").json()["reports"]] == [
        report_id
    ]
    full = get(srv, "alice", f"/bench/reports/{report_id}")
    assert full.status_code == 200, full.text
    assert full.json()["report"] == answer["report"] and full.json()["files"] == answer["files"]
    assert get(srv, "bob", f"/bench/reports/{report_id}").status_code == 404
    assert get(srv, None, f"/bench/reports/{report_id}").status_code == 401
    assert get(srv, None, "/bench/reports").status_code == 401
    bad = get(srv, "alice", "/bench/reports", limit="x")
    assert bad.status_code == 400 and bad.json()["field"] == "query.limit", bad.text


def test_bench_reports_survive_a_restart(served: tuple[KforgeServer, dict[str, Any]]) -> None:
    srv, made = served
    kept = srv.data_dir / "bench-reports" / f"{made['report']['report_id']}.json"
    assert json.loads(kept.read_text())["submitter"] == "alice"


def sse(lines: Iterator[str], until: str, into: list[tuple[str, Any]]) -> None:
    """Appends (event, data) of an SSE stream's lines to `into` until the event `until`."""
    name, data = "message", []
    for line in lines:
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            into.append((name, json.loads("\n".join(data))))
            if name == until:
                return
            name, data = "message", []


def test_job_streams_report_changes_to_those_who_may_see_them(
    served: tuple[KforgeServer, dict[str, Any]],
) -> None:
    srv, _ = served
    heard: dict[str, list[tuple[str, Any]]] = {"alice": [], "bob": []}
    ready = threading.Barrier(3, timeout=60)

    def listen(who: str) -> None:
        with client(srv, who) as c, c.stream("GET", "/jobs/events", timeout=120) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith(
                "text/event-stream"
            )
            lines = r.iter_lines()
            sse(lines, "ready", heard[who])
            ready.wait()
            if who == "alice":
                sse(lines, "job", heard[who])
                while heard[who][-1][1]["state"] not in ("success", "failed"):
                    sse(lines, "job", heard[who])
            else:  # bob hears nothing of alice's job: the stream only keeps alive
                r.close()

    threads = [threading.Thread(target=listen, args=(w,)) for w in heard]
    for t in threads:
        t.start()
    ready.wait()
    body = {
        "kernel": torch_kernel(model_source("return torch.relu(x)")),
        "num_correct_trials": 1,
        "measure_performance": False,
    }
    with client(srv, "alice") as c:
        r = c.post("/evaluate", params={"wait": "false"}, json=body)
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        for t in threads:
            t.join(timeout=180)
        # The job's own stream, after it ended: its state, then done, and the stream closes.
        with c.stream("GET", f"/job/{job_id}/events") as events:
            got: list[tuple[str, Any]] = []
            sse(events.iter_lines(), "done", got)
    states = [d["state"] for name, d in heard["alice"] if name == "job"]
    assert states[0] == "queued" and states[-1] == "success", heard["alice"]
    assert all(d["job_id"] == job_id for name, d in heard["alice"] if name == "job")
    assert "running" in states
    assert [n for n, _ in heard["bob"]] == ["ready"], heard["bob"]
    assert [n for n, _ in got] == ["state", "done"] and got[1][1]["state"] == "success"
    with client(srv, "bob") as c:
        assert c.get(f"/job/{job_id}/events").status_code == 404
    assert get(srv, None, "/jobs/events").status_code == 401
    bad = get(srv, "alice", "/jobs/events", since="1")
    assert bad.status_code == 400 and bad.json()["field"] == "query.since"


def test_the_python_client_reads_sessions_and_reports(
    served: tuple[KforgeServer, dict[str, Any]],
) -> None:
    from kforge_client import AsyncKernelEvalClient, KernelEvalClient

    srv, made = served
    with KernelEvalClient(srv.url, token=TOKENS["alice"]) as c:
        page = c.list_workbench_sessions(state=["write", "evaluation"], limit=5)
        assert [s["session_id"] for s in page["sessions"]] == [made["alice"]]
        assert c.workbench_session(made["alice"])["versions"][1]["correct"] is True
        reports = c.list_bench_reports(limit=1)["reports"]
        assert [r["report_id"] for r in reports] == [made["report"]["report_id"]]
        assert c.bench_report(made["report"]["report_id"])["report"] == made["report"]["report"]

    async def as_bob() -> tuple[dict[str, Any], dict[str, Any]]:
        async with AsyncKernelEvalClient(srv.url, token=TOKENS["bob"]) as c:
            return await c.list_workbench_sessions(), await c.list_bench_reports()

    sessions, reports = asyncio.run(as_bob())
    assert [s["session_id"] for s in sessions["sessions"]] == [made["bob"]]
    assert reports["reports"] == []
