"""The real zygote and its children, driven by a fake supervisor over the real protocol."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import worker_kernels as K
from fake_supervisor import FakeSupervisor
from worker_jobs import assert_speedup_consistent, make_job

from kforge_worker import PROTOCOL_VERSION
from kforge_worker.core.protocol import send_control

_ids = itertools.count(1)


def job_for(kernel, reference, tmp_path: Path, **overrides):
    return make_job(kernel, reference, tmp_path=tmp_path, **overrides)


def test_hello(zygote):
    hello = zygote.hello
    assert hello["protocol"] == {"major": PROTOCOL_VERSION[0], "minor": PROTOCOL_VERSION[1]}
    assert hello["worker"] == "python" and hello["device"] == "cpu"
    assert hello["pid"] == zygote.process.pid
    assert set(hello["kernel_types"]) == {"torch", "torch_cuda", "triton", "multi_kernel"}
    assert hello["startup_ms"] > 0 and hello["warnings"] == []
    assert {"python", "torch", "triton"} <= set(hello["versions"])


def test_passing_job(zygote, tmp_path):
    child, ready = zygote.ready_child(next(_ids))
    assert ready["pid"] == child.pid
    assert ready["protocol"]["major"] == PROTOCOL_VERSION[0]
    assert ready["device"]["kind"] == "cpu" and ready["warmup_ms"] > 0
    box = ready["sandbox"]
    assert box["setsid"] and box["parent_death_signal"] and box["limits"]["core"] == 0
    assert os.getsid(child.pid) == child.pid  # its own session, so a group kill takes it all
    fds = set(os.listdir(f"/proc/{child.pid}/fd"))
    # stdio, the protocol socket and the link to its candidate process
    assert {"0", "1", "2"} <= fds and len(fds) == 5, fds
    assert ready["sandbox"]["judge"]["jailed"] is False  # this fake supervisor never jails
    assert ready["candidate"]["warmup_ms"] > 0

    job = job_for(K.triton_vadd(), K.torch_add_reference(), tmp_path, measure_performance=True)
    job["job_id"] = "job-pass"
    message = child.run_job(job)
    assert message is not None, child.stderr.data()
    assert message["job_id"] == "job-pass"
    result = message["result"]
    assert result["compiled"] and result["correctness"], result
    assert result["runtime"] > 0
    assert_speedup_consistent(result)  # a busy cpu may read the tiny reference as 0
    phases = [m["phase"] for m in child.messages if m["type"] == "progress"]
    assert phases == ["loading", "correctness", "timing_reference", "timing_candidate"]
    exited = zygote.exited(child.pid)
    assert exited["exit_code"] == 0 and exited["signal"] is None


def test_segfault_is_reported_as_a_signal(zygote, tmp_path):
    # The kernel crashes its own (candidate) process; the judge survives and reports it.
    child, _ = zygote.ready_child(next(_ids))
    job = job_for(K.triton_wrapper(K.SEGFAULT_WRAPPER), K.torch_add_reference(), tmp_path)
    result = child.run_job(job)["result"]
    assert result["error_kind"] == "crash" and result["compiled"] is True
    assert "killed by signal 11 (SIGSEGV)" in result["runtime_error"], result["runtime_error"]
    last = [m for m in child.messages if m["type"] == "progress"][-1]
    assert last["phase"] == "correctness"
    assert zygote.exited(child.pid)["exit_code"] == 0


def test_exit_code_is_reported(zygote, tmp_path):
    child, _ = zygote.ready_child(next(_ids))
    job = job_for(K.triton_wrapper(K.EXIT_WRAPPER), K.torch_add_reference(), tmp_path)
    result = child.run_job(job)["result"]
    assert result["error_kind"] == "crash"
    assert "exited with code 3" in result["runtime_error"], result["runtime_error"]
    assert zygote.exited(child.pid)["exit_code"] == 0


def test_megabytes_of_output_do_not_corrupt_the_protocol(zygote, tmp_path):
    child, _ = zygote.ready_child(next(_ids))
    job = job_for(K.triton_wrapper(K.NOISY_WRAPPER), K.torch_add_reference(), tmp_path)
    job["num_correct_trials"] = 1
    message = child.run_job(job)
    assert message is not None and message["result"]["correctness"] is True
    assert zygote.exited(child.pid)["exit_code"] == 0
    out = child.stdout.data()
    assert len(out) == 5 * 1024 * 1024 and out.count(b"\n") == 5 * 1024
    assert child.stderr.data().count(b"to stderr") == 1


def test_monkey_patched_torch_does_not_leak_into_the_next_child(zygote, tmp_path):
    first, _ = zygote.ready_child(next(_ids))
    job = job_for(K.triton_wrapper(K.PATCHING_WRAPPER), K.torch_add_reference(), tmp_path)
    result = first.run_job(job)["result"]
    # The patch took effect only in the candidate's own process: the reference runs in the
    # judge, whose torch.add is untouched, so the verdict is unaffected.
    assert result["correctness"] is True, result
    zygote.exited(first.pid)
    second, _ = zygote.ready_child(next(_ids))
    result = second.run_job(job_for(K.triton_vadd(), K.torch_add_reference(), tmp_path))["result"]
    assert result["correctness"] is True
    zygote.exited(second.pid)


def test_children_are_prepared_while_another_runs(zygote, tmp_path):
    running, _ = zygote.ready_child(next(_ids))
    spare, _ = zygote.ready_child(next(_ids))  # forked and warm before the first job ends
    job = job_for(K.triton_vadd(), K.torch_add_reference(), tmp_path)
    assert running.run_job(job)["result"]["correctness"]
    assert spare.run_job(job)["result"]["correctness"]
    for child in (running, spare):
        assert zygote.exited(child.pid)["exit_code"] == 0


def test_bad_fork_requests_and_unknown_messages(zygote):
    send_control(zygote.control, {"type": "no_such_message"})
    r, w = os.pipe()
    send_control(zygote.control, {"type": "fork", "child_id": 999}, [w])
    os.close(w)
    os.close(r)
    failed = zygote.next_control("fork_failed", child_id=999)
    assert "expected 3 descriptors" in failed["error"]


def test_bad_job_spec_is_a_worker_error(zygote):
    child, _ = zygote.ready_child(next(_ids))
    message = child.run_job({"job_id": "broken", "kind": "evaluate"})
    assert message["job_id"] == "broken"
    assert message["result"]["error_kind"] == "worker"
    assert "job.kernel" in message["result"]["runtime_error"]
    assert zygote.exited(child.pid)["exit_code"] == 0


def test_child_hangs_up_cleanly_when_the_supervisor_closes(zygote):
    child, _ = zygote.ready_child(next(_ids))
    child.channel.close()
    assert zygote.exited(child.pid)["exit_code"] == 0


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_children_die_with_the_zygote(tmp_path):
    sup = FakeSupervisor("cpu", tmp_path)
    child, _ = sup.ready_child(1)
    os.kill(sup.process.pid, signal.SIGKILL)
    sup.process.wait(timeout=30)
    deadline = time.monotonic() + 10
    while not _dead(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _dead(child.pid)
    sup.control.close()


def test_zygote_exits_at_eof(tmp_path):
    sup = FakeSupervisor("cpu", tmp_path)
    sup.control.close()
    assert sup.process.wait(timeout=30) == 0


LOOPBACK_CHECK = """
import socket
from kforge_worker.process import sandbox
report = sandbox.SandboxReport()
sandbox.isolate_network(report)
assert report.network_isolated, report
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
socket.create_connection(server.getsockname(), timeout=2).close()
print(report.loopback_up)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a new network namespace needs root here")
def test_an_unjailed_child_without_network_keeps_its_loopback():
    proc = subprocess.run(
        [sys.executable, "-c", LOOPBACK_CHECK],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "python")},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


def test_children_of_a_batch_reuse_the_reference_through_the_protocol(zygote, tmp_path):
    """Two children (separate judges, candidates in their own processes) of one batch: the
    second uses the file the first stored, with the digest the first reported."""
    reuse = {"dir": str(tmp_path / "reference" / "batch-z"), "key": "cd" * 32, "sha256": None}
    job = job_for(K.triton_vadd(), K.torch_add_reference(), tmp_path, measure_performance=True)
    first, _ = zygote.ready_child(next(_ids))
    result = first.run_job({**job, "job_id": "batch-z-0", "reference_reuse": reuse})["result"]
    assert result["correctness"] and result["reference_reuse"]["stored"], result
    digest = result["reference_reuse"]["sha256"]
    second, _ = zygote.ready_child(next(_ids))
    again = second.run_job(
        {**job, "job_id": "batch-z-1", "reference_reuse": {**reuse, "sha256": digest}}
    )["result"]
    assert again["correctness"], again
    assert again["reference_reuse"]["reused"] == {
        "correctness_trials": 3,
        "reference_timing": True,
    }
    assert again["ref_runtime_stats"] == result["ref_runtime_stats"]


def test_the_zygotes_triton_cache_is_made_readable_by_the_jobs(tmp_path):
    # The server creates files under umask 077; the jobs' uids read this cache (read-only).
    from kforge_worker.zygote import share_with_jobs

    cache = tmp_path / "triton"
    entry = cache / "KEY"
    entry.mkdir(parents=True)
    so = entry / "cuda_utils.so"
    so.write_bytes(b"x")
    for path, mode in ((cache, 0o700), (entry, 0o700), (so, 0o600)):
        path.chmod(mode)
    assert share_with_jobs(str(cache)) is None
    assert cache.stat().st_mode & 0o777 == 0o755
    assert entry.stat().st_mode & 0o777 == 0o755
    assert so.stat().st_mode & 0o777 == 0o644
    assert share_with_jobs(str(tmp_path / "missing")) is None
