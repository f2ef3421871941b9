"""The candidate's timing phase, run by the judge (docs/architecture.md "Judged timing").

Every timed trial gets inputs the judge makes fresh for it (the problem's own generator with a
seed of the trial's own, so no two trials, and no timed trial and correctness trial, share
inputs: a cache keyed on the inputs never hits) and writes into the trial regions, where the
candidate can read but not write them (regions.py). Its outputs are poisoned first, and after
the trial the judge counts, in its own process and before the candidate can run again, the
elements still holding the poison: an output not complete when the candidate's stream said
`done` fails the trial. The first trial and random later ones (decided before they run, told
to no one) are verified: on the GPU their outputs are compared, before the next trial's
inputs overwrite them, with the reference's outputs on the same inputs (a compare) or with
the kernel's own outputs of an untimed call on them (an evaluate).

Each trial is bracketed by the judge's clock (judged.py). On a GPU the reported times are the
candidate process's claims (CUDA events around its call in its own context, the resolution
the judge's bracket of ~0.3 ms of context switches cannot give), accepted only where their
median lies within the judge's bound: the median of (bracket - the empty trial - the copy of
returned outputs), less max(3 %, 10 us). On the cpu the reported times are the judge's own
(wall clock less its echo's empty trials); the claims are not used. The verdict on a run is
timed_verdict.py.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import torch

from kforge_worker.candidate.binding import (
    collect_outputs,
    copy_returned,
    invocation_from_plan,
    plan_invocation,
    poison_value,
)
from kforge_worker.candidate.regions import JudgeRegions, Layout, input_spans
from kforge_worker.candidate.trials import MAX_CPU_CALLS
from kforge_worker.check.compare import compare_tensors, resolve_tolerance
from kforge_worker.core.inputs import InputSet, derive_seed, seed_generators
from kforge_worker.core.spec import JobSpec
from kforge_worker.judge.correctness import call_kernel
from kforge_worker.judge.judged import Echo, EchoPart, start_echo
from kforge_worker.judge.kernels import JobKernels
from kforge_worker.judge.link import Failure
from kforge_worker.judge.results import JobResult
from kforge_worker.judge.timed_verdict import CandidateTiming, judge_run
from kforge_worker.timing.stats import TimingStats
from kforge_worker.timing.timing import flusher_for

# Timed trials whose outputs the judge verifies: the first, each later one with this
# probability (decided before it runs), at most MAX_VERIFIED so, and the last one (known only
# once the run has ended; a kernel that turns stale after a number of calls is caught there).
VERIFY_PROBABILITY = 0.25
MAX_VERIFIED = 5
# On the cpu a judged trial makes enough calls (each on its own inputs) for the judge's clock
# to see about this long, at most trials.MAX_CPU_CALLS, with at most CPU_SETS_BYTES of
# inputs and outputs in the regions.
CPU_TRIAL_MS = 2.0
CPU_SETS_BYTES = 256 << 20
# Timed trial i draws the inputs of trial TIMING_TRIAL_BASE + i (kernels.make_inputs): far from
# every correctness trial's.
TIMING_TRIAL_BASE = 1 << 20


class TimingFailed(Exception):
    """The timing phase ended the job: the result already says why."""


def output_like(kernels: JobKernels) -> list[torch.Tensor]:
    """Meta tensors shaped like the outputs the candidate returns (the reference's, or its
    own in the correctness trials): the room the regions keep for them."""
    return [torch.empty(shape, dtype=dtype, device="meta") for shape, dtype in kernels.output_specs]


# Elements compared with the poison per step of _Outputs.count: its scratch is this many
# int32 (allocated once, before the trials); an int32 sum of int32 needs no cast copy (a
# bool sum would make one of 8 bytes per element) and a chunk's count fits.
COUNT_CHUNK = 1 << 24


class _Outputs:
    """The regions' output views of a trial (declared buffers, or the places of returned
    outputs), the poison of those that start empty (an inout buffer starts with its input),
    and the per-trial count of elements still holding it.

    `count` runs in the judge's `after(n)`, enqueued while its stream waits for a `done`
    the candidate writes only once it has the `go` the judge sends next (judged.py): an
    allocation there that finds the device full makes torch give back its cached blocks,
    and that cudaFree waits for the judge's own stream, so the judge would wait for
    itself, forever (seen on an H200 with a 6.4 GB output and other jobs' judges holding
    the rest). So the comparison goes in chunks through a scratch made here, and the
    first count runs before the trials (`warm`) so that the few bytes each step's sum
    needs come from torch's cache from then on."""

    def __init__(
        self,
        views: list[tuple[str, torch.Tensor]],
        empty: list[bool],
        trials: int,
        device: torch.device,
    ) -> None:
        self.views = views
        self.poison = [poison_value(v.dtype, 1) for _, v in views]
        self.empty = [i for i, e in enumerate(empty) if e]
        # 1- and 2-byte integers and bools have no value a real output would not also hold.
        self.counted = [
            i
            for i in self.empty
            if views[i][1].dtype.is_floating_point or views[i][1].element_size() >= 4
        ]
        self.counts = torch.zeros(max(trials, 1), dtype=torch.int64, device=device)
        largest = max((views[i][1].numel() for i in self.counted), default=0)
        self.scratch = torch.empty(min(largest, COUNT_CHUNK), dtype=torch.int32, device=device)

    def poison_all(self) -> None:
        for i in self.empty:
            self.views[i][1].fill_(self.poison[i])

    def count(self, trial: int) -> None:
        if trial >= self.counts.numel():
            return
        total = self.counts[trial]
        for i in self.counted:
            flat = self.views[i][1].view(-1)  # region views are contiguous (regions.py)
            for start in range(0, flat.numel(), COUNT_CHUNK):
                part = flat[start : start + COUNT_CHUNK]
                equal = self.scratch[: part.numel()]
                torch.eq(part, self.poison[i], out=equal)
                total += equal.sum(dtype=torch.int32)

    def warm(self) -> None:
        """One count into a throwaway slot, before any trial: torch's cache then holds the
        blocks the sums need (class docstring)."""
        self.count(0)
        self.counts.zero_()

    def unwritten(self) -> list[tuple[int, int]]:
        """(trial, elements) of the trials whose outputs kept poison."""
        counts = self.counts.tolist()
        return [(t, int(c)) for t, c in enumerate(counts) if c]


def cpu_calls_per_trial(kernels: JobKernels, first: InputSet) -> int:
    """How many calls one judged trial makes on the cpu (each on its own inputs): enough for
    CPU_TRIAL_MS by the reference's fastest of a few calls here (an evaluate: by the judge's
    fastest correctness round trip with the candidate, which holds two messages besides the
    call), within MAX_CPU_CALLS and CPU_SETS_BYTES of regions."""
    walls = kernels.candidate.link.call_wall_ms
    call_ms = min(walls) if walls else CPU_TRIAL_MS
    if kernels.reference is not None:
        with contextlib.suppress(Exception):  # the reference's own timing reports a failure
            inv = kernels.bind_reference(first.clone())
            times = []
            for _ in range(5):
                start = time.perf_counter_ns()
                kernels.reference(inv.args, inv.kwargs)
                times.append((time.perf_counter_ns() - start) / 1e6)
            call_ms = min(times)
    per_set = sum(
        a.value.numel() * a.value.element_size() for a in first.args if a.is_tensor
    ) + max(kernels.output_bytes, 1)
    by_time = math.ceil(CPU_TRIAL_MS / max(call_ms, 1e-3))
    return int(max(1, min(MAX_CPU_CALLS, by_time, CPU_SETS_BYTES // per_set)))


def time_candidate(
    kernels: JobKernels,
    job: JobSpec,
    device: torch.device,
    result: JobResult,
    *,
    sets: int = 1,
    time_reference: bool = False,
) -> CandidateTiming | Failure:
    """Times the candidate with judged trials (`sets` calls per trial, each on its own
    inputs: more than one on the cpu only); on the cpu with `time_reference` the reference in
    the same trials, through the judge's echo (its `ref_stats`). A Failure when the
    candidate's call failed (the caller reports it); raises TimingFailed when a check ended
    the job (the result says why)."""
    link = kernels.candidate.link
    gpu = device.type == "cuda"
    first = kernels.make_inputs(TIMING_TRIAL_BASE)
    # An evaluate whose inputs come from the candidate's own get_inputs(): its process cannot
    # make them while it serves the trials, so a few sets are made first and rotate (it knows
    # them anyway: there is no reference, and no speedup).
    pool: list[InputSet] = []
    if kernels.get_inputs is None and kernels.defining_io is None:
        pool = [first] + [kernels.make_inputs(TIMING_TRIAL_BASE + k) for k in (1, 2, 3)]
        result.metadata["timing_inputs"] = "rotating 4 sets from the kernel's own get_inputs()"
    template = kernels.bind_candidate(first.shared())
    returned_like = output_like(kernels) if not template.outputs else []
    if not link.use_regions(template, returned_like, sets):
        result.fail(
            "worker",
            "the timing needs memory the judge shares with the candidate process, and none "
            f"could be made: {link.regions_refused}",
        )
        raise TimingFailed
    regions = link.regions
    assert regions is not None
    plan_outputs = _plan_outputs(template)
    # Each set's output views (declared buffers, or the places of returned outputs).
    set_views: list[list[tuple[str, torch.Tensor]]] = []
    empty: list[bool] = []
    for k in range(sets):
        places = regions.places(k)
        views = [(name, regions.view(places[i])) for name, i in plan_outputs]
        flags = [a.role == "output" for a in template.outputs]
        if not views:
            views = [(f"output[{j}]", v) for j, v in enumerate(regions.returned_views(k))]
            flags = [True] * len(views)
        set_views.append(views)
        empty += flags
    outputs = _Outputs(
        [v for views in set_views for v in views], empty, job.timing.max_trials, device
    )
    if gpu:
        outputs.warm()
    # The warm-up calls of the candidate run on the first trial's inputs.
    regions.load(_slot_values(template), outputs=True)
    if gpu:
        torch.cuda.synchronize(device)
    echo: CpuEcho | None = None
    if not gpu:
        echo = CpuEcho.start(kernels, regions, first, sets, time_reference)
    flusher = flusher_for(device) if gpu and job.timing.l2_flush else None
    rng = random.SystemRandom()
    staged: dict[int, list[InputSet]] = {}
    chosen: dict[int, int] = {}  # verified trial -> the set whose outputs are compared
    pending: list[int] = []  # verified trials not compared yet (GPU: at the next prepare)
    # An evaluate's verified trials, compared after the run with untimed calls (the candidate
    # process serves the trials until then): their inputs and their outputs' copies.
    deferred: list[tuple[int, int, InputSet, list[tuple[str, torch.Tensor]]]] = []
    failures: list[str] = []
    made = [0]
    last = [-1]  # the last trial that ran
    # cpu: a copy of the latest unverified trial's outputs (one set), with its inputs: the
    # regions are poisoned again before the trial ends (the echo's trials prepare them).
    latest: list[tuple[int, int, InputSet, list[tuple[str, torch.Tensor]]]] = []

    def seed(i: int, k: int) -> int:
        """The seed of trial i's call on set k: its verification runs under it too."""
        return derive_seed(job.seed, "timed", i, k, "call")

    def fresh() -> InputSet:
        made[0] += 1
        if pool:
            return pool[(made[0] - 1) % len(pool)]
        return first if made[0] == 1 else kernels.make_inputs(TIMING_TRIAL_BASE + made[0] - 1)

    def stage(i: int) -> None:
        if gpu:
            _verify_pending()
        staged.clear()
        staged[i] = [fresh() for _ in range(sets)]

    def prepare(i: int) -> None:
        if i == 0 or (len(chosen) < MAX_VERIFIED and rng.random() < VERIFY_PROBABILITY):
            chosen[i] = rng.randrange(sets)
        for k, inputs in enumerate(staged[i]):
            inv = kernels.bind_candidate(inputs.shared())
            regions.load(_slot_values(inv), outputs=True, index=k)
            if echo is not None:
                echo.load_reference(k, inputs)
        outputs.poison_all()
        if flusher is not None:
            flusher.flush()

    def after(i: int) -> None:
        outputs.count(i)
        last[0] = max(last[0], i)
        if i in chosen:
            pending.append(i)
            if not gpu:
                _verify_pending()
        elif not gpu:
            k = rng.randrange(sets)
            latest[:] = [(i, k, staged[i][k], [(n, v.clone()) for n, v in set_views[k]])]

    def _verify_pending() -> None:
        while pending:
            i = pending.pop(0)
            if gpu:
                torch.cuda.synchronize(device)
            k = chosen[i]
            views = set_views[k]
            if kernels.reference is None:
                deferred.append((i, k, staged[i][k], [(n, v.clone()) for n, v in views]))
            elif not failures:
                problem = _verify(kernels, job, staged[i][k], views, device, seed=seed(i, k))
                if problem:
                    failures.append(f"timed trial {i + 1}: {problem}")

    try:
        run = link.time(
            template,
            job.timing,
            stage=stage,
            prepare=prepare,
            after=after,
            stop=lambda: bool(failures),
            activity=gpu,
            echo=echo.process if echo is not None else None,
            seeds=lambda i: [seed(i, k) for k in range(sets)],
        )
    finally:
        if echo is not None:
            echo.close()
    if isinstance(run, Failure):
        return run
    with contextlib.suppress(KeyError):
        _verify_pending()
    if not failures and last[0] not in chosen:
        if gpu and last[0] in staged:
            # Its inputs are still staged and its outputs still in the regions.
            chosen[last[0]] = rng.randrange(sets)
            pending.append(last[0])
            _verify_pending()
        elif latest and latest[0][0] == last[0]:
            i, k, inputs, got = latest.pop()
            chosen[i] = k
            deferred.append((i, k, inputs, got))
    for i, k, inputs, got in deferred:
        problem = "" if failures else _verify(kernels, job, inputs, got, device, seed=seed(i, k))
        if problem:
            failures.append(f"timed trial {i + 1}: {problem}")
    unwritten = outputs.unwritten()
    if unwritten and not failures:
        trial, count = unwritten[0]
        failures.append(
            f"timed trial {trial + 1}: {count} output element(s) still held the poison when "
            "the kernel's stream finished (work left running, or outputs written later)"
        )
    if failures:
        message = (
            "the kernel's outputs while it was being timed are wrong: "
            + failures[0]
            + " (a kernel must do the same work in every run, timed or not)"
        )
        result.add_check("timed_runs_verified", False, message)
        result.correctness = False
        result.fail("mismatch", message)
        raise TimingFailed
    result.add_check(
        "timed_runs_verified",
        True,
        f"{len(chosen)} of {len(run.trials)} timed trial(s) verified, every trial's outputs "
        "complete; fresh inputs in every trial",
    )
    if sets > 1:
        result.metadata["timing_calls_per_trial"] = sets
    return judge_run(
        run,
        job=job,
        device=device,
        result=result,
        returned=regions.returned_views(),
        link=link,
        sets=sets,
        echo=echo.process if echo is not None else None,
    )


def per_call(stats: TimingStats, calls: int) -> TimingStats:
    """`stats` of trials of `calls` calls each, as the statistics of one call."""
    if calls <= 1:
        return stats
    k = 1.0 / calls
    return replace(
        stats,
        mean=stats.mean * k,
        std=stats.std * k,
        min=stats.min * k,
        max=stats.max * k,
        median=stats.median * k,
        percentile_5=stats.percentile_5 * k,
        percentile_95=stats.percentile_95 * k,
        percentile_99=stats.percentile_99 * k,
    )


class CpuEcho:
    """The judge's echo for one timed run on the cpu (judged.start_echo), and, with the
    reference, the regions of its own the reference's calls read in it."""

    def __init__(
        self,
        process: Echo,
        kernels: JobKernels,
        ref_regions: JudgeRegions | None,
    ) -> None:
        self.process = process
        self._kernels = kernels
        self._ref_regions = ref_regions

    @staticmethod
    def start(
        kernels: JobKernels,
        regions: JudgeRegions,
        first: InputSet,
        sets: int,
        with_reference: bool,
    ) -> CpuEcho:
        """Builds what the echo runs per set (judged.EchoPart), then forks it."""
        parts: list[EchoPart] = []
        ref_regions: JudgeRegions | None = None
        cand_returned = sum(p.nbytes for p in regions.layout.returned)
        if with_reference and kernels.reference is not None:
            ref_inv = kernels.bind_reference(first.shared())
            plan, values = plan_invocation(ref_inv)
            layout = Layout.of(plan["slots"], values)
            if not ref_inv.outputs:
                layout.add_returned(output_like(kernels))
            layout.sets = sets
            ref_regions = JudgeRegions(regions.device, layout)
            runnable = kernels.reference
            for k in range(sets):
                ref_regions.load(values, outputs=True, index=k)
                inv = invocation_from_plan(plan, ref_regions.bound(values, k))
                views = ref_regions.returned_views(k)
                spans = input_spans(ref_regions.places(k))
                parts.append(
                    EchoPart(
                        call=partial(runnable, inv.args, inv.kwargs),
                        copy_out=partial(copy_returned, inv, places=views),
                        touch=partial(ref_regions.touch, spans),
                        null_copy=_scratch_copy(cand_returned),
                    )
                )
        else:
            for k in range(sets):
                spans = input_spans(regions.places(k))
                parts.append(
                    EchoPart(
                        call=None,
                        copy_out=lambda _: None,
                        touch=partial(regions.touch, spans),
                        null_copy=_scratch_copy(cand_returned),
                    )
                )
        return CpuEcho(start_echo(parts), kernels, ref_regions)

    def load_reference(self, index: int, inputs: InputSet) -> None:
        """Writes a trial's inputs into set `index` of the reference's regions."""
        if self._ref_regions is None:
            return
        inv = self._kernels.bind_reference(inputs.shared())
        self._ref_regions.load(plan_invocation(inv)[1], outputs=True, index=index)

    def close(self) -> None:
        self.process.close()
        if self._ref_regions is not None:
            self._ref_regions.close()


def _scratch_copy(nbytes: int) -> Callable[[], None]:
    """A copy of `nbytes` (the bytes the candidate copies after each call), for the echo's
    empty trials."""
    source = torch.empty(nbytes, dtype=torch.uint8)
    target = torch.empty_like(source)

    def copy() -> None:
        if nbytes:
            target.copy_(source)

    return copy


def _plan_outputs(inv: Any) -> list[tuple[str, int]]:
    """(name, slot) of the declared outputs, in the order the plan numbers them."""
    plan, _ = plan_invocation(inv)
    names = [a.name for a in inv.outputs]
    return list(zip(names, plan["outputs"], strict=True))


def _slot_values(inv: Any) -> list[Any]:
    return plan_invocation(inv)[1]


def _verify(
    kernels: JobKernels,
    job: JobSpec,
    inputs: InputSet,
    views: list[tuple[str, torch.Tensor]],
    device: torch.device,
    *,
    seed: int,
) -> str:
    """Compares a timed trial's outputs (still in the regions) with the reference's outputs on
    its inputs, or, without a reference, with an untimed call of the kernel on them, either
    under the seed the timed call had; "" when they agree, else why not."""
    got = [(name, view.clone()) for name, view in views]
    if kernels.reference is not None:
        ref_inv = kernels.bind_reference(inputs.clone())
        seed_generators(seed, device)
        returned = call_kernel(kernels.reference, ref_inv, device)
        want = [v for _, v in collect_outputs(ref_inv, returned)]
    else:
        reply = kernels.candidate.link.call(kernels.bind_candidate(inputs.shared()), seed=seed)
        if reply.failure is not None:
            return f"an untimed call on the same inputs failed: {reply.failure.message[:500]}"
        want = [v for _, v in reply.outputs]
    if len(want) != len(got):
        return f"{len(got)} outputs, expected {len(want)}"
    for (name, g), w in zip(got, want, strict=True):
        if not isinstance(w, torch.Tensor):
            return f"output '{name}' has nothing to compare with"
        tol = resolve_tolerance(w.dtype, job.atol, job.rtol)
        c = compare_tensors(name, w.to(device), g, tol)
        if not c.passed:
            return c.describe()
    return ""
