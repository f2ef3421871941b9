"""Reference reuse across the jobs of a batch (reference_reuse.py), in this process."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import torch
import worker_kernels as K
from worker_jobs import assert_speedup_consistent, make_job, run

KEY = "ab" * 32


def batch_job(tmp_path: Path, kernel: dict[str, Any], sha256: str | None, **over: Any) -> dict:
    job = make_job(kernel, K.torch_add_reference(), tmp_path=tmp_path, **over)
    job["reference_reuse"] = {
        "dir": str(tmp_path / "refs" / "batch1"),
        "key": KEY,
        "sha256": sha256,
    }
    return job


def ref_file(tmp_path: Path) -> Path:
    return tmp_path / "refs" / "batch1" / f"{KEY}.pt"


def test_second_job_reuses_the_reference_outputs_and_timing(tmp_path):
    first = run(batch_job(tmp_path, K.triton_vadd(), None, measure_performance=True))
    assert first["correctness"], first
    reuse = first["reference_reuse"]
    assert reuse["stored"] and reuse["reused"] == {}
    data = ref_file(tmp_path).read_bytes()
    assert reuse["sha256"] == hashlib.sha256(data).hexdigest()

    second = run(batch_job(tmp_path, K.triton_vadd(), reuse["sha256"], measure_performance=True))
    assert second["correctness"], second
    again = second["reference_reuse"]
    assert again["reused"] == {
        "correctness_trials": 3,
        "reference_timing": True,
    }
    # Nothing new: the same file and digest stay.
    assert not again["stored"] and again["sha256"] == reuse["sha256"]
    assert second["ref_runtime_stats"] == first["ref_runtime_stats"]
    assert_speedup_consistent(second)


def test_a_wrong_candidate_still_fails_against_reused_outputs(tmp_path):
    first = run(batch_job(tmp_path, K.triton_vadd(), None))
    wrong = K.triton_vadd()
    wrong["source_code"] = K.VADD_WRONG
    second = run(batch_job(tmp_path, wrong, first["reference_reuse"]["sha256"]))
    assert second["reference_reuse"]["reused"] == {"correctness_trials": 1}
    assert not second["correctness"] and second["error_kind"] == "mismatch"


def test_a_changed_file_is_not_used(tmp_path):
    first = run(batch_job(tmp_path, K.triton_vadd(), None))
    digest = first["reference_reuse"]["sha256"]
    path = ref_file(tmp_path)
    path.write_bytes(path.read_bytes() + b"x")
    second = run(batch_job(tmp_path, K.triton_vadd(), digest))
    assert second["correctness"], second
    reuse = second["reference_reuse"]
    assert reuse["reused"] == {} and "digest" in reuse["note"]
    # It computed everything and left a good file with the digest it reports.
    assert reuse["stored"]
    assert reuse["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_file_is_what_the_judge_compares_with(tmp_path):
    """A file with the digest the server kept is used as it is: expected outputs of zeros make
    a correct kernel fail, so the reuse is real (the server's digest is what protects it)."""
    first = run(batch_job(tmp_path, K.triton_vadd(), None))
    path = ref_file(tmp_path)
    saved = torch.load(path, weights_only=True)
    saved["correctness"] = {
        k: [(n, torch.zeros_like(t)) for n, t in v] for k, v in saved["correctness"].items()
    }
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    path.write_bytes(buffer.getvalue())
    forged = hashlib.sha256(buffer.getvalue()).hexdigest()
    assert forged != first["reference_reuse"]["sha256"]
    second = run(batch_job(tmp_path, K.triton_vadd(), forged))
    assert not second["correctness"] and second["error_kind"] == "mismatch"


def test_a_failed_first_candidate_leaves_a_partial_file_the_next_completes(tmp_path):
    wrong = K.triton_vadd()
    wrong["source_code"] = K.VADD_WRONG
    first = run(batch_job(tmp_path, wrong, None, measure_performance=True))
    assert not first["correctness"] and first["reference_reuse"]["stored"]
    second = run(
        batch_job(
            tmp_path, K.triton_vadd(), first["reference_reuse"]["sha256"], measure_performance=True
        )
    )
    assert second["correctness"], second
    reuse = second["reference_reuse"]
    assert reuse["reused"] == {"correctness_trials": 1}
    assert reuse["stored"] and reuse["sha256"] != first["reference_reuse"]["sha256"]
    third = run(batch_job(tmp_path, K.triton_vadd(), reuse["sha256"], measure_performance=True))
    assert third["reference_reuse"]["reused"] == {
        "correctness_trials": 3,
        "reference_timing": True,
    }


def test_jobs_outside_a_batch_have_no_reuse_field(tmp_path):
    result = run(make_job(K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path))
    assert "reference_reuse" not in result


def test_outputs_above_the_keep_limit_are_recomputed_and_the_timing_still_reused(
    tmp_path, monkeypatch
):
    from kforge_worker.judge import reference_reuse

    monkeypatch.setattr(reference_reuse, "KEEP_OUTPUT_BYTES", 16)  # every output set is larger
    first = run(batch_job(tmp_path, K.triton_vadd(), None, measure_performance=True))
    reuse = first["reference_reuse"]
    assert first["correctness"] and reuse["stored"], first
    assert "above 16 bytes" in reuse["not_kept"], reuse
    second = run(batch_job(tmp_path, K.triton_vadd(), reuse["sha256"], measure_performance=True))
    assert second["correctness"], second
    assert second["reference_reuse"]["reused"] == {"reference_timing": True}
    assert second["ref_runtime_stats"] == first["ref_runtime_stats"]
    wrong = K.triton_vadd()
    wrong["source_code"] = K.VADD_WRONG
    third = run(batch_job(tmp_path, wrong, reuse["sha256"]))
    assert not third["correctness"] and third["error_kind"] == "mismatch"


def test_outputs_of_a_model_built_elsewhere_are_recomputed_and_the_timing_reused(tmp_path):
    from kforge_worker.core.spec import ReferenceReuseSpec
    from kforge_worker.judge.reference_reuse import ReferenceCache, ReferenceTiming

    spec = ReferenceReuseSpec(dir=str(tmp_path / "refs"), key=KEY, sha256=None)
    first = ReferenceCache.open(spec)
    first.bind_model_place(True)  # this judge built its reference model on the device
    first.keep_expected(0, [("out", torch.ones(4))])
    first.keep_timing(ReferenceTiming(stats={"median": 1.0}, warnings=[], activity={}))
    sha = first.close()["sha256"]

    def reopen() -> ReferenceCache:
        return ReferenceCache.open(ReferenceReuseSpec(dir=spec.dir, key=KEY, sha256=sha))

    same = reopen()
    same.bind_model_place(True)
    assert same.expected(0, torch.device("cpu")) is not None and not same.note

    elsewhere = reopen()
    elsewhere.bind_model_place(False)  # its candidate needed the cpu: weights differ
    assert elsewhere.expected(0, torch.device("cpu")) is None
    assert elsewhere.reference_timing() is not None
    assert "built on the device" in elsewhere.note
    elsewhere.keep_expected(0, [("out", torch.zeros(4))])
    closed = elsewhere.close()
    assert closed["stored"], closed  # written again, with the cpu's outputs and place
    sha = closed["sha256"]
    cpu_again = reopen()
    cpu_again.bind_model_place(False)
    expected = cpu_again.expected(0, torch.device("cpu"))
    assert expected is not None and torch.equal(expected[0][1], torch.zeros(4))


def test_a_reused_reference_timing_brings_its_warnings(tmp_path):
    """A reference that took no measurable time on a busy cpu gives the batch's later jobs no
    speedup either: they say why, as the job that timed it did."""
    import dataclasses
    from types import SimpleNamespace

    import torch

    from kforge_worker.judge.reference_reuse import ReferenceTiming
    from kforge_worker.judge.reference_timing import time_reference
    from kforge_worker.judge.results import JobResult
    from kforge_worker.timing.stats import compute_stats

    warning = "the reference took no measurable time on the judge's clock: ..."
    stored = ReferenceTiming(
        stats=dataclasses.asdict(compute_stats([0.0, 0.0, 0.0], "cpu_wall_clock")),
        warnings=[warning],
        activity={},
        samples=[0.0, 0.0, 0.0],
    )
    reuse = SimpleNamespace(reference_timing=lambda: stored)
    result = JobResult(compiled=True)
    timed = time_reference(
        SimpleNamespace(), torch.device("cpu"), SimpleNamespace(), SimpleNamespace(), result,
        report=lambda *_: None, reuse=reuse, measure=False,
    )  # fmt: skip
    assert timed is not None and timed.reused is stored
    assert result.ref_runtime == 0.0 and warning in result.warnings
