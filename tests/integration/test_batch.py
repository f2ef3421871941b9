"""POST /batch, GET /batch/{id} and the MCP tool batch_compare: the real server and workers."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from integration.kernels import FAST_TIMING, TORCH_ADD_REF, torch_kernel, triton_add
from integration.kforge_server import KforgeServer, kforge_binary
from integration.mcp_support import RawMcp, call_result

WRONG = triton_add(" + 1.0")


def batch_body(server: KforgeServer, candidates: list[dict[str, Any]], **extra: Any) -> dict:
    return {
        "ref_kernel": torch_kernel(TORCH_ADD_REF),
        "candidates": candidates,
        "timing": FAST_TIMING,
        "num_correct_trials": 2,
        "device": server.devices,
        **extra,
    }


def exec_of(view: dict[str, Any]) -> dict[str, Any]:
    return view["kernel_exec_result"]


def raw_median(stats: dict[str, Any]) -> float:
    """The median as measured, before the event window's overhead came off (GPU)."""
    return stats.get("event_median") or stats["median"]


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln and not ln.startswith(":")]
        data = "\n".join(ln[len("data:") :].strip() for ln in lines if ln.startswith("data:"))
        event = [ln[len("event:") :].strip() for ln in lines if ln.startswith("event:")]
        if data:
            out.append((event[0] if event else "message", json.loads(data)))
    return out


def test_batch_answers_one_compare_per_candidate_in_order(server: KforgeServer) -> None:
    body = batch_body(server, [triton_add(), WRONG, triton_add()], measure_performance=True)
    with server.client() as c:
        r = c.post("/batch", json=body)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["batch_id"].startswith("batch-")
        ids = answer["jobs"]
        assert len(ids) == 3 and len(set(ids)) == 3
        results = answer["results"]
        assert [exec_of(v)["correctness"] for v in results] == [True, False, True]
        assert [v["job_id"] for v in results] == ids
        assert exec_of(results[1])["error_kind"] == "mismatch"
        # Every candidate is a job of its own, with the batch's one seed.
        seeds = set()
        for job_id, view in zip(ids, results, strict=True):
            job = c.get(f"/job/{job_id}").json()
            assert job["state"] == "success"
            assert exec_of(job)["correctness"] == exec_of(view)["correctness"]
            seeds.add(exec_of(job)["metadata"]["seed"])
        assert len(seeds) == 1
    # The reference ran for the first candidate only: the third reused its outputs and timing.
    first, second, third = (exec_of(v)["reference_reuse"] for v in results)
    assert first["stored"] and first["reused"] == {}
    assert second["reused"] == {"correctness_trials": 1}
    assert third["reused"] == {
        "correctness_trials": 2,
        "reference_timing": True,
    }
    # The same measurement (on a GPU each job takes its own window overhead off the median).
    first_stats, third_stats = (exec_of(results[i])["ref_runtime_stats"] for i in (0, 2))
    assert raw_median(third_stats) == raw_median(first_stats)
    assert third_stats["trials"] == first_stats["trials"]
    # The batch's reference files are gone once its last job has ended.
    assert not (server.data_dir / "cache" / "reference" / answer["batch_id"]).exists()


def test_batch_streams_one_event_per_finished_candidate(server: KforgeServer) -> None:
    body = batch_body(server, [triton_add(), WRONG])
    with server.client() as c:
        r = c.post("/batch", json=body, headers={"Accept": "text/event-stream"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.text)
        also = c.post("/batch?stream=1", json=batch_body(server, [triton_add()]))
        assert [e for e, _ in sse_events(also.text)] == ["batch", "result", "done"]
    kinds = [e for e, _ in events]
    assert kinds[0] == "batch" and kinds[-1] == "done" and kinds.count("result") == 2
    head = events[0][1]
    results = {d["index"]: d for e, d in events if e == "result"}
    assert sorted(results) == [0, 1]
    assert [results[i]["job_id"] for i in (0, 1)] == head["jobs"]
    assert exec_of(results[0]["result"])["correctness"] is True
    assert exec_of(results[1]["result"])["correctness"] is False
    assert events[-1][1] == {"batch_id": head["batch_id"], "total": 2}


def test_batch_without_waiting_is_polled(server: KforgeServer) -> None:
    with server.client() as c:
        r = c.post("/batch?wait=false", json=batch_body(server, [triton_add(), triton_add()]))
        assert r.status_code == 202, r.text
        accepted = r.json()
        assert r.headers["location"] == f"/batch/{accepted['batch_id']}"
        deadline = time.monotonic() + 300
        while True:
            view = c.get(f"/batch/{accepted['batch_id']}").json()
            if view["state"] == "finished":
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.2)
    assert [j["job_id"] for j in view["jobs"]] == accepted["jobs"]
    assert view["total"] == view["finished"] == 2
    assert all(exec_of(v)["correctness"] for v in view["results"])


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda b: b.update(candidates=[]), "candidates"),
        (lambda b: b.pop("candidates"), "candidates"),
        (lambda b: b.update(candidates="x"), "candidates"),
        (lambda b: b.update(candidates=[triton_add()] * 65), "candidates"),
        (lambda b: b["candidates"][1].pop("source_code"), "candidates[1].source_code"),
        (lambda b: b["candidates"][0].update(kernel_type="fortran"), "candidates[0].kernel_type"),
        (
            lambda b: b["candidates"][1]["io"]["args"][2]["tensor_spec"].update(shape=["x"]),
            "candidates[1].io.args[2].tensor_spec.shape",
        ),
        (lambda b: b.pop("ref_kernel"), "ref_kernel"),
        (lambda b: b.update(custom_kernel=triton_add()), "custom_kernel"),
        (lambda b: b.update(num_correct_trials=0), "num_correct_trials"),
    ],
)
def test_bad_batches_name_the_field(server: KforgeServer, change: Any, field: str) -> None:
    # A JSON round trip: the kernels' io entries may share dicts, and a change must hit one.
    body = json.loads(json.dumps(batch_body(server, [triton_add(), triton_add()])))
    change(body)
    with server.client() as c:
        r = c.post("/batch", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field, r.json()


def test_unknown_batch_is_404(server: KforgeServer) -> None:
    with server.client() as c:
        r = c.get("/batch/batch-000000000000")
    assert r.status_code == 404, r.text


def test_mcp_batch_compare(server: KforgeServer) -> None:
    mcp = RawMcp(server.url)
    try:
        mcp.initialize()
        tools = [t["name"] for t in mcp.request("tools/list").json()["result"]["tools"]]
        assert "batch_compare" in tools
        args = batch_body(server, [triton_add(), WRONG])
        r = mcp.request("tools/call", {"name": "batch_compare", "arguments": args}, timeout=600)
        assert r.status_code == 200, r.text
        result = call_result(r)
        assert not result.get("isError"), result
        out = result["structuredContent"]
        assert [exec_of(v)["correctness"] for v in out["results"]] == [True, False]
        assert len(out["jobs"]) == 2
        bad = dict(args, candidates=[triton_add(), {"kernel_type": "triton"}])
        r = mcp.request("tools/call", {"name": "batch_compare", "arguments": bad})
        result = call_result(r)
        assert result["isError"]
        assert "candidates[1].source_code" in result["content"][0]["text"]
    finally:
        mcp.close()


def test_cli_batch_names_a_candidate_that_is_not_utf8(tmp_path: Path) -> None:
    # Such a source cannot travel as JSON: a bad option naming the file, not an abort.
    (tmp_path / "problem.py").write_text(TORCH_ADD_REF)
    (tmp_path / "candidates").mkdir()
    (tmp_path / "candidates" / "a.py").write_bytes(b"import torch\n# \xff\n")
    r = subprocess.run(
        [str(kforge_binary()), "batch", "--problem", str(tmp_path / "problem.py"),
         "--candidates", str(tmp_path / "candidates")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "a.py: not UTF-8 text (byte 15)" in r.stderr
