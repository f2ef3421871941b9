"""Correctness trials (DESIGN.md "Evaluation protocol"). Every trial must pass.

compare: per trial one set of pristine inputs; the reference runs first on a clone and its
outputs stay alive while the candidate runs on another clone (so the candidate cannot pick
up freed reference memory); the candidate's output buffers are poisoned with values that
differ from the expected ones everywhere; its inputs must be unchanged unless declared inout.

evaluate (no reference): the kernel runs twice per trial on identical inputs, with two
different poison values in its output buffers. It must not raise, must produce plain dense
tensors, write every element of its declared outputs (an element still holding the poison
after both runs was never written), leave its inputs unchanged and agree with itself.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch

from kforge_worker import binding
from kforge_worker.binding import Invocation
from kforge_worker.compare import (
    TensorComparison,
    compare_tensors,
    plain_tensor_problem,
    resolve_tolerance,
    same_bits,
    unravel_index,
)
from kforge_worker.devinfo import synchronize
from kforge_worker.inputs import InputSet, summarize
from kforge_worker.kernels import JobKernels
from kforge_worker.loaders import Runnable, format_user_traceback, is_build_failure
from kforge_worker.results import CorrectnessDetails, FirstMismatch, JobResult, TrialResult
from kforge_worker.spec import JobSpec


def call_kernel(runnable: Runnable, inv: Invocation, device: torch.device) -> Any:
    """Runs one call to completion (device synchronised, so async errors surface here)."""
    try:
        with torch.no_grad():
            returned = runnable(inv.args, inv.kwargs)
        synchronize(device)
    except SystemExit as e:
        raise RuntimeError(f"the kernel called sys.exit({e.code!r})") from e
    return returned


def report_exception(result: JobResult, exc: BaseException, where: str) -> None:
    """A kernel raised: compile errors surfacing at first launch vs runtime errors."""
    text = f"{where}:\n{format_user_traceback(exc)}"
    if is_build_failure(exc):
        result.compiled = False
        result.fail("compile", text)
    else:
        result.fail("runtime", text)


@dataclass
class _Trial:
    kernels: JobKernels
    job: JobSpec
    result: JobResult
    details: CorrectnessDetails
    index: int

    @property
    def label(self) -> str:
        return f"trial {self.index + 1}/{self.job.num_correct_trials}"

    @property
    def device(self) -> torch.device:
        return self.kernels.device

    def reject(self, message: str, check: str | None = None) -> bool:
        """Fails the trial as a mismatch (wrong or dishonest output)."""
        if check is not None:
            self.result.add_check(check, False, message)
        self.result.fail("mismatch", f"{self.label}: {message}")
        self.details.per_trial.append(TrialResult(self.index, False, message=message))
        return False

    def record(self, comparisons: list[TensorComparison], prefix: str = "") -> bool:
        """Adds the trial's comparisons to the details; False (and a validation error) if any
        failed."""
        d = self.details
        failed = [c for c in comparisons if not c.passed]
        trial = TrialResult(self.index, not failed)
        for c in comparisons:
            trial.max_abs_error = max(trial.max_abs_error, c.max_abs_error)
            trial.max_rel_error = max(trial.max_rel_error, c.max_rel_error)
            trial.mismatch_count += c.mismatch_count if not c.reason else c.numel
            d.numel += c.numel
            if d.atol is None:
                d.atol, d.rtol = c.atol, c.rtol
            if d.first_mismatch is None and c.first_mismatch is not None:
                d.first_mismatch = FirstMismatch.of(self.index, c.name, c.first_mismatch)
        d.max_abs_error = max(d.max_abs_error, trial.max_abs_error)
        d.max_rel_error = max(d.max_rel_error, trial.max_rel_error)
        d.mismatch_count += trial.mismatch_count
        if failed:
            trial.message = prefix + "; ".join(c.describe() for c in failed)
            self.result.fail("mismatch", f"{self.label}, {trial.message}")
        d.per_trial.append(trial)
        return not failed


def run_correctness(kernels: JobKernels, job: JobSpec, result: JobResult) -> bool:
    """Runs every trial (stopping at the first failure); fills result.correctness_details."""
    details = CorrectnessDetails(trials=job.num_correct_trials)
    result.correctness_details = details
    for index in range(job.num_correct_trials):
        trial = _Trial(kernels, job, result, details, index)
        try:
            inputs = kernels.make_inputs(index)
        except Exception as e:
            result.fail("runtime", f"could not build the inputs of {trial.label}: {e}")
            return False
        if index == 0:
            result.metadata["inputs"] = summarize(inputs, kernels.defining_io)
        passed = (
            _compare(trial, inputs) if kernels.reference is not None else _evaluate(trial, inputs)
        )
        if not passed:
            return False
        details.trials_passed += 1
    passed = ["inputs_unchanged"]
    if kernels.reference is not None:
        passed.append("outputs_are_own")
    else:
        passed += ["outputs_dense", "outputs_fully_written", "deterministic"]
    for name in passed:
        result.add_check(name, True)
    return True


def _inputs_unchanged(trial: _Trial, inv: Invocation, pristine: InputSet) -> bool:
    originals = {a.name: a.value for a in pristine.args}
    for arg in inv.read_only:
        before = originals.get(arg.name)
        if isinstance(before, torch.Tensor) and not same_bits(before, arg.value):
            return trial.reject(
                f"the kernel modified its input '{arg.name}'; inputs must stay unchanged "
                "(write to an output, or declare the argument 'inout')",
                check="inputs_unchanged",
            )
    return True


def _flag_aliasing(trial: _Trial, inv: Invocation, outputs: list[tuple[str, Any]]) -> None:
    if inv.outputs:  # declared output buffers are the harness's own tensors
        return
    inputs = {_storage(a.value): a.name for a in inv.read_only}
    for name, value in outputs:
        if isinstance(value, torch.Tensor) and _storage(value) in inputs:
            message = f"output '{name}' shares memory with input '{inputs[_storage(value)]}'"
            trial.result.add_check("outputs_not_aliasing_inputs", False, message, fatal=False)
            trial.result.warn(message)


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _compare(trial: _Trial, inputs: InputSet) -> bool:
    kernels, result, device = trial.kernels, trial.result, trial.device
    assert kernels.reference is not None
    try:
        ref_inv = kernels.bind_reference(inputs.clone())
    except ValueError as e:
        result.fail("runtime", f"cannot pass the inputs to the reference kernel: {e}")
        return False
    try:
        ref_returned = call_kernel(kernels.reference, ref_inv, device)
    except Exception as e:
        result.fail(
            "runtime", f"the reference kernel raised in {trial.label}:\n{format_user_traceback(e)}"
        )
        return False
    expected = binding.collect_outputs(ref_inv, ref_returned)
    if not expected or not all(isinstance(v, torch.Tensor) for _, v in expected):
        kinds = ", ".join(type(v).__name__ for _, v in expected) or "nothing"
        result.fail("runtime", f"the reference kernel returned {kinds}, expected tensors")
        return False
    expected_values = [v.detach().to(device) for _, v in expected]  # alive until the end

    cand_inv = kernels.bind_candidate(inputs.clone())
    for i, out in enumerate(cand_inv.outputs):
        if out.role == "output":
            binding.poison_against([out], expected_values[i : i + 1])
    threads_before = threading.active_count()
    try:
        returned = call_kernel(kernels.candidate, cand_inv, device)
    except Exception as e:
        report_exception(result, e, f"the kernel raised in {trial.label}")
        return False
    _flag_threads(trial, threads_before)
    actual = binding.collect_outputs(cand_inv, returned)
    if len(actual) != len(expected):
        return trial.reject(
            f"the kernel produced {len(actual)} output(s), the reference {len(expected)}"
        )
    ref_storages = {_storage(v) for v in expected_values}
    for name, value in actual:
        if isinstance(value, torch.Tensor) and _storage(value) in ref_storages:
            return trial.reject(
                f"output '{name}' is the reference's own output tensor", check="outputs_are_own"
            )
    comparisons = [
        compare_tensors(
            name, want, got, resolve_tolerance(want.dtype, trial.job.atol, trial.job.rtol)
        )
        for (name, got), want in zip(actual, expected_values, strict=True)
    ]
    if not trial.record(comparisons):
        return False
    if not _inputs_unchanged(trial, cand_inv, inputs):
        return False
    _flag_aliasing(trial, cand_inv, actual)
    return True


def _flag_threads(trial: _Trial, before: int) -> None:
    after = threading.active_count()
    if after > before:
        message = f"the kernel left {after - before} Python thread(s) running"
        trial.result.add_check("no_background_threads", False, message, fatal=False)
        trial.result.warn(message)


def _evaluate(trial: _Trial, inputs: InputSet) -> bool:
    kernels, result, device = trial.kernels, trial.result, trial.device
    runs: list[tuple[Invocation, list[tuple[str, Any]]]] = []
    for variant in (0, 1):
        inv = kernels.bind_candidate(inputs.clone())
        binding.poison(inv.output_only, variant)
        threads_before = threading.active_count()
        try:
            returned = call_kernel(kernels.candidate, inv, device)
        except Exception as e:
            report_exception(result, e, f"the kernel raised in {trial.label}")
            return False
        _flag_threads(trial, threads_before)
        outputs = binding.collect_outputs(inv, returned)
        if not outputs:
            return trial.reject("the kernel returned nothing and declares no output tensors")
        for name, value in outputs:
            problem = plain_tensor_problem(value, device)
            if problem is not None:
                return trial.reject(f"output '{name}' {problem}", check="outputs_dense")
        if not _inputs_unchanged(trial, inv, inputs):
            return False
        runs.append((inv, outputs))
    (inv1, outs1), (_, outs2) = runs
    if len(outs1) != len(outs2):
        return trial.reject(f"two runs returned {len(outs1)} and {len(outs2)} outputs")
    written = {a.name for a in inv1.output_only}
    for (name, first), (_, second) in zip(outs1, outs2, strict=True):
        if name not in written:
            continue
        unwritten = binding.is_poison(first, 0) & binding.is_poison(second, 1)
        count = int(unwritten.sum().item())
        if count:
            where = int(torch.argmax(unwritten.reshape(-1).to(torch.uint8)).item())
            index = unravel_index(where, first.shape)
            return trial.reject(
                f"output '{name}': {count} of {first.numel()} elements were never written "
                f"(they kept the poison value in two runs; first at {index})",
                check="outputs_fully_written",
            )
    comparisons = []
    for (name, first), (_, second) in zip(outs1, outs2, strict=True):
        tol = resolve_tolerance(first.dtype, trial.job.atol, trial.job.rtol)
        comparisons.append(compare_tensors(name, first, second, tol))
    if not trial.record(comparisons, "a second run on identical inputs disagrees: "):
        result.add_check("deterministic", False, "two runs on identical inputs disagree")
        return False
    _flag_aliasing(trial, inv1, outs1)
    return True
