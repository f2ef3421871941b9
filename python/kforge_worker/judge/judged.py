"""Judged trials: every timed call of the candidate is bracketed by the judge's own clock.

The candidate process measures its call (its claim: CUDA events, or perf_counter on the cpu),
but it runs the candidate's code, so whatever it reports can be forged. Each timed trial is
therefore also measured by the judge, in its own process, around the candidate's work
(docs/architecture.md "Judged timing"):

GPU. Two words of device memory both processes map (devmem.py): `go`, which the judge writes
and the candidate may only read, and `done`, which the candidate writes. For trial n:

    judge's stream:      prepare(n) | spin | E_start | go := n | wait done >= n | E_end | after(n)
    candidate's stream:  wait go >= n | e1 | call | e2 | copy returned outputs | done := n

`prepare` writes the trial's fresh inputs into the shared regions (regions.py), poisons the
outputs and flushes L2; `after` checks the outputs while the judge's context still holds the
GPU. The judge enqueues its part first, then sends `go {n}`; the candidate enqueues its part
and answers `enqueued`; the spin covers that round trip, so the candidate's launch is hidden
as in the rest of the timing protocol (timing.py). The device orders the two streams through
the words, so the judge's E_start..E_end bracket holds exactly: the switch to the candidate's
context and back, the candidate's events, its call, the copy of what it returned. Contexts of
two processes never run at once on a GPU (they are time-sliced), so work the candidate leaves
running past `done` runs after the judge's `after(n)` has read the outputs: it cannot help
that trial. The bracket less the judge's measurement of an empty trial (`null_ms`, measured at
warm-up while the candidate process has not loaded any user code) bounds the claim.

CPU. The judge's wall clock: it writes the fresh inputs and poisons the outputs, sends `go`,
and stops its clock at the candidate's `done`; an echo process of the judge's own (forked
before any job, it never runs user code) answers the same messages with an empty call, one
such null trial per trial, and the median of those is the null.

What the candidate sends back (`enqueued`, `done`, `timed`) is checked for shape and bounds;
its claims are only ever compared with the judge's own numbers. This module is the judge's
side; the candidate process's (its clock words and its trial loop) is trials.py.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from kforge_worker.candidate.trials import CandidateTrials
from kforge_worker.core import devmem
from kforge_worker.core.devinfo import one_cpu_thread
from kforge_worker.core.protocol import ProtocolError, StreamChannel
from kforge_worker.core.spec import TimingOptions
from kforge_worker.process import sandbox
from kforge_worker.timing.stats import stop_reason
from kforge_worker.timing.timing import (
    MAX_SPIN_GROWTHS,
    SPIN_CAP_US,
    GlobalTimerSpin,
    flusher_for,
    next_spin_us,
    spin_us_for,
)

# Null trials the judge runs at warm-up (GPU), or per timed trial (cpu, through its echo).
NULL_TRIALS = 21
# A claim may sit below the judge's view of the same trials (bracket less null, less the
# copy of returned outputs) by this fraction of that view, or by this many ms, whichever is
# larger, before the claim is refused (measured on an H200: bracket less null within 0.1 %
# of an honest claim at 2.7 ms, within 3-7 us below 50 us, docs/benchmarks.md).
ALLOWANCE_FRACTION = 0.03
ALLOWANCE_MS = 0.010
# The judge's spin before the first trial: covers one host round trip and an enqueue.
FIRST_SPIN_US = 200.0
MAX_CLAIMS = 10_000  # claims one `enqueued`/`timed` message may carry


class TrialsFailed(Exception):
    """The candidate's call failed in a timed trial (kind and message from its process)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class JudgedTrial:
    index: int
    bracket_ms: float  # the judge's measurement of the trial (bracket, or wall clock on cpu)
    claim_ms: float | None = None  # what the candidate process reported for it
    hidden: bool = True  # the candidate had enqueued its call before the device reached it
    # False for a GPU trial whose launch was not hidden while the spin could still grow: its
    # bracket holds the candidate's host time (milliseconds beside a kernel of microseconds,
    # enough to make the mean of a few trials), so it is replaced by another, as the
    # reference's are (timing.time_gpu).
    counted: bool = True


@dataclass
class JudgedRun:
    trials: list[JudgedTrial] = field(default_factory=list)
    stop_reason: str = ""
    null_ms: float = 0.0  # the judge's empty trial (warm-up on GPU, echo on cpu)
    spin_us: float = 0.0
    enqueue_ms: float = 0.0  # judge-observed median of `go` -> `enqueued`
    warmup_calls: int = 0
    warnings: list[str] = field(default_factory=list)
    activity: Any = None  # the candidate's profiled pass as it sent it (activity.py reads it)

    @property
    def unhidden(self) -> int:
        """Counted trials whose launch was not hidden."""
        return sum(1 for t in self.trials if t.counted and not t.hidden)

    def counted_trials(self) -> list[JudgedTrial]:
        """The trials the statistics take (all of them where none would be left)."""
        return [t for t in self.trials if t.counted] or list(self.trials)


# -- the GPU clock: two words and the stream operations on them (the candidate's side of it:
# trials.CandidateClock) -------------------------------------------------------------------


class JudgeClock:
    """The judge's side of the GPU clock: the `go` and `done` words (one exportable
    allocation each), its events, its spin."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.go = devmem.allocate(device, 1)
        self.done = devmem.allocate(device, 1)
        self.go.view[:4].zero_()
        self.done.view[:4].zero_()
        torch.cuda.synchronize(device)
        self.spinner = GlobalTimerSpin(device)
        self.next = 1  # the next trial number (both words only ever grow)
        self.null_ms: float | None = None
        self.null_samples: list[float] = []
        # The candidate process's own event window around nothing, as it claimed it in the
        # empty trials (its events follow the switch to its context; the judge's window
        # probe never does): what its trial times hold besides the call.
        self.null_claim_ms: float | None = None
        self.rtt_ms = 0.0  # median `go` -> `enqueued` of the empty trials

    def descriptors(self) -> list[int]:
        return [self.go.export(), self.done.export()]

    def sizes(self) -> list[int]:
        return [self.go.size, self.done.size]

    def enqueue(
        self, n: int, spin_us: float, prepare: Callable[[], None], after: Callable[[], None]
    ) -> tuple[torch.cuda.Event, torch.cuda.Event]:
        """Trial n's part on the judge's current stream (module docstring)."""
        stream = torch.cuda.current_stream(self.device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        prepare()
        self.spinner.spin(spin_us, stream)
        start.record(stream)
        devmem.stream_write_u32(stream.cuda_stream, self.go.ptr, n)
        devmem.stream_wait_u32(stream.cuda_stream, self.done.ptr, n)
        end.record(stream)
        after()
        return start, end

    def unblock(self, n: int) -> None:
        """Releases the judge's stream from its wait for trial n (the candidate failed and will
        never write `done`): `done` is written from a side stream of this context."""
        side = torch.cuda.Stream(self.device)
        devmem.stream_write_u32(side.cuda_stream, self.done.ptr, n)
        side.synchronize()


# -- the judge's side of a timed run -------------------------------------------------------


@dataclass
class JudgeSide:
    """What a timed run needs from the judge: its channel to the candidate (which must have
    started serving trials), the GPU clock or the cpu echo, and the per-trial steps."""

    channel: StreamChannel
    device: torch.device
    opts: TimingOptions
    prepare: Callable[[int], None]  # trial index -> writes its inputs, poisons its outputs
    after: Callable[[int], None]  # trial index -> checks (enqueued on the GPU after E_end)
    clock: JudgeClock | None = None
    echo: Echo | None = None
    first_spin_us: float = FIRST_SPIN_US
    # trial index -> makes its inputs, before the judge's clock runs (on the cpu `prepare`,
    # which copies them into the regions, runs inside the judge's clock: see _cpu_trial)
    stage: Callable[[int], None] = lambda _: None
    # Whether the judge has its verdict already (a failed check): no more trials then.
    stop: Callable[[], bool] = lambda: False
    # Trials run first and left out of the statistics (the first after the warm-up calls
    # read ~50 us for a 3 us kernel on an H200: a cold first trial must not make the mean).
    warm_trials: int = 1
    # trial index -> the seed of each of its calls (one per set): torch's generators get it
    # before the call, so a kernel that draws random numbers (dropout) can be checked
    # against the reference run under the same seed
    seeds: Callable[[int], list[int]] | None = None

    def go(self, index: int, n: int, **more: Any) -> dict[str, Any]:
        """The `go` of trial `index` (number n)."""
        message: dict[str, Any] = {"type": "go", "n": n, **more}
        if self.seeds is not None:
            message["seeds"] = self.seeds(index)
        return message


def run_trials(side: JudgeSide) -> JudgedRun:
    """Runs timed trials until the stop rule says so (`_stop`: the trial count and budget of
    `side.opts`, the claims' relative standard error), and ends the candidate's loop. Raises
    TrialsFailed when the candidate's call failed (after ending the loop), ProtocolError when
    it broke the protocol."""
    run = JudgedRun()
    claims: dict[int, float] = {}
    numbers: list[int] = []
    loop_start = time.perf_counter_ns()
    failure: TrialsFailed | None = None
    gpu = side.device.type == "cuda"
    spin = side.first_spin_us
    in_flight: list[tuple[JudgedTrial, torch.cuda.Event, torch.cuda.Event]] = []
    gaps: list[float] = []
    growths = 0
    replaced: set[int] = set()  # trial numbers another trial replaces (JudgedTrial.counted)
    index = 0
    while True:
        side.stage(index)
        if side.stop():
            run.stop_reason = "judge"
            break
        if gpu:
            assert side.clock is not None
            while len(in_flight) > MAX_IN_FLIGHT:  # the host stays close to the device
                _settle(in_flight, block=True)
            n = side.clock.next
            side.clock.next += 1
            start, end = side.clock.enqueue(
                n, spin, partial(side.prepare, index), partial(side.after, index)
            )
            sent = time.perf_counter_ns()
            side.channel.send(side.go(index, n))
            reply = _expect(side.channel, "enqueued", n)
            gaps.append((time.perf_counter_ns() - sent) / 1e6)
            trial = JudgedTrial(index, float("nan"), hidden=not start.query())
            in_flight.append((trial, start, end))
            _settle(in_flight, block=False)
            if not trial.hidden and growths < MAX_SPIN_GROWTHS:
                # Another trial with a longer spin replaces this one. A call that
                # synchronises with the host cannot be covered by any spin: the spin stops
                # growing (and the trials after count, their time holding host time).
                growths += 1
                spin = next_spin_us(spin, gaps[-1])
                trial.counted = False
                replaced.add(n)
        else:
            assert side.echo is not None
            n = index + 1
            # The reference's trial (through the echo) before or after the candidate's, in
            # turn, so neither side is always the one that runs first.
            ref_first = side.echo.reference and index % 2 == 1
            if ref_first:
                side.echo.ref_samples.append(_cpu_trial(side, index, n, echo=True)[0])
            bracket, reply = _cpu_trial(side, index, n)
            trial = JudgedTrial(index, bracket)
            if side.echo.reference and not ref_first:
                side.echo.ref_samples.append(_cpu_trial(side, index, n, echo=True)[0])
            null, _ = _cpu_trial(side, index, n, echo=True, null=True)
            side.echo.samples.append(null)
        run.trials.append(trial)
        numbers.append(n)
        _take_claims(reply, claims)
        error = reply.get("error")
        if isinstance(error, dict):
            failure = TrialsFailed(str(error.get("kind", "runtime")), str(error.get("message", "")))
            if gpu:
                assert side.clock is not None
                side.clock.unblock(n)
            break
        index += 1
        counted = [m for m in numbers[side.warm_trials :] if m not in replaced]
        known = [claims[m] for m in counted if m in claims]
        reason = _stop(len(counted), known, side.opts, (time.perf_counter_ns() - loop_start) / 1e6)
        if reason is not None:
            run.stop_reason = reason
            break
    side.channel.send({"type": "end"})
    if side.echo is not None:
        side.echo.channel.send({"type": "end"})
    final = side.channel.recv()
    if final is None:
        raise ProtocolError("the candidate hung up instead of ending its trials")
    if final.get("type") != "timed":
        raise _unexpected(final, "timed")
    _take_claims(final, claims)
    error = final.get("error")
    if failure is None and isinstance(error, dict):
        failure = TrialsFailed(str(error.get("kind", "runtime")), str(error.get("message", "")))
    if gpu:
        torch.cuda.synchronize(side.device)
        _settle(in_flight, block=True)
    for trial, n in zip(run.trials, numbers, strict=True):
        trial.claim_ms = claims.get(n)
    if len(run.trials) > side.warm_trials:
        del run.trials[: side.warm_trials]
        if side.echo is not None:
            del side.echo.samples[: side.warm_trials]
            del side.echo.ref_samples[: side.warm_trials]
    run.spin_us = spin
    run.enqueue_ms = statistics.median(gaps) if gaps else 0.0
    run.activity = final.get("activity")
    warnings = final.get("warnings")
    if isinstance(warnings, list):
        run.warnings = [str(w)[:2000] for w in warnings[:20]]
    run.warmup_calls = _nonnegative_int(final.get("warmup_calls"))
    if failure is not None:
        raise failure
    return run


# Trials the judge's host may enqueue ahead of the device.
MAX_IN_FLIGHT = 2


def _settle(
    in_flight: list[tuple[JudgedTrial, torch.cuda.Event, torch.cuda.Event]], *, block: bool
) -> None:
    """Reads the brackets of the trials whose end event completed (all, with `block`: the
    oldest waited for), dropping them from `in_flight`."""
    while in_flight:
        trial, start, end = in_flight[0]
        if block:
            end.synchronize()
        elif not end.query():
            return
        trial.bracket_ms = start.elapsed_time(end)
        in_flight.pop(0)
        if block:
            return


def _stop(trials: int, claims: list[float], opts: TimingOptions, elapsed_ms: float) -> str | None:
    """stats.stop_reason, with the trial count taken from the trials run (on a GPU the
    claims of the last trials arrive later than the trials); the budget never ends a run
    without one counted trial."""
    if trials < max(1, opts.min_trials):
        return None
    if trials >= opts.max_trials:
        return "max_trials"
    if elapsed_ms >= opts.budget_ms:
        return "budget"
    return stop_reason(claims, opts, 0.0) if len(claims) >= 2 else None


def _cpu_trial(
    side: JudgeSide, index: int, n: int, *, echo: bool = False, null: bool = False
) -> tuple[float, dict[str, Any]]:
    """One trial on the cpu, timed by the judge from its `go` to the candidate's (or the
    echo's) `done`. Its inputs are in the regions before the clock runs: copying them inside
    the window made the judge's view of a few-microsecond call the difference of two
    milliseconds-long brackets. A thread of the candidate's could read them before its `go`
    and work ahead; the candidate's own threads are counted and flagged
    (`no_background_threads`), and on the cpu that is the remaining gap (docs/security.md)."""
    channel = side.echo.channel if echo and side.echo is not None else side.channel
    side.prepare(index)
    start = time.perf_counter_ns()
    channel.send(side.go(index, n, null=null))
    reply = _expect(channel, "done", n)
    elapsed = (time.perf_counter_ns() - start) / 1e6
    if not echo:
        side.after(index)
    return elapsed, reply


def _expect(channel: StreamChannel, kind: str, n: int) -> dict[str, Any]:
    reply = channel.recv()
    if reply is None:
        raise ProtocolError("the candidate hung up during a timed trial")
    if reply.get("type") != kind or reply.get("n") != n:
        raise _unexpected(reply, f"{kind} for trial {n}")
    return reply


def _unexpected(reply: dict[str, Any], wanted: str) -> ProtocolError:
    """The error for a reply of the wrong type; a `fatal` one carries the candidate's own
    words on why it is ending (a claim, shortened)."""
    if reply.get("type") == "fatal":
        return ProtocolError(f"it failed: {str(reply.get('error'))[:500]}")
    return ProtocolError(f"expected {wanted!r}, got {reply.get('type')!r}")


def _take_claims(reply: dict[str, Any], claims: dict[int, float]) -> None:
    raw = reply.get("claims")
    if not isinstance(raw, dict) or len(raw) > MAX_CLAIMS:
        raise ProtocolError("claims must be an object of at most 10000 entries")
    for key, value in raw.items():
        try:
            n = int(key)
        except ValueError as e:
            raise ProtocolError(f"bad claim key {key!r}") from e
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProtocolError("a claim must be a number")
        ms = float(value)
        if math.isfinite(ms) and ms >= 0.0:
            claims[n] = ms


def _nonnegative_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


# -- the null: an empty trial as the judge measures it -------------------------------------


def measure_null_gpu(
    channel: StreamChannel, clock: JudgeClock, trials: int = NULL_TRIALS
) -> JudgedRun:
    """Empty trials with a candidate process that has loaded no user code yet (its harness is
    the judge's own code then). The judge keeps the least bracket: load from other processes
    only adds to a bracket."""
    device = clock.device
    flusher = flusher_for(device)
    channel.send({"type": "null_trials"})
    side = JudgeSide(
        channel,
        device,
        TimingOptions(
            max_trials=trials,
            min_trials=trials,
            warmup_calls=0,
            warmup_ms=0.0,
            budget_ms=1e9,
            rse_target=0.0,
            cuda_graph=False,
            l2_flush=True,
        ),
        prepare=lambda _: flusher.flush(),
        after=lambda _: None,
        clock=clock,
        warm_trials=0,
    )
    return run_trials(side)


@dataclass
class Echo:
    """The judge's echo process on the cpu (`start_echo`): a fork of the judge made for one
    timed run, after the job's reference and regions exist, that runs only trusted code:
    the candidate's own trial loop (CandidateTrials) with the reference's calls on regions of
    the reference's own (its `go`), or no call at all (its `go` with `null`)."""

    channel: StreamChannel
    pid: int
    reference: bool  # whether it runs the reference's calls
    samples: list[float] = field(default_factory=list)  # its empty trials (ms)
    ref_samples: list[float] = field(default_factory=list)  # its reference trials (ms)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.channel.send({"type": "shutdown"})
        self.channel.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


@dataclass
class EchoPart:
    """What the echo does per set of a trial: the reference's call (None: no reference), the
    copy of what it returned, its inputs read first, and the copy an empty trial makes."""

    call: Callable[[], object] | None
    copy_out: Callable[[object], None]
    touch: Callable[[], None]
    null_copy: Callable[[], None]


def start_echo(parts: list[EchoPart]) -> Echo:
    """Forks the judge's echo for one timed run on the cpu: its memory is the judge's at
    this moment (the reference, the regions' mappings, `parts`); it keeps no descriptor of
    the judge's but its end of a new socket pair."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            ours.close()
            sandbox.keep_only_fds([theirs.fileno()])  # not the judge's sockets
            _echo_main(StreamChannel(theirs), parts)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    theirs.close()
    return Echo(StreamChannel(ours), pid, reference=all(p.call is not None for p in parts))


def _echo_main(channel: StreamChannel, parts: list[EchoPart]) -> None:
    sandbox.set_parent_death_signal()
    one_cpu_thread()
    calls = [p.call for p in parts]
    trials = CandidateTrials(
        channel,
        torch.device("cpu"),
        None,
        [c for c in calls if c is not None] if all(c is not None for c in calls) else None,
        [p.copy_out for p in parts],
        touches=[p.touch for p in parts],
        null_copies=[p.null_copy for p in parts],
    )
    while True:
        message = channel.recv()
        if message is None or message.get("type") == "shutdown":
            return
        if message.get("type") == "go":
            # The first `go` of a timed run: served, with the rest of the run, by the loop.
            trials.pending_go = message
            trials.serve()


def within_bound(claim_ms: float, judged_ms: float) -> tuple[bool, float]:
    """Whether a claimed median is consistent with the judge's view of the same trials, and
    the allowance used (ms)."""
    allowance = max(ALLOWANCE_FRACTION * max(judged_ms, 0.0), ALLOWANCE_MS)
    return claim_ms + allowance >= judged_ms, allowance


def spin_for_enqueue(enqueue_ms: float) -> float:
    """The judge's spin for a candidate whose `go` -> `enqueued` took `enqueue_ms`."""
    return min(SPIN_CAP_US, spin_us_for(enqueue_ms))
