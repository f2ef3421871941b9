"""Correctness trials (docs/evaluation-protocol.md "Correctness"), judged in the judge process.

The candidate runs in its own process (candidate/server.py) and is reached through the link: the
judge builds each trial's inputs, runs the reference here, sends the candidate a copy of the
inputs with its output buffers poisoned, and compares what comes back. Nothing the candidate
does to its own process — patched torch, a rewritten harness, a forged message — can change
the expected values, the comparison or the verdict; it can only make its own answer wrong.

compare: per trial one set of pristine inputs; the reference runs on a clone; the
candidate's output buffers are filled with a poison that differs from the expected value at
every element without revealing it (one constant far from every expected value; random bits
for bool); its inputs must stay unchanged unless declared inout (the candidate process
compares them with copies or digests it made before the call and names those that changed:
`read_only_changed`).

evaluate (no reference): the kernel runs twice per trial on identical inputs, with two
different poison values in its output buffers. It must not raise, must produce plain dense
tensors, write every element of its declared outputs (an element still holding the poison
after both runs was never written), leave its inputs unchanged and agree with itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kforge_worker.candidate import binding
from kforge_worker.candidate.binding import Invocation, poison_for
from kforge_worker.candidate.loaders import Runnable
from kforge_worker.candidate.tracebacks import describe_call_failure, format_user_traceback
from kforge_worker.check.compare import (
    FUSED_DISAGREEMENTS,
    TensorComparison,
    Tolerance,
    compare_tensors,
    output_spread,
    resolve_tolerance,
    unravel_index,
)
from kforge_worker.core.devinfo import is_device_oom_text, synchronize
from kforge_worker.core.inputs import InputSet, derive_seed, summarize
from kforge_worker.core.spec import JobSpec
from kforge_worker.judge.kernels import JobKernels, RemoteError
from kforge_worker.judge.link import READ_ONLY_HINT, CallReply
from kforge_worker.judge.reference_reuse import ReferenceCache
from kforge_worker.judge.results import CorrectnessDetails, FirstMismatch, JobResult, TrialResult


def call_kernel(runnable: Runnable, inv: Invocation, device: torch.device) -> Any:
    """Runs one call to completion (device synchronised, so async errors surface here)."""
    try:
        with torch.no_grad():
            returned = runnable(inv.args, inv.kwargs)
        synchronize(device)
    except SystemExit as e:
        raise RuntimeError(f"the kernel called sys.exit({e.code!r})") from e
    return returned


def report_exception(
    result: JobResult, exc: BaseException, trial: str, *, heading: str | None = None
) -> None:
    """A kernel raised: compile errors surfacing at first launch vs runtime errors.

    A kernel that failed to compile when first launched (Triton compiles at the first call)
    did not compile: `compiled` false and the error in `compilation_error`. The kernel
    evaluation server found these while validating and reported them in validation_error,
    where its clients look, so validation_error names the error too (the first line of the
    text: describe_call_failure's summary). `heading` replaces the text's first line (which
    names the trial) when the failure was not in a trial ("Model(...) raised KeyError")."""
    if isinstance(exc, RemoteError):
        kind, detail = getattr(exc, "kind", "runtime"), exc.text
    else:
        kind, detail = describe_call_failure(exc)
    if kind == "compile":
        where = heading or f"the kernel failed to compile at its first launch, in {trial}"
        summary = detail.strip().splitlines()[0] if detail.strip() else "no message"
        result.compiled = False
        result.fail("compile", f"{where}:\n{detail}")
        result.validation_error = result.validation_error or f"{where}: {summary}"
        return
    text = f"{heading or f'the kernel raised in {trial}'}:\n{detail}"
    if is_device_oom_text(detail) and "out of memory" not in detail.lower():
        # torch's allocator failed while writing its out-of-memory message (it asks NVML,
        # which the jail does not give): say what happened.
        text += "\n(kforge: the kernel ran out of device memory)"
    if "illegal memory access" in detail:
        text += f"\n(kforge: {READ_ONLY_HINT})"
    result.fail("runtime", text)


# An fp32 output whose largest error exceeds this fraction of its largest value was most
# likely computed in reduced precision (fp16/bf16 round to ~1e-3..1e-2; fp32 to ~1e-7).
REDUCED_PRECISION_RELATIVE_ERROR = 5e-4


@dataclass
class _Trial:
    kernels: JobKernels
    job: JobSpec
    result: JobResult
    details: CorrectnessDetails
    index: int
    cache: ReferenceCache | None = None

    @property
    def call_seed(self) -> int:
        """The seed torch's generators get before each run of the trial (both kernels of a
        compare, both runs of an evaluate), so kernels that draw random numbers agree."""
        return derive_seed(self.job.seed, "trial", self.index, "call")

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


def run_correctness(
    kernels: JobKernels, job: JobSpec, result: JobResult, cache: ReferenceCache | None = None
) -> bool:
    """Runs every trial (stopping at the first failure); fills result.correctness_details.
    With a batch's `cache`, the reference's outputs of a trial it holds are not recomputed."""
    details = CorrectnessDetails(trials=job.num_correct_trials)
    result.correctness_details = details
    for index in range(job.num_correct_trials):
        trial = _Trial(kernels, job, result, details, index, cache)
        try:
            with result.phases.phase("inputs"):
                inputs = kernels.make_inputs(index)
        except Exception as e:
            result.fail("runtime", f"could not build the inputs of {trial.label}: {e}")
            return False
        if index == 0:
            result.metadata["inputs"] = summarize(inputs, kernels.defining_io)
        # Everything of a trial but its kernels' runs is the judge's comparing and checking.
        with result.phases.phase("compare"):
            passed = (
                _compare(trial, inputs)
                if kernels.reference is not None
                else _evaluate(trial, inputs)
            )
        if not passed:
            return False
        details.trials_passed += 1
    if FUSED_DISAGREEMENTS:
        key, problem = next(iter(FUSED_DISAGREEMENTS.items()))
        result.warn(
            f"the fused comparison kernel disagreed with torch's on this GPU ({key}: {problem}); "
            "those outputs were compared with torch ops instead"
        )
    checks = ["inputs_unchanged", "verdict_out_of_process"]
    if kernels.reference is None:
        checks += ["outputs_dense", "outputs_fully_written", "deterministic"]
    for name in checks:
        result.add_check(name, True)
    return True


def _inputs_unchanged(trial: _Trial, inv: Invocation, reply: CallReply) -> bool:
    """False (the trial rejected) when the call changed an input, as the candidate compared
    them (read_only_changed)."""
    changed = [a.name for a in inv.read_only if a.name in reply.read_only_changed]
    return not changed or _modified_input(trial, changed[0])


def _modified_input(trial: _Trial, name: str) -> bool:
    return trial.reject(
        f"the kernel modified its input '{name}'; inputs must stay unchanged "
        "(write to an output, or declare the argument 'inout')",
        check="inputs_unchanged",
    )


def _remote_failure(trial: _Trial, reply: CallReply) -> bool:
    assert reply.failure is not None
    report_exception(
        trial.result,
        _RemoteCallError(reply.failure.kind, reply.failure.message),
        trial.label,
    )
    return False


class _RemoteCallError(RemoteError):
    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind = kind


def _threads(trial: _Trial, started: int) -> None:
    if started > 0:
        message = f"the kernel left {started} Python thread(s) running"
        trial.result.add_check("no_background_threads", False, message, fatal=False)
        trial.result.warn(message)


def _flag_aliasing(trial: _Trial, reply: CallReply) -> None:
    for output, input_name in reply.aliases:
        message = f"output '{output}' shares memory with input '{input_name}'"
        trial.result.add_check("outputs_not_aliasing_inputs", False, message, fatal=False)
        trial.result.warn(message)


def _compare(trial: _Trial, inputs: InputSet) -> bool:
    kernels, result, device = trial.kernels, trial.result, trial.device
    assert kernels.reference is not None
    expected = trial.cache.expected(trial.index, device) if trial.cache is not None else None
    if expected is None:
        expected = _reference_outputs(trial, inputs)
        if expected is None:
            return False
        if trial.cache is not None:
            trial.cache.keep_expected(trial.index, expected)
    expected_values = [v.detach().to(device) for _, v in expected]
    kernels.note_outputs(expected_values)

    cand_inv = kernels.bind_candidate(inputs.shared())
    for i, out in enumerate(cand_inv.outputs):
        if out.role == "output" and isinstance(out.value, torch.Tensor):
            want = expected_values[i] if i < len(expected_values) else None
            poison_for(out.value, want, _tolerance(trial, out.value.dtype))
    with result.phases.phase("candidate"):
        reply = kernels.candidate.link.call(cand_inv, seed=trial.call_seed)
    if reply.failure is not None:
        return _remote_failure(trial, reply)
    _threads(trial, reply.threads_started)
    if len(reply.outputs) != len(expected):
        return trial.reject(
            f"the kernel produced {len(reply.outputs)} output(s), the reference {len(expected)}"
        )
    comparisons = []
    for (name, got), want in zip(reply.outputs, expected_values, strict=True):
        tol = _tolerance(trial, want.dtype)
        if name in reply.problems:
            comparisons.append(
                TensorComparison(
                    name, False, reply.problems[name], tol.atol, tol.rtol, want.numel()
                )
            )
        else:
            comparisons.append(compare_tensors(name, want, got, tol))
    if not trial.record(comparisons):
        for c in comparisons:
            if c.reason and not c.passed:
                result.add_check("outputs_dense", False, c.describe())
        return False
    if not _inputs_unchanged(trial, cand_inv, reply):
        return False
    _flag_aliasing(trial, reply)
    kernels.candidate.triton_launches = max(
        kernels.candidate.triton_launches, reply.kernel_launches
    )
    if reply.kernel_launches == 0 and kernels.candidate.kernel_type == "triton":
        message = (
            "the kernel launched no Triton kernel of its own (it computed its outputs some "
            "other way, e.g. with the reference's own torch ops)"
        )
        result.add_check("launched_own_kernel", False, message, fatal=False)
        result.warn(message)
    return _plausible_outputs(trial, reply.outputs, expected_values, comparisons)


def _reference_outputs(trial: _Trial, inputs: InputSet) -> list[tuple[str, torch.Tensor]] | None:
    """Runs the reference on a clone of the trial's inputs; None (and a failed result) when it
    cannot run or returns something other than tensors."""
    kernels, result, device = trial.kernels, trial.result, trial.device
    assert kernels.reference is not None
    try:
        ref_inv = kernels.bind_reference(inputs.clone())
    except ValueError as e:
        result.fail("runtime", f"cannot pass the inputs to the reference kernel: {e}")
        return None
    try:
        torch.manual_seed(trial.call_seed)
        with result.phases.phase("reference"):
            ref_returned = call_kernel(kernels.reference, ref_inv, device)
    except Exception as e:
        result.fail(
            "runtime", f"the reference kernel raised in {trial.label}:\n{format_user_traceback(e)}"
        )
        return None
    expected = binding.collect_outputs(ref_inv, ref_returned)
    if not expected or not all(isinstance(v, torch.Tensor) for _, v in expected):
        kinds = ", ".join(type(v).__name__ for _, v in expected) or "nothing"
        result.fail("runtime", f"the reference kernel returned {kinds}, expected tensors")
        return None
    return [(name, value) for name, value in expected]


def _plausible_outputs(
    trial: _Trial,
    outputs: list[tuple[str, Any]],
    expected: list[torch.Tensor],
    comparisons: list[TensorComparison],
) -> bool:
    """Honesty checks on outputs that passed the tolerance test.

    A constant output (zeros, say) for a non-constant reference is rejected even where the
    tolerances admit it: it is not the reference's function, only a loose bound around it.
    Where the tolerances admit all zeros, and where an fp32 output's errors are those of half
    precision arithmetic, the result is flagged (not failed)."""
    result = trial.result
    for (name, got), want, comparison in zip(outputs, expected, comparisons, strict=True):
        if not want.dtype.is_floating_point or want.numel() < 2:
            continue
        tol = _tolerance(trial, want.dtype)
        # The fused comparison computed the spread in the same pass; torch's did not.
        spread = comparison.spread
        if spread is None:
            spread = output_spread(want, got, tol)
        if spread.finite == 0:
            continue
        if spread.high > spread.low and spread.actual_constant:
            return trial.reject(
                f"output '{name}' is the constant {float(got.reshape(-1)[0]):.6g} everywhere, "
                "while the reference's output varies: a constant is not the kernel's function "
                "even where the tolerances admit it",
                check="outputs_not_constant",
            )
        if spread.within_zero:
            message = (
                f"output '{name}': the tolerances (atol={tol.atol:g}, rtol={tol.rtol:g}) admit an "
                "all-zero output for these inputs; pass a smaller atol to judge this kernel"
            )
            result.add_check("tolerance_discriminates", False, message, fatal=False)
            result.warn(message)
        if want.dtype == torch.float32:
            scale = spread.max_abs
            err = spread.max_error if scale > 0 else 0.0
            if scale > 0 and err / scale > REDUCED_PRECISION_RELATIVE_ERROR:
                message = (
                    f"output '{name}': max error {err:.3g} ({err / scale:.2g} of the largest "
                    "value) is what half-precision or tf32 arithmetic gives, not float32: "
                    "check that the kernel computes in the problem's precision"
                )
                result.add_check("precision_as_declared", False, message, fatal=False)
                result.warn(message)
    return True


def _tolerance(trial: _Trial, dtype: torch.dtype) -> Tolerance:
    return resolve_tolerance(dtype, trial.job.atol, trial.job.rtol)


def _evaluate(trial: _Trial, inputs: InputSet) -> bool:
    kernels, device = trial.kernels, trial.device
    runs: list[tuple[Invocation, list[tuple[str, Any]]]] = []
    for variant in (0, 1):
        inv = kernels.bind_candidate(inputs.shared())
        binding.poison(inv.output_only, variant)
        with trial.result.phases.phase("candidate"):
            reply = kernels.candidate.link.call(inv, seed=trial.call_seed)
        if reply.failure is not None:
            return _remote_failure(trial, reply)
        _threads(trial, reply.threads_started)
        kernels.candidate.triton_launches = max(
            kernels.candidate.triton_launches, reply.kernel_launches
        )
        if not reply.outputs:
            return trial.reject("the kernel returned nothing and declares no output tensors")
        for name, problem in reply.problems.items():
            return trial.reject(f"output '{name}' {problem}", check="outputs_dense")
        outputs = [(n, v.to(device)) for n, v in reply.outputs]
        kernels.note_outputs([v for _, v in outputs])
        if not _inputs_unchanged(trial, inv, reply):
            return False
        _flag_aliasing(trial, reply)
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
        comparisons.append(compare_tensors(name, first, second, _tolerance(trial, first.dtype)))
    if not trial.record(comparisons, "a second run on identical inputs disagrees: "):
        trial.result.add_check("deterministic", False, "two runs on identical inputs disagree")
        return False
    return True
