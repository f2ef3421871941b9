"""GET /jobs on a real server with real (cpu) jobs, in both stores: SQLite and a throw-away
PostgreSQL server. Filters, cursor pagination, JSON Lines, and a 400 naming the field for every
malformed parameter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from integration.kernels import model_source, torch_kernel, triton_add
from integration.kforge_server import KforgeServer
from integration.test_multinode_postgres import PG_BIN, Postgres

TOKEN = "jobs-list-admin-token"


def body(kernel: dict[str, Any]) -> dict[str, Any]:
    return {"kernel": kernel, "num_correct_trials": 1, "measure_performance": False}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def listed(request: pytest.FixtureRequest) -> Iterator[tuple[KforgeServer, list[dict[str, Any]]]]:
    """A server and its finished jobs (newest first): 3 torch (one correct), 2 triton."""
    pg: Postgres | None = None
    args: list[str] = []
    if request.param == "postgres":
        if PG_BIN is None:
            pytest.skip("PostgreSQL server binaries not found (scripts/setup.sh installs them)")
        pg = Postgres().start()
        args = ["--store", pg.url, "--node-id", "node-a"]
    srv = KforgeServer(admin_token=TOKEN, extra_args=args).start()
    try:
        srv.wait_ready()
        broken = "this is not python ("
        kernels = [
            torch_kernel(model_source("return torch.relu(x)")),
            torch_kernel(broken),
            triton_add(broken),
            torch_kernel(broken + " 2"),
            triton_add(broken + " 2"),
        ]
        ids = []
        with srv.client() as c:
            for k in kernels:
                r = c.post("/evaluate", params={"wait": "false"}, json=body(k))
                assert r.status_code == 202, r.text
                ids.append(r.json()["job_id"])
        jobs = srv.wait_jobs(ids)
        yield srv, sorted(jobs, key=lambda j: (j["created_at"], j["job_id"]), reverse=True)
    finally:
        srv.stop()
        if pg is not None:
            pg.stop()


def get(srv: KforgeServer, **params: Any) -> httpx.Response:
    with srv.client() as c:
        return c.get("/jobs", params=params)


def ids_of(r: httpx.Response) -> list[str]:
    assert r.status_code == 200, r.text
    return [j["job_id"] for j in r.json()["jobs"]]


def test_newest_first_with_summaries(listed: tuple[KforgeServer, list[dict[str, Any]]]) -> None:
    srv, jobs = listed
    r = get(srv)
    assert ids_of(r) == [j["job_id"] for j in jobs]
    page = r.json()
    assert page["next_cursor"] is None and page["limit"] == 50
    first = next(j for j in page["jobs"] if j.get("compiled"))  # the only one that compiled
    assert first["state"] == "success" and first["kind"] == "evaluate"
    assert first["kernel_type"] == "torch" and first["device"] == srv.devices
    assert first["submitter"] == "admin"
    assert first["compiled"] is True and first["correctness"] is True
    assert "source_code" not in json.dumps(page)  # summaries, not sources
    assert page["jobs"][0]["compiled"] is False


def test_cursor_pages_cover_every_job_once(
    listed: tuple[KforgeServer, list[dict[str, Any]]],
) -> None:
    srv, jobs = listed
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        r = get(srv, limit=2, **({"cursor": cursor} if cursor else {}))
        seen += ids_of(r)
        pages += 1
        cursor = r.json()["next_cursor"]
        assert r.headers.get("x-next-cursor") == cursor
        if cursor is None:
            break
    assert pages == 3
    assert seen == [j["job_id"] for j in jobs]
    # A browser page of another (allowed) origin may read the header too.
    with srv.client() as c:
        r = c.get("/jobs", params={"limit": 1}, headers={"Origin": "http://localhost:3000"})
    assert "X-Next-Cursor" in r.headers["access-control-expose-headers"]


def test_filters(listed: tuple[KforgeServer, list[dict[str, Any]]]) -> None:
    srv, jobs = listed
    all_ids = [j["job_id"] for j in jobs]
    triton = ids_of(get(srv, kernel_type="triton"))
    assert len(triton) == 2 and set(triton) < set(all_ids)
    assert len(ids_of(get(srv, kernel_type="torch"))) == 3
    assert ids_of(get(srv, status="success")) == all_ids  # a compile error is still a verdict
    assert ids_of(get(srv, status="queued,running")) == []
    assert ids_of(get(srv, device=srv.devices)) == all_ids
    assert ids_of(get(srv, device="cuda:7")) == []
    assert ids_of(get(srv, submitter="admin")) == all_ids
    assert ids_of(get(srv, submitter="someone-else")) == []
    middle = jobs[2]["created_at"]  # jobs may share a millisecond: expect by time, not index
    since = [j["job_id"] for j in jobs if j["created_at"] >= middle]
    assert len(since) >= 3
    assert ids_of(get(srv, since=middle)) == since
    assert ids_of(get(srv, until=middle)) == [i for i in all_ids if i not in since]
    assert ids_of(get(srv, kernel_type="torch", since=middle)) == [
        i for i in since if i not in triton
    ]


def test_jsonl_export(listed: tuple[KforgeServer, list[dict[str, Any]]]) -> None:
    srv, jobs = listed
    r = get(srv, format="jsonl", limit=4)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/jsonl")
    lines = r.text.splitlines()
    assert [json.loads(line)["job_id"] for line in lines] == [j["job_id"] for j in jobs[:4]]
    rest = get(srv, format="jsonl", cursor=r.headers["x-next-cursor"])
    assert [json.loads(line)["job_id"] for line in rest.text.splitlines()] == [jobs[4]["job_id"]]
    assert "x-next-cursor" not in rest.headers


def test_a_job_with_its_request(listed: tuple[KforgeServer, list[dict[str, Any]]]) -> None:
    srv, jobs = listed
    with srv.client() as c:
        r = c.get(f"/job/{jobs[-1]['job_id']}", params={"include": "request"})
        assert r.status_code == 200, r.text
        assert "return torch.relu(x)" in r.json()["request"]["kernel"]["source_code"]
        assert "request" not in c.get(f"/job/{jobs[-1]['job_id']}").json()
        bad = c.get(f"/job/{jobs[-1]['job_id']}", params={"include": "everything"})
        assert bad.status_code == 400 and bad.json()["field"] == "query.include"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "done"}, "query.status"),
        ({"status": "success,"}, "query.status"),
        ({"kernel_type": "rust"}, "query.kernel_type"),
        ({"limit": "0"}, "query.limit"),
        ({"limit": "501"}, "query.limit"),
        ({"limit": "ten"}, "query.limit"),
        ({"cursor": "zz"}, "query.cursor"),
        ({"cursor": "c1" + "41" * 4}, "query.cursor"),
        ({"since": "yesterday"}, "query.since"),
        ({"until": "-5"}, "query.until"),
        ({"since": "200", "until": "100"}, "query.until"),
        ({"format": "xml"}, "query.format"),
        ({"device": "x" * 200}, "query.device"),
        ({"sort": "oldest"}, "query.sort"),
    ],
)
def test_bad_parameters_are_400_naming_the_field(
    listed: tuple[KforgeServer, list[dict[str, Any]]], params: dict[str, str], field: str
) -> None:
    srv, _ = listed
    r = get(srv, **params)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field, r.text


def test_without_the_token_nothing_is_listed(
    listed: tuple[KforgeServer, list[dict[str, Any]]],
) -> None:
    srv, _ = listed
    assert httpx.get(f"{srv.url}/jobs", timeout=30).status_code == 401


def test_the_python_client_lists_and_pages(
    listed: tuple[KforgeServer, list[dict[str, Any]]],
) -> None:
    from kforge_client import AsyncKernelEvalClient, KernelEvalClient, KernelEvalError

    srv, jobs = listed
    torch_ids = set(ids_of(get(srv, kernel_type="torch")))
    with KernelEvalClient(srv.url, token=TOKEN) as client:
        page = client.list_jobs(status=["success", "failed"], kernel_type="triton", limit=1)
        assert len(page["jobs"]) == 1 and page["next_cursor"]
        every = [j["job_id"] for j in client.iter_jobs(limit=2)]
        assert every == [j["job_id"] for j in jobs]
        with pytest.raises(KernelEvalError) as refused:
            client.list_jobs(limit=0)
        assert refused.value.field == "query.limit"

    async def async_ids() -> list[str]:
        async with AsyncKernelEvalClient(srv.url, token=TOKEN) as client:
            return [j["job_id"] async for j in client.iter_jobs(limit=3, kernel_type="torch")]

    assert asyncio.run(async_ids()) == [j["job_id"] for j in jobs if j["job_id"] in torch_ids]
