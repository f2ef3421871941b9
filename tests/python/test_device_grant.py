"""The judge's exclusive device grant (pipelined stages), driven over the real protocol by a
fake supervisor: a job with `exclusive_timing` asks for the device after its correctness
phase, runs no timed region before `device_grant`, and gives it back before its result."""

from __future__ import annotations

import itertools
import select

import pytest
import worker_kernels as K
from worker_jobs import assert_speedup_consistent, make_job

from kforge_worker.core.spec import SpecError, parse_job

_ids = itertools.count(1)


def _until(child, kind: str) -> list[dict]:
    """Messages up to and including the first of `kind`."""
    seen = []
    while (message := child.recv()) is not None:
        seen.append(message)
        if message["type"] == kind:
            return seen
    raise AssertionError(f"the child hung up before {kind}: {seen}")


def _phases(messages: list[dict]) -> list[str]:
    return [m["phase"] for m in messages if m["type"] == "progress"]


def test_timed_regions_run_only_under_the_exclusive_grant(zygote, tmp_path):
    child, _ = zygote.ready_child(next(_ids))
    job = make_job(K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path)
    job.update(job_id="job-grant", measure_performance=True, exclusive_timing=True)
    child.channel.send({"type": "job", "job": job})
    before = _until(child, "device_request")
    assert before[-1] == {"type": "device_request", "mode": "exclusive"}
    assert _phases(before) == ["loading", "correctness"]  # nothing timed yet
    # It waits for the grant: nothing more arrives while the supervisor holds it back.
    readable, _, _ = select.select([child.channel.socket], [], [], 0.5)
    assert readable == []
    child.channel.send({"type": "device_grant"})
    held = _until(child, "device_release")
    assert _phases(held) == ["timing_reference", "timing_candidate"]
    after = _until(child, "result")
    assert [m["type"] for m in after] == ["result"]
    result = after[-1]["result"]
    assert result["correctness"] and result["runtime"] > 0
    assert_speedup_consistent(result)  # (a busy cpu can leave a side unmeasurable, and says so)


def test_a_job_that_fails_correctness_never_asks_for_the_device(zygote, tmp_path):
    child, _ = zygote.ready_child(next(_ids))
    job = make_job(K.triton_vadd(K.VADD_WRONG), K.torch_add_reference(), tmp_path=tmp_path)
    job.update(job_id="job-wrong", measure_performance=True, exclusive_timing=True)
    message = child.run_job(job)
    assert message is not None and message["result"]["correctness"] is False
    assert not [m for m in child.messages if m["type"].startswith("device_")]


def test_without_exclusive_timing_no_grant_is_asked_for(zygote, tmp_path):
    child, _ = zygote.ready_child(next(_ids))
    job = make_job(K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path)
    job.update(job_id="job-plain", measure_performance=True)
    message = child.run_job(job)
    assert message is not None and message["result"]["correctness"], message
    assert not [m for m in child.messages if m["type"].startswith("device_")]


def test_a_supervisor_that_hangs_up_before_the_grant_gets_no_result(zygote, tmp_path):
    child, _ = zygote.ready_child(next(_ids))
    job = make_job(K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path)
    job.update(job_id="job-hangup", measure_performance=True, exclusive_timing=True)
    child.channel.send({"type": "job", "job": job})
    _until(child, "device_request")
    child.channel.socket.shutdown(2)  # SHUT_RDWR: the supervisor is gone
    exited = zygote.exited(child.pid)
    assert exited["signal"] is None


def test_a_bad_exclusive_timing_field_is_an_error_naming_it(tmp_path):
    job = make_job(K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path)
    assert parse_job(job).exclusive_timing is False  # absent: no pipelining
    job["exclusive_timing"] = True
    assert parse_job(job).exclusive_timing is True
    job["exclusive_timing"] = "yes"
    with pytest.raises(SpecError, match=r"job\.exclusive_timing"):
        parse_job(job)
