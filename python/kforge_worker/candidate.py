"""The candidate process: the only process of a job that imports the candidate's code.

It serves the judge (judge.py, through link.py) over one socket and nothing else: it never
sees the reference, the expected outputs, the seeds of the correctness inputs or the
supervisor's protocol socket, and what it answers is treated as a claim (docs/architecture.md
"Threat model"). Requests and replies are wire.py messages:

    load        {spec, cache_dir, scratch_dir, model_seed, prefer_new, model_on_device} +
                values: init inputs -> loaded {ok, name, warnings, model_on_device,
                model_fallback, error?} (model_on_device: where its torch model was built)
    gen_inputs  {seed} -> inputs + values: the list get_inputs() returned (evaluate only)
    call        {plan} + values: the invocation's slots -> called {ok, outputs,
                read_only_changed, error?} + values: [output values | null], [] (the inputs
                the call changed, found here against copies or digests made before it)
    trim        {} -> trimmed: torch's cached device blocks beyond wire.keep_bytes given back
                (before the judge's timing phase needs the room)
    time        {plan, timing, activity} + values: [slots per input set] -> time_started
                (the sets are received: the judge frees its arena), then a `trial` per
                timed trial, each answered by the judge's `trial_ack` {verify, stop} (verify:
                send `trial_outputs`); then timed {ok, stats, warnings, stream_skew,
                launch_not_hidden, activity?, error?}; with `activity` (a GPU), after the
                timed trials a profiled pass (activity.py) whose raw windows are the reply's
                `activity` (or {error})
    device_metrics  {plan, request} + values: slots -> device_metrics {ok, run, error?}: one
                call of the kernel on these inputs under Nsight Compute, run as this
                process's child (so in its jail; device_metrics.py)
    shutdown    -> the process exits
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from dataclasses import asdict
from types import ModuleType
from typing import Any

import torch

from kforge_worker import device_metrics, wire
from kforge_worker.activity import pass_to_wire, profile_windows
from kforge_worker.binding import Invocation, poison_value, timing_rotation
from kforge_worker.compare import BitsDigest, bits_digest, plain_tensor_problem, same_bits
from kforge_worker.devinfo import WorkerDevice, is_device_oom, synchronize
from kforge_worker.inputs import BoundArg, ProblemCalls
from kforge_worker.loaders import (
    DeviceUnavailable,
    LoadError,
    Runnable,
    format_user_traceback,
    is_build_failure,
    load_module,
)
from kforge_worker.protocol import ProtocolError, StreamChannel
from kforge_worker.spec import (
    KernelSpec,
    SpecError,
    parse_device_metrics,
    parse_kernel,
    parse_timing,
)
from kforge_worker.timing import TrialSample, time_cpu, time_gpu

# Triton launches in this process (a launch-enter hook installed before any user code).
_LAUNCHES = [0]


def _count_launch(*_: Any) -> None:
    _LAUNCHES[0] += 1


def install_launch_counter() -> None:
    """Counts Triton kernel launches of the interpreter (GPU launches are counted by a
    launch hook, only around correctness calls: see counting_launches)."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return
    run = InterpretedFunction.run

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        _LAUNCHES[0] += 1
        return run(self, *args, **kwargs)

    InterpretedFunction.run = counted  # type: ignore[method-assign]


class counting_launches:
    """Counts GPU Triton launches inside the block (the hook costs host time per launch, so
    it is never on while timing)."""

    def __enter__(self) -> None:
        try:
            import triton

            triton.knobs.runtime.launch_enter_hook.add(_count_launch)
        except (ImportError, AttributeError):
            pass

    def __exit__(self, *exc: object) -> None:
        try:
            import triton

            triton.knobs.runtime.launch_enter_hook.remove(_count_launch)
        except (ImportError, AttributeError):
            pass


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
            self.module = load_module(kernel, "candidate", scratch, cache)
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
                self.runnable = self._build(kernel, message, init, cache)
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
            },
        )

    def _build(
        self, kernel: KernelSpec, message: dict[str, Any], init: list[Any] | None, cache: str
    ) -> Runnable:
        """The kernel built where the judge built the reference's model (kernels.py); on the
        cpu when the device refuses the model's constructor (the reply says why)."""
        from kforge_worker.kernels import ModelOnDeviceError, build_runnable

        def build(on_device: bool) -> Runnable:
            self.loaded_as["model_on_device"] = on_device
            return build_runnable(
                kernel,
                self.module,
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

    def _invocation(self, plan: dict[str, Any], slots: Any) -> Invocation:
        return invocation_from_plan(plan, slots, self.tdev)

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
        from kforge_worker.binding import collect_outputs

        described: list[dict[str, Any]] = []
        values: list[Any] = []
        for name, value in collect_outputs(inv, returned):
            problem = plain_tensor_problem(value, self.tdev)
            described.append({"name": name, "problem": problem})
            values.append(value if problem is None else None)
        return described, values

    def call(self, message: dict[str, Any], slots: Any) -> None:
        if self.runnable is None:
            self._reply_error("called", "worker", "call before load")
            return
        try:
            inv = self._invocation(message["plan"], slots)
        except (KeyError, TypeError, ValueError, ProtocolError) as e:
            self._reply_error("called", "worker", f"bad call plan: {e}")
            return
        seed = message.get("seed")
        if isinstance(seed, int):
            torch.manual_seed(seed)  # also seeds every CUDA device's generator
        before = _snapshot(inv.read_only)
        threads_before = _active_count()
        launches_before = _LAUNCHES[0]
        try:
            with counting_launches():
                returned = self._run_once(inv)
        except Exception as e:
            kind = "compile" if is_build_failure(e) else "runtime"
            self._reply_error("called", kind, format_user_traceback(e))
            return
        threads_after = _active_count()
        described, values = self._outputs(inv, returned)
        header: dict[str, Any] = {
            "type": "called",
            "ok": True,
            "outputs": described,
            "threads_started": max(0, threads_after - threads_before),
            "aliases": _aliases(inv, described, values),
            "kernel_launches": _LAUNCHES[0] - launches_before,
        }
        header["read_only_changed"] = [
            a.name
            for a, old in zip(inv.read_only, before, strict=True)
            if old is not None and not _unchanged(old, a.value)
        ]
        _send(self.channel, header, [values, []])

    def trim(self, message: dict[str, Any], values: Any) -> None:
        """Gives back torch's cached blocks beyond wire.keep_bytes (link.trim)."""
        del message, values
        wire.release_cached(self.tdev)
        _send(self.channel, {"type": "trimmed"})

    def time(self, message: dict[str, Any], sets: Any) -> None:
        """Times the kernel on input sets the judge sent, in turn: before each trial the next
        set's values are copied into the same input buffers (outside the timed window), so a
        kernel that caches its output by buffer sees different data every trial. The reply
        goes out once this process has let go of the sets and given back what its allocator
        caches beyond wire.keep_bytes (the judge's steps after the timing need the room)."""
        if self.runnable is None:
            self._reply_error("timed", "worker", "time before load")
            return
        # This process's cache went at the judge's `trim` (or at the end of a timing that
        # failed). The sets are copied out of the judge's arena: on this message the judge
        # gives a single-use one back, before this process's copies and warm-up calls need
        # the room.
        _send(self.channel, {"type": "time_started"})
        reply = self._timed(message, sets)
        if isinstance(sets, list):
            sets.clear()
        wire.release_cached(self.tdev)
        _send(self.channel, reply)

    def _timed(self, message: dict[str, Any], sets: Any) -> dict[str, Any]:
        """The `timed` reply. With several sets every rotating input is copied in before each
        trial; with one set only an inout one is restored (from a copy made here), and a
        read-only input is left alone and compared, by its digest, before the first timed
        trial and after the last: it must not change (no copy of a GB-sized input is needed,
        and the judge's empty trials copy exactly what this loop copies)."""
        try:
            plan = message["plan"]
            if not isinstance(sets, list) or not sets:
                raise ValueError("no input sets")
            inv = self._invocation(plan, sets[0])
            opts = parse_timing(message.get("timing") or {}, "timing")
            live = list(sets[0])
            restored, unchanged = timing_rotation(plan["slots"], sets[0], len(sets))
            # The kernel runs on set 0's buffers (`live`), so only set 0 needs a pristine
            # copy; the other sets are never handed to it.
            pristine = [[s[i] for i in restored] for s in sets]
            pristine[0] = [value.clone() for value in pristine[0]]
            digests = {i: bits_digest(live[i]) for i in unchanged}
        except Exception as e:
            return self._error_reply("timed", "worker", f"bad timing request: {e}")
        assert self.runnable is not None
        runnable = self.runnable
        poison = [
            (a.value, poison_value(a.value.dtype, 0))
            for a in inv.output_only
            if isinstance(a.value, torch.Tensor)
        ]
        stop_requested = False
        last: list[Any] = [None]
        trial = [0]

        def call() -> object:
            last[0] = runnable(inv.args, inv.kwargs)
            return last[0]

        def before_trial() -> None:
            # Outside the timed window: every trial starts from the next input set and from
            # poisoned outputs, so a trial that skips the work or returns an earlier answer is
            # caught when the judge verifies it.
            values = pristine[trial[0] % len(pristine)]
            for i, value in zip(restored, values, strict=True):
                live[i].copy_(value)
            trial[0] += 1
            for tensor, value in poison:
                tensor.fill_(value)

        def after_trial(index: int, ms: float) -> bool:
            nonlocal stop_requested
            _send(self.channel, {"type": "trial", "index": index, "ms": ms})
            ack = self.channel.recv()
            if ack is None:
                raise ProtocolError("the judge hung up")
            stop_requested = bool(ack.get("stop"))
            if ack.get("verify"):
                described, values = self._outputs(inv, last[0])
                _send(self.channel, {"type": "trial_outputs", "outputs": described}, values)
                # The next trial waits until the judge has checked these outputs (its
                # comparison runs on the same GPU).
                checked = self.channel.recv()
                if checked is None or checked.get("type") != "trial_checked":
                    raise ProtocolError("expected 'trial_checked' from the judge")
                stop_requested = stop_requested or bool(checked.get("stop"))
            return stop_requested

        def hook(index: int, sample: TrialSample | None) -> bool:
            if sample is None:
                before_trial()
                return False
            return after_trial(index, sample.event_ms)

        activity: dict[str, Any] | None = None
        try:
            with torch.no_grad():
                if self.tdev.type == "cuda":
                    report = time_gpu(call, opts, self.tdev, hook)
                    if message.get("activity"):
                        # After every timed trial, so the profiler is in none of them; the
                        # same input rotation and poisoning as the timed trials.
                        profiled = profile_windows(
                            report,
                            self.tdev,
                            l2_flush=opts.l2_flush,
                            trace_dir=self.scratch,
                            prepare=lambda _: before_trial(),
                        )
                        activity = (
                            {"error": profiled}
                            if isinstance(profiled, str)
                            else pass_to_wire(profiled)
                        )  # an honest profiler glitch is an error, never a malformed pass
                else:
                    report = time_cpu(call, opts, hook)
            for i, digest in digests.items():
                if bits_digest(live[i]) != digest:
                    raise RuntimeError(
                        f"the kernel changed its input '{plan['slots'][i].get('name')}' "
                        "while being timed; inputs must stay unchanged"
                    )
        except ProtocolError:
            raise
        except Exception as e:
            return self._error_reply("timed", "runtime", format_user_traceback(e))
        reply: dict[str, Any] = {
            "type": "timed",
            "ok": True,
            "stats": asdict(report.stats),
            "warnings": report.warnings,
            "stream_skew": report.stream_skew,
            "launch_not_hidden": report.launch_not_hidden,
        }
        if activity is not None:
            reply["activity"] = activity
        return reply

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


def invocation_from_plan(
    plan: dict[str, Any], slots: Any, device: torch.device | None = None
) -> Invocation:
    """Rebuilds the judge's Invocation (link.plan_invocation) from its plan and the slot
    values, making the slots described by a `fill` on `device`. Raises KeyError, TypeError,
    ValueError or ProtocolError on a malformed plan."""
    bound = [
        BoundArg(
            str(s["name"]),
            _filled(s["fill"], device) if s.get("fill") is not None else v,
            str(s.get("role", "input")),
            bool(s.get("is_meta")),
        )
        for s, v in zip(plan["slots"], slots, strict=True)
    ]

    def value(ref: dict[str, Any]) -> Any:
        return bound[ref["slot"]].value if "slot" in ref else wire.decode(ref["lit"], [])

    args = [value(r) for r in plan["args"]]
    kwargs = {k: value(r) for k, r in plan["kwargs"].items()}
    return Invocation(
        args,
        kwargs,
        outputs=[bound[i] for i in plan["outputs"]],
        read_only=[bound[i] for i in plan["read_only"]],
    )


def _filled(fill: Any, device: torch.device | None) -> torch.Tensor:
    """The output buffer a slot's `fill` describes (link.uniform_fill)."""
    if device is None:
        raise ValueError("a filled slot needs a device")
    dtype = wire.DTYPES.get(str(fill["dtype"]))
    shape = fill["shape"]
    if dtype is None or not isinstance(shape, list):
        raise ValueError("malformed fill")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError("malformed fill shape")
    value = wire.decode(fill["value"], [])
    if not isinstance(value, bool | int | float):
        raise ValueError("malformed fill value")
    return torch.full(shape, value, dtype=dtype, device=device)


def _snapshot(args: list[BoundArg]) -> list[torch.Tensor | BitsDigest | None]:
    """What each tensor argument a call must leave unchanged was before it (other values as
    None), to compare with after the call here instead of sending the inputs back to the
    judge: a copy, or where the device has no room for one its BitsDigest."""
    return [_before(a.value) if isinstance(a.value, torch.Tensor) else None for a in args]


def _before(value: torch.Tensor) -> torch.Tensor | BitsDigest:
    try:
        return value.clone()
    except RuntimeError as e:
        if not is_device_oom(e):
            raise
        torch.cuda.empty_cache()  # the failed copy's memory, for the call that follows
        return bits_digest(value)


def _unchanged(before: torch.Tensor | BitsDigest, after: Any) -> bool:
    if not isinstance(after, torch.Tensor):
        return False
    if isinstance(before, BitsDigest):
        return bits_digest(after) == before
    return same_bits(before, after)


def _aliases(
    inv: Invocation, described: list[dict[str, Any]], values: list[Any]
) -> list[list[str]]:
    """[output, input] pairs where a returned output shares memory with an input."""
    if inv.outputs:  # declared output buffers are the harness's own tensors
        return []
    inputs = {
        a.value.untyped_storage().data_ptr(): a.name
        for a in inv.read_only
        if isinstance(a.value, torch.Tensor)
    }
    pairs = []
    for d, value in zip(described, values, strict=True):
        if isinstance(value, torch.Tensor):
            owner = inputs.get(value.untyped_storage().data_ptr())
            if owner is not None:
                pairs.append([str(d["name"]), owner])
    return pairs


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
