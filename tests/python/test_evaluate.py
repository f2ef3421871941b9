"""The evaluate/compare pipeline end to end, in this process (as a child runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import worker_kernels as K
from worker_jobs import FAST_TIMING, assert_speedup_consistent, make_job, run

from kforge_worker.core.devinfo import parse_device
from kforge_worker.core.spec import parse_job
from kforge_worker.judge.evaluate import run_job

REPO = Path(__file__).resolve().parents[2]


def checks(result):
    return {c["name"]: c for c in result["checks"]}


def test_correct_triton_vadd_passes_and_is_timed(tmp_path):
    job = make_job(
        K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path, measure_performance=True
    )
    result = run(job)
    assert result["compiled"] and result["correctness"], result
    assert result["error_kind"] is None
    details = result["correctness_details"]
    assert details["trials"] == 3 and details["trials_passed"] == 3
    assert details["max_abs_error"] == 0.0 and details["numel"] == 3000
    assert [t["trial"] for t in details["per_trial"]] == [0, 1, 2]
    assert result["runtime"] > 0 and result["ref_runtime"] >= 0
    assert_speedup_consistent(result)
    stats = result["runtime_stats"]
    assert stats["method"] == "cpu_wall_clock" and stats["unit"] == "ms"
    assert stats["trials"] >= 3 and stats["median"] == result["runtime"]
    meta = result["metadata"]
    assert meta["kernel_name"] == "add_kernel" and meta["kernel_type"] == "triton"
    assert meta["ref_kernel_type"] == "torch" and meta["timing_method"] == "cpu_wall_clock"
    assert meta["seed"] == job["seed"] and meta["device"] == "cpu"
    assert [i["name"] for i in meta["inputs"]] == ["x", "y", "out", "n", "BLOCK"]
    assert checks(result)["inputs_unchanged"]["passed"]
    assert stats["spin_us"] is None and stats["enqueue_ms"] is None


def test_kernel_activity_fields_are_present_and_labelled_on_cpu(tmp_path):
    job = make_job(
        K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path, measure_performance=True
    )
    result = run(job)
    assert result["correctness"], result
    for prefix in ("", "ref_"):
        assert result[f"{prefix}kernel_time"] is None
        assert result[f"{prefix}kernels"] == []
        assert result[f"{prefix}idle_gap_ms"] is None
        assert result[f"{prefix}timing_flags"] == []
        activity = result[f"{prefix}kernel_activity"]
        assert activity["measured"] is False and activity["reason"] == "not measured on cpu"
        assert activity["kernel_time_ms"] is None and activity["kernels"] == []


def test_wrong_kernel_fails_with_max_error(tmp_path):
    result = run(
        make_job(
            K.triton_vadd(K.VADD_WRONG),
            K.torch_add_reference(),
            tmp_path=tmp_path,
            measure_performance=True,
        )
    )
    assert result["compiled"] and not result["correctness"]
    assert result["error_kind"] == "mismatch"
    details = result["correctness_details"]
    assert details["trials_passed"] == 0 and details["mismatch_count"] > 900
    assert details["max_abs_error"] > 1.0
    first = details["first_mismatch"]
    assert first["trial"] == 0 and first["output"] == "out" and len(first["index"]) == 1
    assert first["expected"] != pytest.approx(first["actual"])
    assert result["validation_error"].startswith("trial 1/3, output 'out': ")
    assert "elements differ (max abs error" in result["validation_error"]
    assert result["runtime"] == -1.0 and result["speedup"] is None  # wrong kernels are not timed


def test_unwritten_output_fails_compare(tmp_path):
    result = run(
        make_job(K.triton_vadd(K.VADD_PARTIAL), K.torch_add_reference(), tmp_path=tmp_path)
    )
    assert not result["correctness"] and result["error_kind"] == "mismatch"
    details = result["correctness_details"]
    assert details["mismatch_count"] == 500  # the poison never matches the expected values
    assert details["first_mismatch"]["index"] == [500]
    assert details["first_mismatch"]["actual"] == torch.finfo(torch.float32).max  # the poison


def test_a_large_poisoned_output_made_by_the_candidate_still_catches_unwritten_elements(
    tmp_path,
):
    # 1 MiB output buffers are not sent: the candidate fills them from the plan's `fill`
    # (binding.uniform_fill), with the judge's poison, so the unwritten half still shows.
    n = 1 << 18
    kernel = K.triton_vadd(K.VADD_PARTIAL, n=n)
    kernel["io"] = K.vadd_io(n, 1 << 14)
    result = run(make_job(kernel, K.torch_add_reference(), tmp_path=tmp_path))
    assert not result["correctness"] and result["error_kind"] == "mismatch"
    details = result["correctness_details"]
    assert details["mismatch_count"] == n // 2
    assert details["first_mismatch"]["actual"] == torch.finfo(torch.float32).max


def test_a_compare_and_an_evaluate_through_the_arena(tmp_path, monkeypatch):
    # The arena carries device tensors (arena.wants_arena, looked up by wire.send); here it
    # carries host tensors too, both ways, in every request of a job (calls, timing sets,
    # verified trial outputs).
    from kforge_worker.candidate import wire

    monkeypatch.setattr(wire, "wants_arena", lambda tensors: True)
    placed = []
    place = wire.place_in_arena

    def counted(channel, tensors):
        out = place(channel, tensors)
        placed.append(out is not None)
        return out

    monkeypatch.setattr(wire, "place_in_arena", counted)
    n = 1 << 18
    kernel = K.triton_vadd(n=n)
    kernel["io"] = K.vadd_io(n, 1 << 14)
    compared = run(
        make_job(kernel, K.torch_add_reference(), tmp_path=tmp_path / "c", measure_performance=True)
    )
    assert compared["correctness"], compared.get("validation_error")
    assert compared["runtime"] > 0 and checks(compared)["timed_runs_verified"]["passed"]
    evaluated = run(make_job(kernel, tmp_path=tmp_path / "e", measure_performance=True))
    assert evaluated["correctness"], evaluated.get("validation_error")
    # The inputs and declared outputs live in the trial regions (regions.py); whatever large
    # tensor still crossed the socket went through the arena.
    assert all(placed)


def test_a_job_without_torch_models_says_nothing_of_where_models_were_built(tmp_path):
    result = run(make_job(K.triton_vadd(), tmp_path=tmp_path))  # an evaluate: Triton only
    assert result["correctness"], result.get("validation_error")
    assert "model_device" not in result["metadata"]
    with_torch = run(make_job(K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path / "t"))
    assert with_torch["metadata"]["model_device"] == "cpu"  # the reference is a torch model


def test_unwritten_output_fails_evaluate(tmp_path):
    result = run(make_job(K.triton_vadd(K.VADD_PARTIAL), tmp_path=tmp_path))
    assert not result["correctness"] and result["error_kind"] == "mismatch"
    assert "500 of 1000 elements were never written" in result["validation_error"]
    assert "first at [500]" in result["validation_error"]
    assert not checks(result)["outputs_fully_written"]["passed"]


@pytest.mark.parametrize("with_reference", [True, False])
def test_input_mutating_kernel_faults_on_its_read_only_inputs(tmp_path, with_reference):
    # The inputs are the judge's memory, mapped read-only in the candidate process
    # (regions.py): the write faults there, whatever the candidate's harness would claim.
    ref = K.torch_add_reference() if with_reference else None
    result = run(make_job(K.triton_vadd(K.VADD_MUTATES), ref, tmp_path=tmp_path))
    assert not result["correctness"] and result["error_kind"] == "crash", result
    assert "SIGSEGV" in result["runtime_error"]
    assert "mapped read-only" in result["runtime_error"]


def _without_regions(monkeypatch):
    """No trial regions can be made (a GPU that cannot export memory): calls go through the
    wire, and the candidate process compares the inputs itself."""
    import kforge_worker.judge.link as link
    from kforge_worker.candidate.regions import RegionError

    def refuse(*_args, **_kwargs):
        raise RegionError("refused for the test")

    monkeypatch.setattr(link, "JudgeRegions", refuse)


def test_without_regions_the_candidate_process_checks_its_inputs(tmp_path, monkeypatch):
    _without_regions(monkeypatch)
    ref = K.torch_add_reference()
    result = run(make_job(K.triton_vadd(K.VADD_MUTATES), ref, tmp_path=tmp_path))
    assert not result["correctness"] and result["error_kind"] == "mismatch"
    assert "modified its input 'x'" in result["validation_error"]
    assert checks(result)["inputs_unchanged"]["passed"] is False
    job = make_job(K.triton_vadd(), ref, tmp_path=tmp_path / "t", measure_performance=True)
    timed = run(job)
    # The timing needs the regions (fresh inputs the candidate cannot write).
    assert timed["error_kind"] == "worker" and timed["runtime"] <= 0
    assert "refused for the test" in timed["runtime_error"]


def _digests_only(monkeypatch):
    """The candidate process finds no room for a copy of any input (as a 17 GB input on an
    80 GB GPU): it keeps each input's BitsDigest instead."""
    from kforge_worker.candidate import call_checks
    from kforge_worker.check.compare import bits_digest

    monkeypatch.setattr(call_checks, "_before", bits_digest)


def test_without_room_for_copies_the_candidate_compares_digests(tmp_path, monkeypatch):
    _without_regions(monkeypatch)
    _digests_only(monkeypatch)
    ref = K.torch_add_reference()
    bad = run(make_job(K.triton_vadd(K.VADD_MUTATES), ref, tmp_path=tmp_path / "bad"))
    assert "modified its input 'x'" in bad["validation_error"]
    assert checks(bad)["inputs_unchanged"]["passed"] is False
    good = run(make_job(K.triton_vadd(), ref, tmp_path=tmp_path / "good"))
    assert good["correctness"] and checks(good)["inputs_unchanged"]["passed"]


def test_the_candidate_keeps_a_digest_where_a_copy_does_not_fit():
    import kforge_worker.candidate.call_checks as call_checks
    from kforge_worker.check.compare import BitsDigest, bits_digest

    class NoRoom(torch.Tensor):
        def clone(self, *args, **kwargs):
            raise torch.OutOfMemoryError("CUDA out of memory (test)")

    x = torch.randn(8)
    kept = call_checks._before(x.as_subclass(NoRoom))
    assert isinstance(kept, BitsDigest) and kept == bits_digest(x)
    assert isinstance(call_checks._before(x), torch.Tensor)  # a copy where one fits
    with pytest.raises(ValueError):  # any other error is not a lack of room

        class Broken(torch.Tensor):
            def clone(self, *args, **kwargs):
                raise ValueError("broken")

        call_checks._before(x.as_subclass(Broken))


# After the three correctness calls it leaves its input changed by one after each call and
# takes the change back before the next (so every timed output stays right): only the input
# check catches it.
KB_CANDIDATE_MUTATES_WHEN_TIMED = K.KB_CANDIDATE.replace(
    "        out = x @ self.linear.weight.t() + self.linear.bias\n",
    "        if getattr(self, 'dirty', False):\n"
    "            x.sub_(1.0)\n"
    "        out = x @ self.linear.weight.t() + self.linear.bias\n"
    "        self.calls = getattr(self, 'calls', 0) + 1\n"
    "        self.dirty = self.calls > 3\n"
    "        if self.dirty:\n"
    "            x.add_(1.0)\n",
)


def test_a_kernel_that_writes_its_input_while_timed_faults(tmp_path):
    # Honest in the correctness trials, it writes its input (and takes the change back)
    # from then on: the timed trials' inputs are read-only too.
    assert KB_CANDIDATE_MUTATES_WHEN_TIMED != K.KB_CANDIDATE
    bad = run(
        make_job(
            K.torch_kernel(KB_CANDIDATE_MUTATES_WHEN_TIMED),
            K.torch_kernel(K.KB_REFERENCE),
            tmp_path=tmp_path,
            measure_performance=True,
        )
    )
    assert bad["error_kind"] == "crash" and bad["runtime"] <= 0, bad
    assert "mapped read-only" in bad["runtime_error"]


def _kb_candidate_out_of_memory_when_timed(times: int) -> str:
    """Raises torch's out-of-memory error on its first `times` calls after the three
    correctness calls (what a convolution's workspace on GB-sized inputs does)."""
    return K.KB_CANDIDATE.replace(
        "        out = x @ self.linear.weight.t() + self.linear.bias\n",
        "        self.calls = getattr(self, 'calls', 0) + 1\n"
        f"        if 3 < self.calls <= 3 + {times}:\n"
        "            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 8 GiB')\n"
        "        out = x @ self.linear.weight.t() + self.linear.bias\n",
    )


def test_out_of_memory_while_timed_is_the_kernels_runtime_error(tmp_path):
    kernel = K.torch_kernel(_kb_candidate_out_of_memory_when_timed(10_000))
    ref = K.torch_kernel(K.KB_REFERENCE)
    result = run(make_job(kernel, ref, tmp_path=tmp_path, measure_performance=True))
    assert result["error_kind"] == "runtime" and result["runtime"] <= 0, result
    assert "CUDA out of memory" in result["runtime_error"]


def test_inout_arguments_may_be_modified(tmp_path):
    kernel = K.triton_vadd(K.VADD_MUTATES)
    kernel["io"]["args"][0]["role"] = "inout"  # x is now an output too: zero is expected
    ref = K.torch_kernel(
        "import torch\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x, y):\n        return torch.zeros_like(x), x + y\n"
    )
    result = run(make_job(kernel, ref, tmp_path=tmp_path))
    assert result["correctness"], result.get("validation_error")


def test_kernelbench_model_vs_model_new_share_weights(tmp_path):
    job = make_job(
        K.torch_kernel(K.KB_CANDIDATE),
        K.torch_kernel(K.KB_REFERENCE),
        tmp_path=tmp_path,
        measure_performance=True,
    )
    result = run(job)
    assert result["correctness"], result.get("validation_error")
    assert result["metadata"]["input_source"] == "get_inputs"
    assert result["metadata"]["kernel_name"] == "ModelNew"
    assert result["metadata"]["model_device"] == "cpu"  # where both models were built
    assert result["ref_runtime"] > 0 and result["runtime"] > 0


@pytest.mark.parametrize("with_reference", [True, False])
def test_a_model_that_draws_random_numbers_is_judged_against_itself(tmp_path, with_reference):
    """Every timed call runs under a seed of the judge's, and so does its verification (the
    reference's call, or the kernel's untimed one): a dropout model is correct against itself,
    its timed trials verified, where unseeded timed calls read as a kernel whose timed
    outputs differ."""
    reference = K.torch_kernel(K.KB_DROPOUT) if with_reference else None
    job = make_job(
        K.torch_kernel(K.KB_DROPOUT_CANDIDATE),
        reference,
        tmp_path=tmp_path,
        measure_performance=True,
    )
    result = run(job)
    assert result["correctness"], result.get("validation_error")
    assert checks(result)["timed_runs_verified"]["passed"], checks(result)
    assert result["runtime"] > 0


def test_kernelbench_different_weights_fail(tmp_path):
    job = make_job(
        K.torch_kernel(K.KB_CANDIDATE_OTHER_WEIGHTS),
        K.torch_kernel(K.KB_REFERENCE),
        tmp_path=tmp_path,
    )
    result = run(job)
    assert not result["correctness"] and result["error_kind"] == "mismatch"
    assert "output 'output'" in result["validation_error"]


def test_triton_wrapper_vs_torch_reference(tmp_path):
    result = run(make_job(K.triton_wrapper(), K.torch_add_reference(), tmp_path=tmp_path))
    assert result["correctness"], result.get("validation_error")
    assert result["metadata"]["kernel_name"] == "triton_add"
    doubled = K.triton_wrapper()
    doubled["io"]["args"][2]["value"] = 2.0  # meta args go only to the candidate
    result = run(make_job(doubled, K.torch_add_reference(), tmp_path=tmp_path))
    assert not result["correctness"]


def test_multi_kernel_vs_torch_reference(tmp_path):
    result = run(
        make_job(K.multi_kernel(), K.torch_kernel(K.TORCH_ADD_SCALE_REF), tmp_path=tmp_path)
    )
    assert result["correctness"], result.get("validation_error")


def test_evaluate_passes_a_correct_kernel_and_times_it(tmp_path):
    result = run(make_job(K.triton_vadd(), tmp_path=tmp_path, measure_performance=True))
    assert result["correctness"] and result["runtime"] > 0
    assert result["ref_runtime"] == -1.0 and result["speedup"] is None
    names = {c["name"] for c in result["checks"] if c["passed"]}
    assert {"inputs_unchanged", "outputs_fully_written", "deterministic"} <= names


def test_evaluate_catches_nondeterminism(tmp_path):
    source = (
        K.TRITON_WRAPPER + "\n_calls = [0]\n\ndef flaky(x, y, alpha=1.0):\n"
        "    _calls[0] += 1\n    return triton_add(x, y, alpha) + _calls[0]\n"
    )
    kernel = K.triton_wrapper(source)
    kernel["metadata"]["entry_point"] = "flaky"
    result = run(make_job(kernel, tmp_path=tmp_path))
    assert not result["correctness"]
    assert "a second run on identical inputs disagrees" in result["validation_error"]


def test_lazy_tensor_subclass_output_fails(tmp_path):
    source = (
        "import torch\nclass Lazy(torch.Tensor):\n    pass\n\n"
        "def triton_add(x, y, alpha=1.0):\n    return (x + alpha * y).as_subclass(Lazy)\n"
    )
    result = run(make_job(K.triton_wrapper(source), K.torch_add_reference(), tmp_path=tmp_path))
    assert not result["correctness"] and "subclass" in result["validation_error"]
    result = run(make_job(K.triton_wrapper(source), tmp_path=tmp_path))
    assert not result["correctness"] and "subclass" in result["validation_error"]


def test_nan_output_fails(tmp_path):
    source = (
        "import torch\ndef triton_add(x, y, alpha=1.0):\n    out = x + y\n"
        "    out[3] = float('nan')\n    return out\n"
    )
    result = run(make_job(K.triton_wrapper(source), K.torch_add_reference(), tmp_path=tmp_path))
    assert not result["correctness"]
    assert result["correctness_details"]["first_mismatch"]["index"] == [3]
    assert result["correctness_details"]["max_abs_error"] == "Infinity"


def test_output_aliasing_an_input_is_flagged_not_failed(tmp_path):
    ref = K.torch_kernel(
        "import torch\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x, y):\n        return x.clone()\n"
    )
    cand = K.triton_wrapper("def triton_add(x, y, alpha=1.0):\n    return x\n")
    result = run(make_job(cand, ref, tmp_path=tmp_path))
    assert result["correctness"]
    check = checks(result)["outputs_not_aliasing_inputs"]
    assert check["passed"] is False and check["fatal"] is False
    assert any("shares memory with input 'x'" in w for w in result["warnings"])


def test_excessive_speedup_is_a_warning(tmp_path):
    slow_ref = K.torch_kernel(
        "import time, torch\nclass Model(torch.nn.Module):\n    def forward(self, x, y):\n"
        "        time.sleep(0.5)\n        return x + y\n"
    )
    # 2^24 elements: the candidate's add (10-30 ms) must stand out of the empty trial's jitter
    # on a busy cpu (2-10 ms on a loaded 2-core machine: 2^20 elements read 0 about one run in
    # four), and stay under a tenth of the reference's 500 ms call, which leaves one call per
    # judged trial (judge/timed.py). A candidate that still read 0 (the result says so) is
    # timed once more: that verdict is the cpu's, not the check's under test.
    cand = K.triton_wrapper("def triton_add(x, y, alpha=1.0):\n    return x + y\n", n=1 << 24)
    for attempt in range(2):
        result = run(make_job(cand, slow_ref, tmp_path=tmp_path, measure_performance=True))
        unmeasured = any("took no measurable time" in w for w in result["warnings"])
        if not unmeasured or attempt == 1:
            break
    assert result["correctness"]
    assert checks(result)["speedup_plausible"]["passed"] is False, result["warnings"]
    assert any("exceeds 10x" in w for w in result["warnings"])
    # Its "kernel" is torch's own add, no Triton kernel: the times stay, the speedup does not.
    assert checks(result)["launched_own_kernel"]["passed"] is False
    assert result["speedup"] is None and result["runtime_stats"]["median"] > 0


def test_progress_reports_each_phase_with_partial_results(tmp_path):
    seen = []
    job = make_job(
        K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path, measure_performance=True
    )
    run_job(parse_job(job), parse_device("cpu"), lambda p, m, partial: seen.append((p, partial)))
    phases = [p for p, _ in seen]
    assert phases == ["loading", "correctness", "timing_reference", "timing_candidate"]
    assert seen[1][1]["compiled"] is True
    # On the cpu the reference is timed beside the candidate, in the same judged trials
    # (timed.py's echo): its runtime comes with the candidate's.
    assert seen[3][1]["ref_runtime"] == -1.0


def test_timing_failure_is_a_runtime_error(tmp_path):
    source = (
        "_n = [0]\ndef triton_add(x, y, alpha=1.0):\n    _n[0] += 1\n"
        "    if _n[0] > 3:\n        raise RuntimeError('only three calls')\n    return x + y\n"
    )
    result = run(
        make_job(
            K.triton_wrapper(source),
            K.torch_add_reference(),
            tmp_path=tmp_path,
            measure_performance=True,
        )
    )
    assert result["correctness"] is True and result["error_kind"] == "runtime"
    assert "while being timed" in result["runtime_error"] and result["runtime"] == -1.0


def test_run_job_command_prints_only_the_result(tmp_path):
    job = make_job(K.triton_wrapper(K.NOISY_WRAPPER), K.torch_add_reference(), tmp_path=tmp_path)
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"type": "job", "job": job}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    proc = subprocess.run(
        [sys.executable, "-m", "kforge_worker", "run-job", str(spec), "--device", "cpu"],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["correctness"] is True
    assert b"to stderr" in proc.stderr and proc.stderr.count(b"x" * 1023) >= 5 * 1024


NOISY_REFERENCE = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x + 0.5 * torch.randn_like(x)


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
"""


def test_kernels_that_draw_random_numbers_run_under_the_same_seed(tmp_path):
    # Both kernels of a trial (and both runs of an evaluate) start from the same generator
    # state, so a kernel that samples noise as its reference does agrees with it.
    candidate = NOISY_REFERENCE.replace("class Model(", "class ModelNew(")
    result = run(
        make_job(K.torch_kernel(candidate), K.torch_kernel(NOISY_REFERENCE), tmp_path=tmp_path)
    )
    assert result["correctness"], result.get("validation_error")
    result = run(make_job(K.torch_kernel(candidate), tmp_path=tmp_path))
    assert result["correctness"], result.get("validation_error")
    different = candidate.replace("0.5 * torch.randn_like(x)", "0.5 * torch.rand_like(x)")
    result = run(
        make_job(K.torch_kernel(different), K.torch_kernel(NOISY_REFERENCE), tmp_path=tmp_path)
    )
    assert not result["correctness"]


def counting_reference(path: Path) -> str:
    """KB_REFERENCE whose get_inputs() appends a line to `path` at every call."""
    return K.KB_REFERENCE.replace(
        "def get_inputs():\n",
        f"def get_inputs():\n    open({str(path)!r}, 'a').write('call\\n')\n",
    )


def test_kernelbench_inputs_are_made_once_per_trial_and_once_for_timing(tmp_path):
    calls = tmp_path / "calls.txt"
    job = make_job(
        K.torch_kernel(K.KB_CANDIDATE),
        K.torch_kernel(counting_reference(calls)),
        tmp_path=tmp_path,
        measure_performance=True,
    )
    result = run(job)
    assert result["correctness"], result.get("validation_error")
    assert result["runtime_stats"]["trials"] >= 3
    # 3 correctness trials, the timing phase's first set, and fresh inputs for every call of
    # every timed trial, the first (warm, not counted) included; on the cpu a trial calls the
    # kernel `calls_per_trial` times and the reference runs on the same inputs.
    trials = result["runtime_stats"]["trials"]
    calls_per_trial = result["metadata"].get("timing_calls_per_trial", 1)
    assert calls.read_text().count("call") == 3 + 1 + calls_per_trial * (trials + 1)
    assert result["metadata"]["get_inputs_device"] == "cpu"
    assert "get_inputs_fallback" not in result["metadata"]


def test_io_contract_jobs_do_not_report_a_get_inputs_device(tmp_path):
    result = run(make_job(K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path))
    assert result["correctness"], result
    assert "get_inputs_device" not in result["metadata"]


def test_phases_ms_cover_the_compare_and_fit_in_its_wall_time(tmp_path):
    job = make_job(
        K.torch_kernel(K.KB_CANDIDATE),
        K.torch_kernel(K.KB_REFERENCE),
        tmp_path=tmp_path,
        measure_performance=True,
    )
    started = time.perf_counter()
    result = run(job)
    wall_ms = (time.perf_counter() - started) * 1e3
    assert result["correctness"], result.get("validation_error")
    phases = result["phases_ms"]
    assert list(phases) == ["import", "inputs", "reference", "candidate", "compare", "timing"]
    assert all(v >= 0 for v in phases.values()), phases
    assert sum(phases.values()) <= wall_ms
    # The timing phase by step (on a GPU also the profiled pass and the empty window).
    steps = result["metadata"]["timing_steps_ms"]
    assert list(steps) == ["reference", "candidate"] and all(v >= 0 for v in steps.values())
    assert sum(steps.values()) <= sum(phases.values())


def test_phases_ms_of_an_evaluate_and_of_a_failed_load(tmp_path):
    result = run(make_job(K.triton_vadd(), tmp_path=tmp_path))
    assert result["correctness"], result
    assert "reference" not in result["phases_ms"] and "timing" not in result["phases_ms"]
    assert {"import", "inputs", "candidate", "compare"} <= set(result["phases_ms"])
    result = run(make_job(K.triton_vadd(K.VADD_SYNTAX_ERROR), tmp_path=tmp_path))
    assert not result["compiled"] and list(result["phases_ms"]) == ["import"]


STALE_WHEN_TIMED = (
    K.KB_CANDIDATE.replace(
        "    def forward(self, x):\n",
        "    calls = 0\n    last = None\n\n    def forward(self, x):\n"
        "        ModelNew.calls += 1\n"
        "        if ModelNew.calls > 2 and ModelNew.last is not None:\n"
        "            time.sleep(0.02)\n"
        "            return ModelNew.last\n",
    )
    .replace("import torch\n", "import time\n\nimport torch\n", 1)
    .replace(
        "        return out.clamp_min(0.0)",
        "        ModelNew.last = out.clamp_min(0.0)\n        return ModelNew.last",
    )
)


def test_a_failed_check_of_a_timed_trial_stops_the_timing(tmp_path):
    # Honest for the correctness trial's two calls, stale from then on (the last honest
    # output, made on other inputs), so the first timed trial, always verified, fails.
    # The judge checks a timed trial's outputs before the candidate's next trial starts, and
    # a failed check ends the timing: a kernel gone stale (20 ms a call) with 400 trials
    # allowed does not run them all.
    timing = {**FAST_TIMING, "max_trials": 400, "min_trials": 400, "budget_ms": 60000.0}
    job = make_job(
        K.torch_kernel(STALE_WHEN_TIMED),
        K.torch_kernel(K.KB_REFERENCE),
        tmp_path=tmp_path,
        measure_performance=True,
        timing=timing,
        num_correct_trials=1,
    )
    result = run(job)
    assert not result["correctness"] and not checks(result)["timed_runs_verified"]["passed"]
    assert result["phases_ms"]["timing"] < 4000, result["phases_ms"]  # 400 trials: over 8 s
