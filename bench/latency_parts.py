"""Where an evaluation's wall time goes, from its job view (bench/cuda_latency.py and
bench/eval_latency.py print it for their back-to-back jobs)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from typing import Any


def breakdown(elapsed: float, view: dict[str, Any]) -> dict[str, float]:
    """Where one job's wall time went (ms): the client's wait, the server's queue and run
    (created -> started -> finished, ms resolution), and inside the run the wait for a warm
    process, the process's own wall (its phases, and the teardown after its result) and the
    release of what was left."""
    res = view["kernel_exec_result"]
    process = res.get("process", {})
    created, started, finished = (
        view.get("created_at", 0.0),
        view.get("started_at", 0.0),
        view.get("finished_at", 0.0),
    )
    return {
        "client": elapsed * 1000,
        "queue": (started - created) * 1000,
        "run": (finished - started) * 1000,
        "outside_server": elapsed * 1000 - (finished - created) * 1000,
        "take": process.get("take_ms", 0.0),
        "process_wall": process.get("wall_ms", 0.0),
        "phases": sum((res.get("phases_ms") or {}).values()),
        "teardown": process.get("teardown_ms", 0.0),
        "release": process.get("release_ms", 0.0),
        "device_wait": process.get("device_wait_ms", 0.0),
    }


def p50_parts(parts: list[dict[str, float]]) -> dict[str, float]:
    """The median of each part over the jobs that have it."""
    keys = dict.fromkeys(k for p in parts for k in p)
    return {k: statistics.median(p[k] for p in parts if k in p) for k in keys}


def describe(parts: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in parts.items())


def python_workers(stats: Any) -> Iterator[dict[str, Any]]:
    """Every Python worker's entry of /stats that has a child's warm-up, in document order."""
    if isinstance(stats, dict):
        if stats.get("type") == "python" and "child_warmup_ms" in stats:
            yield stats
        for value in stats.values():
            yield from python_workers(value)
    elif isinstance(stats, list):
        for value in stats:
            yield from python_workers(value)


def report_warmups(stats: Any) -> None:
    """The Python workers' last child warm-up from /stats (what each job's replacement
    process costs): the judge's steps, then its candidate process's."""
    for worker in python_workers(stats):
        steps = json.dumps(worker.get("child_warmup_steps_ms"))
        print(f"{worker.get('device')} child warm-up {worker['child_warmup_ms']:.0f} ms: {steps}")
        if worker.get("child_candidate_warmup_ms") is not None:
            cand = json.dumps(worker.get("child_candidate_warmup_steps_ms"))
            print(f"{worker.get('device')} its candidate's warm-up "
                  f"{worker['child_candidate_warmup_ms']:.0f} ms: {cand}")  # fmt: skip
