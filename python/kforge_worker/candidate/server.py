"""The candidate process: the only process of a job that imports the candidate's code.

It serves the judge (judge/, through judge/link.py) over one socket and nothing else: it never
sees the reference, the expected outputs, the seeds of the correctness inputs or the
supervisor's protocol socket, and what it answers is treated as a claim (docs/architecture.md
"Threat model"). Requests and replies are wire.py messages:

    load        {spec, cache_dir, scratch_dir, model_seed, prefer_new, model_on_device} +
                values: init inputs -> loaded {ok, name, warnings, model_on_device,
                model_fallback, error?} (model_on_device: where its torch model was built)
    gen_inputs  {seed} -> inputs + values: the list get_inputs() returned (evaluate only)
    regions     {sizes} + two descriptors -> regions_ready {ok, error?}: the judge's trial
                regions (regions.py), INPUTS mapped read-only, OUTPUTS read-write
    clock       {sizes} + two descriptors -> clock_ready {ok, error?}: the judge's `go` (read
                only) and `done` words (judged.py; GPU)
    call        {plan, seed, places?} + values: the invocation's slots -> called {ok, outputs,
                in_regions, read_only_changed, error?} + values: [output values | null], [].
                With `places` the slots' tensors are views of the regions and declared
                outputs stay there (null values); without, the inputs come as copies and
                read_only_changed names those the call changed (a claim)
    trim        {} -> trimmed: torch's cached device blocks beyond arena.keep_bytes given back
                (before the judge's timing phase needs the room)
    time        {plan, places, returned, timing, activity} + values -> time_ready {ok,
                enqueue_ms, error?} after the warm-up calls; then the judge's trials: `go {n}`
                -> `enqueued {n, claims, error?}` (GPU) or `done {n, claims, error?}` (cpu),
                until `end` -> timed {ok, claims, warmup_calls, warnings, activity?} (with
                `activity` on a GPU, this process's own profiled pass, activity.py)
    null_trials {} -> the judge's empty trials (`go` ... `end`, no call) -> timed {claims}
    device_metrics  {plan, request} + values: slots -> device_metrics {ok, run, error?}: one
                call of the kernel on these inputs under Nsight Compute, run as this
                process's child (so in its jail; device_metrics.py)
    shutdown    -> the process exits
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

import torch

from kforge_worker.candidate import arena, wire
from kforge_worker.candidate.binding import (
    Invocation,
    collect_outputs,
    invocation_from_plan,
    poison_value,
    takes_io_positionally,
)

# Looked up in this module at each call, as when it was defined here.
from kforge_worker.candidate.binding import copy_returned as _copy_returned
from kforge_worker.candidate.call_checks import (
    LAUNCHES,
    aliases,
    counting_launches,
    install_launch_counter,
    snapshot,
    unchanged,
)
from kforge_worker.candidate.loaders import DeviceUnavailable, LoadError, Runnable, load_module
from kforge_worker.candidate.regions import (
    CandidateRegions,
    Place,
    RegionError,
    input_spans,
    places_from_wire,
    places_in_set,
)
from kforge_worker.candidate.tracebacks import describe_call_failure, format_user_traceback
from kforge_worker.candidate.trials import MAX_CPU_CALLS, CandidateClock, CandidateTrials
from kforge_worker.check.compare import plain_tensor_problem
from kforge_worker.core.devinfo import WorkerDevice, synchronize
from kforge_worker.core.inputs import ProblemCalls
from kforge_worker.core.protocol import ProtocolError, StreamChannel
from kforge_worker.core.spec import (
    KernelSpec,
    SpecError,
    TimingOptions,
    parse_device_metrics,
    parse_kernel,
    parse_timing,
)
from kforge_worker.timing import device_metrics
from kforge_worker.timing.activity import profile_windows
from kforge_worker.timing.activity_wire import pass_to_wire
from kforge_worker.timing.stats import compute_stats
from kforge_worker.timing.timing import (
    SPIN_CAP_US,
    TimingReport,
    measure_enqueue_ms,
    prepared_call,
    spin_us_for,
)

# Bound now, before any user code runs: a candidate that replaces these names in their
# modules does not change what the harness calls.
_perf_counter_ns = time.perf_counter_ns
_active_count = threading.active_count
_send = wire.send
_receive = wire.receive


class Candidate:
    def __init__(self, channel: StreamChannel, device: WorkerDevice, budget_bytes: int) -> None:
        self.channel = channel
        self.device = device
        self.tdev = device.torch_device()
        self.budget = budget_bytes
        self.runnable: Runnable | None = None
        self.module: ModuleType | None = None
        self.scratch = os.getcwd()
        # How the kernel was loaded (the `load` request and its init inputs): a replay under
        # Nsight Compute builds it again the same way.
        self.loaded_as: dict[str, Any] = {}
        # The module's get_inputs()/get_init_inputs(), on the device unless they fell back.
        self.problem_calls = ProblemCalls(self.tdev)
        self.compile_ms = 0.0  # NVRTC build time of a `cuda` kernel inside `load`
        # Why the torch model was built on the cpu when the judge asked for the device.
        self.model_fallback: str | None = None
        # The judge's trial regions (inputs read-only) and clock words, once it sent them.
        self.regions: CandidateRegions | None = None
        self.clock: CandidateClock | None = None

    # -- requests -------------------------------------------------------------------------

    def serve(self) -> None:
        while True:
            try:
                message, values = _receive(self.channel, self.tdev, self.budget)
            except ProtocolError:
                return
            kind = message.get("type")
            if kind == "shutdown":
                return
            handler = {
                "load": self.load,
                "gen_inputs": self.gen_inputs,
                "call": self.call,
                "time": self.time,
                "trim": self.trim,
                "regions": self.map_regions,
                "clock": self.map_clock,
                "null_trials": self.null_trials,
                "device_metrics": self.device_metrics,
            }.get(str(kind))
            if handler is None:
                _send(self.channel, {"type": "error", "error": f"unknown request {kind!r}"})
                continue
            handler(message, values)

    def _reply_error(self, reply: str, kind: str, message: str) -> None:
        _send(self.channel, self._error_reply(reply, kind, message))

    def _error_reply(self, reply: str, kind: str, message: str) -> dict[str, Any]:
        return {
            "type": reply,
            "ok": False,
            "error": {"kind": kind, "message": message},
            "compile_ms": self.compile_ms,
            "inputs_fallback": self.problem_calls.fallback,
        }

    def load(self, message: dict[str, Any], init_inputs: Any) -> None:
        try:
            kernel = parse_kernel(message.get("spec"), "candidate")
            scratch = str(message.get("scratch_dir") or os.getcwd())
            cache = str(message.get("cache_dir") or "")
            self.scratch = scratch
            module = load_module(kernel, "candidate", scratch, cache)
            self.module = module
            init = list(init_inputs) if isinstance(init_inputs, list | tuple) else None
            self.loaded_as = {
                "kernel": message.get("spec"),
                "cache_dir": cache,
                "model_seed": int(message.get("model_seed", 0)),
                "init_seed": int(message.get("init_seed", 0)),
                "prefer_new": bool(message.get("prefer_new", True)),
                "init_inputs": init,
            }
            started = time.perf_counter_ns()
            try:
                self.runnable = self._build(kernel, module, message, init, cache)
            finally:
                if kernel.kernel_type == "cuda":
                    self.compile_ms = (time.perf_counter_ns() - started) / 1e6
        except LoadError as e:
            self._reply_error("loaded", "compile", e.details)
            return
        except DeviceUnavailable as e:
            self._reply_error("loaded", "device", str(e))
            return
        except Exception as e:
            cause = getattr(e, "cause", e)
            self._reply_error("loaded", "setup", f"{e}:\n{format_user_traceback(cause)}")
            return
        _send(
            self.channel,
            {
                "type": "loaded",
                "ok": True,
                "name": self.runnable.name,
                "passes_outputs": self.runnable.passes_outputs,
                "has_get_inputs": callable(getattr(self.module, "get_inputs", None)),
                "warnings": list(self.runnable.warnings),
                "compile_ms": self.compile_ms,
                "inputs_fallback": self.problem_calls.fallback,
                "model_on_device": self.loaded_as["model_on_device"],
                "model_fallback": self.model_fallback,
                "io_positional": takes_io_positionally(
                    self.runnable.signature, kernel.io, tensors_only=False
                ),
            },
        )

    def _build(
        self,
        kernel: KernelSpec,
        module: ModuleType,
        message: dict[str, Any],
        init: list[Any] | None,
        cache: str,
    ) -> Runnable:
        """The kernel built where the judge built the reference's model (kernels.py); on the
        cpu when the device refuses the model's constructor (the reply says why)."""
        from kforge_worker.candidate.build import ModelOnDeviceError, build_runnable

        def build(on_device: bool) -> Runnable:
            self.loaded_as["model_on_device"] = on_device
            return build_runnable(
                kernel,
                module,
                init,
                int(message.get("model_seed", 0)),
                prefer_new=bool(message.get("prefer_new", True)),
                device=self.tdev,
                cache_dir=cache,
                init_seed=int(message.get("init_seed", 0)),
                calls=self.problem_calls,
                model_on_device=on_device,
            )

        self.model_fallback = None
        try:
            return build(message.get("model_on_device") is True)
        except ModelOnDeviceError as e:
            self.model_fallback = str(e)
            return build(False)

    def gen_inputs(self, message: dict[str, Any], _: Any) -> None:
        """get_inputs() of the candidate's own module (an evaluate without a reference)."""
        fn = getattr(self.module, "get_inputs", None)
        if not callable(fn):
            self._reply_error("inputs", "setup", "the kernel defines no get_inputs()")
            return
        try:
            values = self.problem_calls.call(fn, int(message.get("seed", 0)), "get_inputs()")
        except Exception as e:
            self._reply_error(
                "inputs", "runtime", f"get_inputs() raised:\n{format_user_traceback(e)}"
            )
            return
        if not isinstance(values, list | tuple):
            self._reply_error(
                "inputs", "runtime", f"get_inputs() must return a list, got {type(values).__name__}"
            )
            return
        reply = {"type": "inputs", "ok": True, "inputs_fallback": self.problem_calls.fallback}
        _send(self.channel, reply, list(values))

    def _invocation(self, plan: dict[str, Any], slots: Any, places: Any = None) -> Invocation:
        """The call's invocation: with `places`, its tensors are views of the judge's regions
        (inputs read-only) and `slots` carries only the rest."""
        if places is not None:
            if self.regions is None:
                raise ProtocolError("a call with places before any regions")
            if not isinstance(slots, list):
                raise ProtocolError("slot values must be a list")
            bound = places_from_wire(places, self.regions.sizes)
            slots = self.regions.bind(bound, slots)
        return invocation_from_plan(plan, slots, self.tdev)

    def map_regions(self, message: dict[str, Any], _: Any) -> None:
        """The judge's regions: two descriptors follow the frame (regions.py)."""
        try:
            fds = wire.receive_fds(self.channel, 2)
            sizes = message.get("sizes")
            if not isinstance(sizes, list):
                raise RegionError("sizes must be a list")
            if self.regions is not None:
                self.regions.close()
                self.regions = None
            self.regions = CandidateRegions(self.tdev, fds, [int(v) for v in sizes])
        except (RegionError, ProtocolError, OSError, ValueError, RuntimeError) as e:
            self._reply_error("regions_ready", "worker", f"cannot map the judge's regions: {e}")
            return
        _send(self.channel, {"type": "regions_ready", "ok": True})

    def map_clock(self, message: dict[str, Any], _: Any) -> None:
        """The judge's clock words (judged.py): two descriptors follow the frame."""
        try:
            fds = wire.receive_fds(self.channel, 2)
            sizes = message.get("sizes")
            if not isinstance(sizes, list):
                raise ProtocolError("sizes must be a list")
            self.clock = CandidateClock(self.tdev, fds, [int(v) for v in sizes])
        except (ProtocolError, OSError, ValueError, RuntimeError) as e:
            self._reply_error("clock_ready", "worker", f"cannot map the judge's clock: {e}")
            return
        _send(self.channel, {"type": "clock_ready", "ok": True})

    def null_trials(self, message: dict[str, Any], _: Any) -> None:
        """The judge's empty trials (before any user code is loaded: judged.measure_null_gpu)."""
        del message
        trials = CandidateTrials(self.channel, self.tdev, self.clock, None, [lambda _: None])
        claims = trials.serve()
        _send(self.channel, {"type": "timed", "ok": True, "claims": claims})

    def _run_once(self, inv: Invocation) -> Any:
        assert self.runnable is not None
        try:
            with torch.no_grad():
                returned = self.runnable(inv.args, inv.kwargs)
            synchronize(self.tdev)
        except SystemExit as e:
            raise RuntimeError(f"the kernel called sys.exit({e.code!r})") from e
        return returned

    def _outputs(self, inv: Invocation, returned: Any) -> tuple[list[dict[str, Any]], list[Any]]:
        described: list[dict[str, Any]] = []
        values: list[Any] = []
        for name, value in collect_outputs(inv, returned):
            problem = plain_tensor_problem(value, self.tdev)
            described.append({"name": name, "problem": problem})
            values.append(value if problem is None else None)
        return described, values

    def call(self, message: dict[str, Any], slots: Any) -> None:
        """One call. With `places` (the judge's regions), the inputs are read-only views of
        the judge's memory, so nothing here needs to check them (a write faults), and
        declared output buffers are the judge's too: only returned outputs travel back.
        Without (no regions: tests, a GPU that cannot share memory), inputs arrive as copies
        and this process compares them with copies made before the call (a claim)."""
        if self.runnable is None:
            self._reply_error("called", "worker", "call before load")
            return
        places = message.get("places")
        try:
            inv = self._invocation(message["plan"], slots, places)
        except (KeyError, TypeError, ValueError, ProtocolError) as e:
            self._reply_error("called", "worker", f"bad call plan: {e}")
            return
        seed = message.get("seed")
        if isinstance(seed, int):
            torch.manual_seed(seed)  # also seeds every CUDA device's generator
        before = snapshot(inv.read_only) if places is None else []
        threads_before = _active_count()
        launches_before = LAUNCHES[0]
        try:
            with counting_launches():
                returned = self._run_once(inv)
        except Exception as e:
            self._reply_error("called", *describe_call_failure(e))
            return
        threads_after = _active_count()
        described, values = self._outputs(inv, returned)
        if places is not None and inv.outputs:
            values = [None] * len(values)  # the judge reads its own buffers
        header: dict[str, Any] = {
            "type": "called",
            "ok": True,
            "outputs": described,
            "threads_started": max(0, threads_after - threads_before),
            "aliases": aliases(inv, described, values),
            "kernel_launches": LAUNCHES[0] - launches_before,
            "in_regions": places is not None and bool(inv.outputs),
        }
        header["read_only_changed"] = [
            a.name
            for a, old in zip(inv.read_only, before, strict=False)
            if old is not None and not unchanged(old, a.value)
        ]
        _send(self.channel, header, [values, []])

    def trim(self, message: dict[str, Any], values: Any) -> None:
        """Gives back torch's cached blocks beyond arena.keep_bytes (link.trim)."""
        del message, values
        arena.release_cached(self.tdev)
        _send(self.channel, {"type": "trimmed"})

    def time(self, message: dict[str, Any], slots: Any) -> None:
        """The judged timing (judged.py): warms the call up on the judge's regions, answers
        `time_ready`, then runs the judge's trials (`go` ... `end`) and answers `timed` with
        the claims not sent yet and, on a GPU when asked, a profiled pass of its own."""
        if self.runnable is None:
            self._reply_error("time_ready", "worker", "time before load")
            return
        try:
            plan = message["plan"]
            opts = parse_timing(message.get("timing") or {}, "timing")
            if self.regions is None:
                raise ProtocolError("time before any regions")
            sizes = self.regions.sizes
            places = places_from_wire(message.get("places"), sizes)
            returned = places_from_wire(message.get("returned") or [], sizes)
            sets = int(message.get("sets", 1))
            strides = [int(v) for v in message.get("strides") or sizes]
            if not 1 <= sets <= MAX_CPU_CALLS or (sets > 1 and self.tdev.type == "cuda"):
                raise ValueError(f"bad number of sets {sets}")
            invs = [
                self._invocation(
                    plan, slots, _wire_places(places_in_set(places, k, strides, sizes))
                )
                for k in range(sets)
            ]
            outs = [
                [self.regions.view(p.in_set(k, strides, sizes)) for p in returned]
                for k in range(sets)
            ]
        except (KeyError, TypeError, ValueError, ProtocolError, SpecError) as e:
            self._reply_error("time_ready", "worker", f"bad timing request: {e}")
            return
        runnable = self.runnable
        inv = invs[0]

        def call_of(one: Invocation) -> Callable[[], object]:
            return lambda: runnable(one.args, one.kwargs)

        def copy_of(one: Invocation, views: list[torch.Tensor]) -> Callable[[object], None]:
            return lambda value: _copy_returned(one, value, views)

        call = call_of(inv)
        copy_outs = [copy_of(one, views) for one, views in zip(invs, outs, strict=True)]

        warnings: list[str] = []
        try:
            with torch.no_grad():
                warmups, target = prepared_call(call, opts, self.tdev, warnings)
                enqueue_ms = (
                    measure_enqueue_ms(target, self.tdev) if self.tdev.type == "cuda" else 0.0
                )
        except Exception as e:
            self._reply_error("time_ready", *describe_call_failure(e))
            return
        _send(self.channel, {"type": "time_ready", "ok": True, "enqueue_ms": enqueue_ms})
        calls = [target] + [call_of(one) for one in invs[1:]]
        touches: list[Callable[[], None]] | None = None
        if self.tdev.type != "cuda":
            regions = self.regions
            set_spans = [input_spans(places_in_set(places, k, strides, sizes)) for k in range(sets)]
            touches = [partial(regions.touch, spans) for spans in set_spans]
        trials = CandidateTrials(
            self.channel, self.tdev, self.clock, calls, copy_outs, touches=touches
        )
        error: dict[str, str] | None = None
        try:
            with torch.no_grad():
                claims = trials.serve()
        except RuntimeError as e:  # an asynchronous error of the kernel, found at the end
            claims, error = {}, {"kind": "runtime", "message": format_user_traceback(e)}
        reply: dict[str, Any] = {
            "type": "timed",
            "ok": error is None,
            "claims": claims,
            "warmup_calls": warmups,
            "warnings": warnings,
        }
        if error is not None:
            reply["error"] = error
        elif message.get("activity") and self.tdev.type == "cuda":
            reply["activity"] = self._profiled(target, opts, enqueue_ms, inv)
        arena.release_cached(self.tdev)
        _send(self.channel, reply)

    def _profiled(
        self, target: Callable[[], object], opts: TimingOptions, enqueue_ms: float, inv: Invocation
    ) -> dict[str, Any]:
        """This process's own profiled pass over its call (activity.py): a claim, summarized
        and cross-checked by the judge."""
        poison = [
            (a.value, poison_value(a.value.dtype, 0))
            for a in inv.output_only
            if isinstance(a.value, torch.Tensor)
        ]

        def prepare(_: int) -> None:
            for tensor, value in poison:
                tensor.fill_(value)

        # Under the profiler every launch and range costs more host time than in the timed
        # trials, so the spin covers four times the measured enqueue (5 trials: cheap).
        spin = min(SPIN_CAP_US, 4.0 * spin_us_for(enqueue_ms) + 50.0)
        report = TimingReport(compute_stats([0.0], "cuda_event"), call=target)
        report.stats = dataclasses.replace(report.stats, enqueue_ms=enqueue_ms, spin_us=spin)
        with torch.no_grad():
            profiled = profile_windows(
                report, self.tdev, l2_flush=opts.l2_flush, trace_dir=self.scratch, prepare=prepare
            )
        return {"error": profiled} if isinstance(profiled, str) else pass_to_wire(profiled)

    def device_metrics(self, message: dict[str, Any], slots: Any) -> None:
        """One call under Nsight Compute (device_metrics.py), as this process's child."""
        if self.runnable is None:
            self._reply_error("device_metrics", "worker", "device_metrics before load")
            return
        try:
            request = parse_device_metrics(message.get("request"), "request")
            if request is None:
                raise SpecError("request: is required")
            plan = message["plan"]
            invocation_from_plan(plan, slots, self.tdev)  # a plan that does not bind fails here
        except (SpecError, KeyError, TypeError, ValueError, ProtocolError) as e:
            self._reply_error("device_metrics", "worker", f"bad device_metrics request: {e}")
            return
        bundle = device_metrics.ReplayBundle(
            role="candidate",
            kernel=self.loaded_as.get("kernel"),
            cache_dir=str(self.loaded_as.get("cache_dir", "")),
            model_seed=int(self.loaded_as.get("model_seed", 0)),
            init_seed=int(self.loaded_as.get("init_seed", 0)),
            prefer_new=bool(self.loaded_as.get("prefer_new", True)),
            init_inputs=self.loaded_as.get("init_inputs"),
            model_on_device=self.loaded_as.get("model_on_device") is True,
            plan=plan,
            slots=list(slots),
            device="cuda" if self.tdev.type == "cuda" else "cpu",
        )
        run = device_metrics.collect(request, bundle, self.scratch)
        _send(self.channel, {"type": "device_metrics", "ok": True, "run": run})


def _wire_places(places: list[Any]) -> list[Any]:
    """Checked places back in their wire form (what _invocation reads)."""
    out: list[Any] = []
    for p in places:
        if isinstance(p, Place):
            out.append(p.to_wire())
        elif isinstance(p, list):
            out.append([None if q is None else q.to_wire() for q in p])
        else:
            out.append(None)
    return out


def serve(channel: StreamChannel, device: WorkerDevice, budget_bytes: int) -> int:
    """Runs the candidate's request loop; returns the process exit code."""
    install_launch_counter()
    try:
        Candidate(channel, device, budget_bytes).serve()
    except (ProtocolError, OSError) as e:
        print(f"kforge_worker candidate: link to the judge failed: {e}", file=sys.stderr)
        return 1
    except BaseException as e:
        traceback.print_exc()
        # Best effort: the judge's error then says why (out of device memory, say), where the
        # jail keeps no stderr.
        with contextlib.suppress(Exception):
            channel.send({"type": "fatal", "error": f"{type(e).__name__}: {str(e)[:500]}"})
        return 70
    return 0
