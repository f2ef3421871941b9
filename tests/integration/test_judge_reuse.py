"""A judge kept for several jobs (`--jobs-per-judge`, docs/security.md "A judge serves several
jobs"): only jobs of one submitter with one reference share a judge, each job still gets a
fresh candidate process, and nothing a candidate leaves behind (files, processes, patched
modules, a patched `os._exit`) reaches the next job's candidate.

Needs the jail (a root server): judges are kept only where candidates are jailed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.kernels import model_source, torch_kernel
from integration.kforge_server import KforgeServer

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the jail needs a root server")

DEVICE = os.environ.get("KFORGE_TEST_DEVICE", "cpu")
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}
MARK = "kforge-planted"  # the comm of the process the planting candidate leaves running

PLANTER = f"""
import ctypes, os, sys, threading, time, torch
FORK = {{fork}}

def _plant():
    # Files where a later process could look, a patched module, an os._exit that never
    # returns, a thread that never ends and a child process that outlives the call.
    for where in ("/tmp", "/dev/shm", os.getcwd()):
        try:
            with open(os.path.join(where, "{MARK}"), "w") as f:
                f.write("left behind")
        except OSError:
            pass
    torch.{MARK.replace("-", "_")} = True
    os._exit = lambda code: time.sleep(3600)
    threading.Thread(target=lambda: time.sleep(3600), daemon=False).start()
    if FORK and os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"{MARK}", 0, 0, 0)  # PR_SET_NAME
        while True:
            time.sleep(0.05)

class Model(torch.nn.Module):
    def forward(self, x):
        if not getattr(torch, "{MARK.replace("-", "_")}", False):
            _plant()
        return x * 2

def get_inputs():
    return [torch.randn(16)]

def get_init_inputs():
    return []
"""

WITNESS = f"""
import os, torch

class Model(torch.nn.Module):
    def forward(self, x):
        found = []
        for where in ("/tmp", "/dev/shm", os.getcwd()):
            if os.path.exists(os.path.join(where, "{MARK}")):
                found.append("a file in " + where)
        if getattr(torch, "{MARK.replace("-", "_")}", False):
            found.append("a patched torch")
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{{pid}}/comm") as f:
                        if f.read().strip() == "{MARK}":
                            found.append("the planted process " + pid)
                except OSError:
                    pass
        if found:
            raise RuntimeError("NOT CONTAINED: " + " | ".join(found))
        return x * 2

def get_inputs():
    return [torch.randn(16)]

def get_init_inputs():
    return []
"""

REFERENCE = torch_kernel(model_source("return x * 2", inputs="[torch.randn(16)]"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KforgeServer]:
    tokens = tmp_path_factory.mktemp("tokens") / "tokens"
    tokens.write_text("".join(f"{name} user {token}\n" for name, token in TOKENS.items()))
    tokens.chmod(0o600)
    args = ["--sandbox", "required", "--jobs-per-judge", str(JOBS_PER_JUDGE), "--tokens-file",
            str(tokens)]  # fmt: skip
    srv = KforgeServer(devices=DEVICE, token=TOKENS["alice"], extra_args=args).start()
    try:
        srv.wait_ready(DEVICE)
        yield srv
    finally:
        srv.stop()


def compare(
    srv: KforgeServer, custom: dict[str, Any], who: str = "alice", ref: dict[str, Any] = REFERENCE
) -> dict[str, Any]:
    body = {"ref_kernel": ref, "custom_kernel": custom, "num_correct_trials": 1,
            "measure_performance": False, "device": DEVICE}  # fmt: skip
    headers = {"Authorization": f"Bearer {TOKENS[who]}"}
    with httpx.Client(base_url=srv.url, timeout=300, headers=headers) as c:
        r = c.post("/compare", json=body)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()["kernel_exec_result"]
    return result


def judge_of(result: dict[str, Any]) -> tuple[int, int]:
    """(the judge's pid, how many jobs it served before this one)."""
    worker = result["worker"]
    return worker["pid"], worker["judge_jobs_before"]


JOBS_PER_JUDGE = 3


def on_a_judge_with_spares(srv: KforgeServer, custom: dict[str, Any]) -> dict[str, Any]:
    """A compare whose judge can serve another job (one that served its last is not kept)."""
    for _ in range(JOBS_PER_JUDGE + 1):
        result = compare(srv, custom)
        if judge_of(result)[1] < JOBS_PER_JUDGE - 1:
            return result
    raise AssertionError("no judge with a spare left")


def next_job_on(srv: KforgeServer, custom: dict[str, Any], pid: int, **kw: Any) -> dict[str, Any]:
    """A compare that lands on the kept judge `pid`: its next candidate warms after the last
    job, and a job that comes first takes a fresh judge instead (a warm one is never waited
    for), so this retries a few times."""
    for _ in range(20):
        result = compare(srv, custom, **kw)
        if judge_of(result)[0] == pid:
            return result
        time.sleep(0.5)
    raise AssertionError(f"no job landed on the kept judge {pid}")


def planted_processes() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == MARK:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_judge_serves_jobs_of_one_submitter_and_one_reference(server: KforgeServer) -> None:
    honest = torch_kernel(model_source("return x * 2", inputs="[torch.randn(16)]"))
    first = on_a_judge_with_spares(server, honest)
    assert first["correctness"], first
    pid, before = judge_of(first)
    second = next_job_on(server, honest, pid)
    assert second["correctness"], second
    assert judge_of(second)[1] == before + 1
    # Each job's candidate is a fresh process: its warm-up is the spare's, its own.
    assert second["worker"]["sandbox"]["candidate"]["jailed"] is True


def test_another_submitter_or_reference_gets_another_judge(server: KforgeServer) -> None:
    honest = torch_kernel(model_source("return x * 2", inputs="[torch.randn(16)]"))
    pid, _ = judge_of(compare(server, honest))
    time.sleep(1.0)  # the kept judge's next candidate is warm by now
    for kw in ({"who": "bob"}, {"ref": torch_kernel(model_source("return x + x"))}):
        result = compare(server, honest, **kw)
        assert result["correctness"], result
        assert judge_of(result)[0] != pid, kw
        assert judge_of(result)[1] == 0, kw


def test_a_judge_serves_at_most_jobs_per_judge_jobs(server: KforgeServer) -> None:
    honest = torch_kernel(model_source("return x * 2", inputs="[torch.randn(16)]"))
    seen: dict[int, int] = {}
    for _ in range(10):
        pid, before = judge_of(compare(server, honest))
        seen[pid] = max(seen.get(pid, 0), before)
        time.sleep(0.3)
    assert max(seen.values()) <= JOBS_PER_JUDGE - 1, seen


def planter(fork: bool) -> dict[str, Any]:
    return {"source_code": PLANTER.replace("{fork}", str(fork)), "kernel_type": "torch"}


def test_nothing_a_candidate_leaves_reaches_the_next_candidate(server: KforgeServer) -> None:
    # Files, a patched module, an os._exit that never returns, a thread that never ends: the
    # judge is kept (its candidate is killed, not asked to exit) and the next candidate, a
    # process of its own, sees none of it.
    planted = on_a_judge_with_spares(server, planter(fork=False))
    assert planted["correctness"], planted
    pid, _ = judge_of(planted)
    witness = next_job_on(server, {"source_code": WITNESS, "kernel_type": "torch"}, pid)
    assert witness["correctness"], witness.get("runtime_error") or witness


def test_a_job_that_leaves_a_process_running_ends_its_judge(server: KforgeServer) -> None:
    # A process left running (here the candidate's; a reference's daemon alike) is more than
    # the judge's cgroup should hold after a job: the judge is not kept, and everything of
    # the job is killed before the answer, as for any job that is not kept.
    planted = compare(server, planter(fork=True))
    assert planted["correctness"], planted
    pid, _ = judge_of(planted)
    deadline = time.monotonic() + 10
    while planted_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert planted_processes() == []
    time.sleep(1.0)
    after = compare(server, torch_kernel(model_source("return x * 2", inputs="[torch.randn(16)]")))
    assert judge_of(after)[0] != pid


def test_kept_judges_with_pipelined_stages() -> None:
    # With several jobs in flight (pipelined stages), a kept judge's spare warms registered
    # with the device's grant instead of the timing gate; the jobs stay correct.
    args = ["--sandbox", "required", "--test-cpu-pipeline-depth", "3", "--jobs-per-judge", "4"]
    srv = KforgeServer(devices="cpu", extra_args=args).start()
    try:
        srv.wait_ready("cpu")
        honest = torch_kernel(model_source("return x * 2", inputs="[torch.randn(16)]"))
        body = {"ref_kernel": REFERENCE, "custom_kernel": honest, "num_correct_trials": 1,
                "measure_performance": True, "timing": {"budget_ms": 5}}  # fmt: skip
        served = []
        with srv.client() as c:
            for _ in range(6):
                res = c.post("/compare", json=body).json()["kernel_exec_result"]
                assert res["correctness"] and res["runtime"] > 0, res
                served.append(judge_of(res)[1])
                time.sleep(0.5)
        assert max(served) >= 1, served  # some job ran on a kept judge
    finally:
        srv.stop()


def parked_total(srv: KforgeServer) -> int:
    workers = srv.device_stats(DEVICE)["workers"]
    return sum(int(w.get("judges_parked_total", 0)) for w in workers.values())


def test_the_last_candidate_of_a_batch_keeps_no_judge(server: KforgeServer) -> None:
    """A batch puts its reference's jobs together: its last candidate's judge is not kept
    (no spare of it warms up for a job that will not come), the ones before it are."""
    honest = torch_kernel(model_source("return x * 2", inputs="[torch.randn(16)]"))
    body = {"ref_kernel": torch_kernel(model_source("return x + x")), "num_correct_trials": 1,
            "measure_performance": False, "device": DEVICE}  # fmt: skip
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}

    def batch_parks(candidates: int) -> int:
        before = parked_total(server)
        with httpx.Client(base_url=server.url, timeout=300, headers=headers) as c:
            r = c.post("/batch", json={**body, "candidates": [honest] * candidates})
        assert r.status_code == 200, r.text
        results = [v["kernel_exec_result"] for v in r.json()["results"]]
        assert all(x["correctness"] for x in results), results
        time.sleep(2.0)  # a kept judge is parked once its candidate is gone
        return parked_total(server) - before

    assert batch_parks(1) == 0
    assert batch_parks(2) == 1
