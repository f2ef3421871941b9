"""The judge's side of the candidate process (candidate/server.py): starting it, and each request.

The candidate is started before the judge initialises CUDA (its own context comes from its
own warm-up), jailed apart from the judge when the supervisor sent a jail for it (jailer.py),
and talks to the judge only through one socket pair. Everything it sends is a claim: sizes
are checked against a byte budget before anything is read, outputs are compared by the
judge, and a candidate that dies or breaks the protocol ends the job as a crash.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kforge_worker.candidate import wire
from kforge_worker.candidate.binding import Invocation, plan_invocation
from kforge_worker.candidate.regions import JudgeRegions, Layout, RegionError, strip_tensors
from kforge_worker.core import devmem
from kforge_worker.core.devinfo import synchronize
from kforge_worker.core.protocol import ProtocolError, StreamChannel
from kforge_worker.core.spec import TimingOptions
from kforge_worker.judge.judged import (
    Echo,
    JudgeClock,
    JudgedRun,
    JudgeSide,
    TrialsFailed,
    measure_null_gpu,
    run_trials,
    spin_for_enqueue,
)

DEFAULT_BUDGET_BYTES = 64 << 30
# Said of a candidate that faulted while its inputs were mapped read-only (regions.py).
READ_ONLY_HINT = (
    "its inputs are mapped read-only, so a kernel that writes to an input it does not "
    "declare 'inout' faults this way (or it touched memory that is not its own)"
)


class CandidateGone(Exception):
    """The candidate process died or broke the protocol; the message says how."""


@dataclass
class Failure:
    kind: str  # compile | setup | runtime | device | worker
    message: str


@dataclass
class LoadReply:
    name: str = ""
    passes_outputs: bool = True
    has_get_inputs: bool = False
    warnings: list[str] = field(default_factory=list)
    failure: Failure | None = None
    compile_ms: float = 0.0  # the process's own NVRTC build time inside the load (a claim)
    inputs_fallback: str | None = None  # why its get_init_inputs() ran on the cpu, if it did
    # Whether its torch model was built on the device as asked, and why not if it was not.
    model_on_device: bool = False
    model_fallback: str | None = None
    # Its torch callable takes its IOContract as the kernel evaluation server passed it
    # (binding.takes_io_positionally).
    io_positional: bool = False


@dataclass
class CallReply:
    outputs: list[tuple[str, Any]] = field(default_factory=list)  # value or a problem string
    problems: dict[str, str] = field(default_factory=dict)  # output name -> why not a tensor
    # The read-only inputs the candidate found changed by the call: its claim (a kernel may
    # forge it; the verified outputs and the timed trials' checks do not rely on it).
    read_only_changed: list[str] = field(default_factory=list)
    threads_started: int = 0
    aliases: list[tuple[str, str]] = field(default_factory=list)  # (output, input), claimed
    kernel_launches: int = -1  # Triton launches the candidate reported (-1: not counted)
    failure: Failure | None = None


class CandidateLink:
    def __init__(self, sock: socket.socket, pid: int, device: torch.device) -> None:
        self.channel = StreamChannel(sock)
        self.pid = pid
        self.device = device
        self.budget_bytes = DEFAULT_BUDGET_BYTES
        self.ready: dict[str, Any] = {}
        # Judge-observed round trips of the `call` requests (ms): each holds at least one
        # host enqueue of the kernel, a bound on the spin the candidate may claim.
        self.call_wall_ms: list[float] = []
        self._exit: str | None = None
        # The trial regions (regions.py) the candidate maps, once a call needed them; None
        # while none were made, or for good when they cannot be (`regions_refused` says why).
        self.regions: JudgeRegions | None = None
        self.regions_refused: str | None = None
        # The GPU clock (judged.py) and its empty trial, from the warm-up.
        self.clock: JudgeClock | None = None

    # -- lifetime -----------------------------------------------------------------------

    def wait_ready(self) -> dict[str, Any]:
        """The candidate's `ready` message (warm-up report, jail report)."""
        message = self._recv_plain()
        if message.get("type") != "ready":
            raise CandidateGone(f"the candidate process sent {message.get('type')!r} first")
        self.ready = message
        return message

    def close(self) -> None:
        if self.regions is not None:
            self.regions.close()
            self.regions = None
        with contextlib.suppress(OSError):
            self.channel.send({"type": "shutdown"})
        self.channel.close()
        self._reap(wait_s=1.0, kill=True)

    def _reap(self, wait_s: float, kill: bool) -> str:
        if self._exit is not None:
            return self._exit
        deadline = time.monotonic() + wait_s
        while True:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self._exit = "ended (its exit status is unknown)"
                return self._exit
            if pid == self.pid:
                self._exit = describe_status(status)
                return self._exit
            if time.monotonic() >= deadline:
                if not kill:
                    return "is still running"
                os.kill(self.pid, signal.SIGKILL)
                kill = False
                deadline = time.monotonic() + 1.0
            time.sleep(0.005)

    def gone(self, why: Exception) -> CandidateGone:
        status = self._reap(wait_s=0.5, kill=True)
        hint = ""
        if self.regions is not None and ("SIGSEGV" in status or "SIGBUS" in status):
            hint = f"; {READ_ONLY_HINT}"
        return CandidateGone(f"the candidate process {status} ({why}){hint}")

    def _recv_plain(self) -> dict[str, Any]:
        try:
            message = self.channel.recv()
        except (ProtocolError, OSError) as e:
            raise self.gone(e) from e
        if message is None:
            raise self.gone(ConnectionError("it closed its socket"))
        return message

    def _request(self, header: dict[str, Any], values: Any = None) -> tuple[dict[str, Any], Any]:
        try:
            wire.send(self.channel, header, values)
            return wire.receive(self.channel, self.device, self.budget_bytes)
        except (ProtocolError, OSError) as e:
            raise self.gone(e) from e

    @staticmethod
    def _failure(reply: dict[str, Any]) -> Failure | None:
        if reply.get("ok"):
            return None
        error = reply.get("error") or {}
        if not isinstance(error, dict):
            return Failure("worker", str(error))
        return Failure(str(error.get("kind", "worker")), str(error.get("message", "")))

    def _expect(self, reply: dict[str, Any], kind: str) -> None:
        if reply.get("type") != kind:
            raise self.gone(_unexpected(reply, kind))

    # -- requests -----------------------------------------------------------------------

    def load(
        self,
        spec: dict[str, Any],
        *,
        scratch_dir: str,
        cache_dir: str,
        model_seed: int,
        init_seed: int,
        init_inputs: list[Any] | None,
        model_on_device: bool = False,
    ) -> LoadReply:
        reply, _ = self._request(
            {
                "type": "load",
                "spec": spec,
                "scratch_dir": scratch_dir,
                "cache_dir": cache_dir,
                "model_seed": model_seed,
                "init_seed": init_seed,
                "prefer_new": True,
                "model_on_device": model_on_device,
            },
            init_inputs,
        )
        self._expect(reply, "loaded")
        failure = self._failure(reply)
        compile_ms = _claimed_ms(reply.get("compile_ms"))
        if failure is not None:
            return LoadReply(failure=failure, compile_ms=compile_ms)
        warnings = reply.get("warnings") or []
        return LoadReply(
            name=str(reply.get("name", "")),
            passes_outputs=bool(reply.get("passes_outputs", True)),
            has_get_inputs=bool(reply.get("has_get_inputs")),
            warnings=[str(w) for w in warnings] if isinstance(warnings, list) else [],
            compile_ms=compile_ms,
            inputs_fallback=_claimed_text(reply.get("inputs_fallback")),
            model_on_device=reply.get("model_on_device") is True,
            model_fallback=_claimed_text(reply.get("model_fallback")),
            io_positional=reply.get("io_positional") is True,
        )

    def gen_inputs(self, seed: int) -> tuple[list[Any] | None, Failure | None, str | None]:
        """get_inputs() of the candidate's module: (values, failure, why they were made on
        the cpu instead of the device, if they were)."""
        reply, values = self._request({"type": "gen_inputs", "seed": seed})
        self._expect(reply, "inputs")
        fallback = _claimed_text(reply.get("inputs_fallback"))
        failure = self._failure(reply)
        if failure is not None:
            return None, failure, fallback
        if not isinstance(values, list):
            raise self.gone(ProtocolError("inputs must be a list"))
        return values, None, fallback

    def trim(self) -> None:
        """Has the candidate process give back what its allocator caches beyond
        arena.keep_bytes (its correctness calls' GB-sized leftovers) before the timing phase,
        whose input sets and reference runs need the room on the same GPU."""
        reply, _ = self._request({"type": "trim"})
        self._expect(reply, "trimmed")

    # -- the regions and the clock ----------------------------------------------------------

    def attach_regions(self, layout: Layout) -> JudgeRegions:
        """Regions for `layout`, mapped by the candidate: the current ones when they place
        the same tensors the same way, else new ones (the old ones are given back). Raises
        RegionError when they cannot be made or mapped."""
        if self.regions is not None and self.regions.layout.key() == layout.key():
            return self.regions
        if self.regions is not None:
            self.regions.close()
            self.regions = None
        try:
            regions = JudgeRegions(self.device, layout)
        except (devmem.DeviceMemoryError, OSError) as e:
            raise RegionError(f"cannot allocate the trial regions: {e}") from e
        try:
            self._share("regions", regions.sizes, regions.descriptors())
        except (RegionError, CandidateGone):
            regions.close()
            raise
        self.regions = regions
        return regions

    def _share(self, kind: str, sizes: list[int], fds: list[int]) -> None:
        """Sends `kind` with descriptors the candidate maps (closed here either way); raises
        RegionError when it could not map them, CandidateGone when it is gone."""
        try:
            wire.send_fds(self.channel, {"type": kind, "sizes": sizes}, fds)
            reply = self._recv_plain()
        except (ProtocolError, OSError) as e:
            raise self.gone(e) from e
        finally:
            for fd in fds:
                os.close(fd)
        self._expect(reply, f"{kind}_ready")
        failure = self._failure(reply)
        if failure is not None:
            raise RegionError(failure.message)

    def attach_clock(self) -> JudgeClock:
        """The GPU clock's words, mapped by the candidate, and the judge's empty trial
        measured with it (judged.measure_null_gpu): called at warm-up, before the candidate
        process has loaded any user code."""
        clock = JudgeClock(self.device)
        self._share("clock", clock.sizes(), clock.descriptors())
        try:
            run = measure_null_gpu(self.channel, clock)
        except (ProtocolError, OSError) as e:
            raise self.gone(e) from e
        clock.null_samples = [t.bracket_ms for t in run.trials if math.isfinite(t.bracket_ms)]
        clock.null_ms = min(clock.null_samples) if clock.null_samples else None
        claims = [t.claim_ms for t in run.trials if t.claim_ms is not None]
        clock.null_claim_ms = statistics.median(claims) if claims else None
        clock.rtt_ms = run.enqueue_ms
        self.clock = clock
        return clock

    def use_regions(
        self, inv: Invocation, returned: list[torch.Tensor] | None = None, sets: int | None = None
    ) -> bool:
        """Makes (or keeps) regions for `inv` (and room for `returned` outputs, `sets` times;
        both as the current regions have them when not given); False, for good, where they
        cannot be made here (the reason in `regions_refused`)."""
        if self.regions_refused is not None:
            return False
        plan, values = plan_invocation(inv)
        layout = Layout.of(plan["slots"], values)
        if returned is None and self.regions is not None:
            returned = self.regions.returned_views()
        layout.add_returned(list(returned or []))
        layout.sets = (
            sets if sets is not None else (self.regions.layout.sets if self.regions else 1)
        )
        try:
            self.attach_regions(layout)
        except RegionError as e:
            self.regions_refused = str(e)
            return False
        return True

    def call(self, inv: Invocation, seed: int | None = None) -> CallReply:
        """Runs the candidate once; with `seed`, torch's generators are seeded with it first
        (the reference of a compare runs under the same seed). Through the trial regions
        where they can be made (use_regions): the inputs written into the judge's memory
        that the candidate maps read-only, declared outputs read back from it."""
        if not self.use_regions(inv):
            plan, slots = plan_invocation(inv, fills=True)
            header: dict[str, Any] = {"type": "call", "plan": plan, "seed": seed}
        else:
            assert self.regions is not None
            plan, slots = plan_invocation(inv)
            places = self.regions.layout.places
            self.regions.load(slots, outputs=True)
            synchronize(self.device)  # in place before the candidate reads it
            header = {
                "type": "call",
                "plan": plan,
                "seed": seed,
                "places": self.regions.layout.to_wire(),
            }
            slots = strip_tensors(places, slots)
        start = time.perf_counter_ns()
        reply, values = self._request(header, slots)
        self.call_wall_ms.append((time.perf_counter_ns() - start) / 1e6)
        self._expect(reply, "called")
        failure = self._failure(reply)
        if failure is not None:
            return CallReply(failure=failure)
        if reply.get("in_regions") and self.regions is not None and "places" in header:
            values = self._region_outputs(plan, values)
        return self._call_reply(reply, values)

    def _region_outputs(self, plan: dict[str, Any], values: Any) -> Any:
        """The reply's values with the declared outputs read from the regions (copies: the
        next call writes the regions again)."""
        assert self.regions is not None
        if not isinstance(values, list) or len(values) != 2 or not isinstance(values[0], list):
            raise self.gone(ProtocolError("malformed call reply"))
        places = self.regions.layout.places
        outs = [self.regions.view(places[i]).clone() for i in plan["outputs"]]
        if len(outs) != len(values[0]):
            raise self.gone(ProtocolError("a call reply names another number of outputs"))
        return [outs, values[1]]

    def _call_reply(self, reply: dict[str, Any], values: Any) -> CallReply:
        """A `called` reply (or a verified trial's outputs): its outputs and claims. The
        candidate compares the call's read-only inputs itself and names those that changed
        (`read_only_changed`, required); it sends no inputs back."""
        described = reply.get("outputs")
        if (
            not isinstance(described, list)
            or not isinstance(values, list)
            or len(values) != 2
            or not isinstance(values[0], list)
            or len(values[0]) != len(described)
        ):
            raise self.gone(ProtocolError("malformed call reply"))
        out = CallReply(
            threads_started=int(reply.get("threads_started") or 0),
            kernel_launches=int(reply.get("kernel_launches", -1)),
        )
        for pair in reply.get("aliases") or []:
            if isinstance(pair, list) and len(pair) == 2:
                out.aliases.append((str(pair[0]), str(pair[1])))
        for d, value in zip(described, values[0], strict=True):
            name = str(d.get("name", "?")) if isinstance(d, dict) else "?"
            problem = d.get("problem") if isinstance(d, dict) else "malformed"
            if problem:
                out.problems[name] = str(problem)
            out.outputs.append((name, value))
        changed = reply.get("read_only_changed")
        if not isinstance(changed, list) or values[1] != []:
            raise self.gone(ProtocolError("a call reply needs read_only_changed and no inputs"))
        out.read_only_changed = [str(name) for name in changed]
        return out

    def time(
        self,
        inv: Invocation,
        opts: TimingOptions,
        *,
        stage: Callable[[int], None],
        prepare: Callable[[int], None],
        after: Callable[[int], None],
        stop: Callable[[], bool] = lambda: False,
        activity: bool = False,
        echo: Echo | None = None,
        seeds: Callable[[int], list[int]] | None = None,
    ) -> JudgedRun | Failure:
        """Judged timing of the candidate (judged.py) on the regions `inv` was placed in
        (use_regions, with room for the returned outputs): `stage(i)` makes trial i's
        inputs, `prepare(i)` writes them and poisons its outputs, `after(i)` checks them,
        `seeds(i)` are the seeds of its calls (one per set).
        The candidate's warm-up or a failed call of a trial comes back as a Failure."""
        assert self.regions is not None
        plan, slots = plan_invocation(inv)
        layout = self.regions.layout
        header = {
            "type": "time",
            "plan": plan,
            "places": layout.to_wire(),
            "returned": [p.to_wire() for p in layout.returned],
            "sets": layout.sets,
            "strides": layout.strides,
            "timing": dataclasses.asdict(opts),
            "activity": activity,
        }
        reply, _ = self._request(header, strip_tensors(layout.places, slots))
        self._expect(reply, "time_ready")
        failure = self._failure(reply)
        if failure is not None:
            return failure
        gpu = self.device.type == "cuda"
        if gpu and self.clock is None:
            raise self.gone(ProtocolError("no clock was set up for the GPU"))
        if not gpu and echo is None:
            raise ValueError("a cpu timing needs the judge's echo (judged.start_echo)")
        enqueue_ms = _claimed_ms(reply.get("enqueue_ms"))
        side = JudgeSide(
            self.channel,
            self.device,
            opts,
            prepare,
            after,
            clock=self.clock,
            echo=echo,
            first_spin_us=spin_for_enqueue(self.clock.rtt_ms + enqueue_ms) if self.clock else 0.0,
            stage=stage,
            stop=stop,
            seeds=seeds,
        )
        try:
            return run_trials(side)
        except TrialsFailed as e:
            return Failure(e.kind, e.message)
        except (ProtocolError, OSError) as e:
            raise self.gone(e) from e

    def device_metrics(self, inv: Invocation, request: dict[str, Any]) -> dict[str, Any]:
        """One call of the candidate under Nsight Compute, run by the candidate process as
        its child (device_metrics.py); the run as it reported it (a claim: the caller checks
        it with device_metrics.checked_run)."""
        plan, slots = plan_invocation(inv)
        reply, _ = self._request(
            {"type": "device_metrics", "plan": plan, "request": request}, slots
        )
        self._expect(reply, "device_metrics")
        failure = self._failure(reply)
        if failure is not None:
            return {"command": [], "exit_code": None, "stdout": "", "stderr": failure.message}
        run = reply.get("run")
        return run if isinstance(run, dict) else {}


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"was killed by signal {sig} ({name})"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return "ended"


# A claimed text (the candidate's account of an input fallback) is cut to this length.
MAX_CLAIMED_TEXT = 500


def _claimed_ms(value: Any) -> float:
    """A duration the candidate process reports: a finite non-negative number, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if 0.0 <= value < float("inf") else 0.0


def _unexpected(reply: dict[str, Any], kind: str) -> ProtocolError:
    """The error for a reply of the wrong type; a `fatal` one carries the candidate's own
    words on why it is ending (candidate.serve; a claim, shortened)."""
    if reply.get("type") == "fatal":
        return ProtocolError(f"it failed: {_claimed_text(reply.get('error')) or 'no reason given'}")
    return ProtocolError(f"expected {kind!r}, got {reply.get('type')!r}")


def _claimed_text(value: Any) -> str | None:
    return value[:MAX_CLAIMED_TEXT] if isinstance(value, str) and value else None
