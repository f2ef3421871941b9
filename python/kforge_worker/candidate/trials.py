"""The candidate's side of the judged trials (judged.py holds the protocol and the judge's side).

`CandidateClock` maps the judge's two clock words (`go` read-only, `done` read-write) and
gates and releases the candidate's stream on them; `CandidateTrials` answers the judge's `go`
messages until `end`: per trial the call and the copy of what it returned, bracketed by the
candidate's own events (GPU) or perf_counter (cpu), which are its claims. The judge's cpu echo
runs the same loop with trusted calls.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from kforge_worker.candidate.tracebacks import describe_call_failure
from kforge_worker.core import devmem
from kforge_worker.core.inputs import seed_generators
from kforge_worker.core.protocol import ProtocolError, StreamChannel

# On the cpu a judged trial calls the kernel this many times at most, each on its own inputs
# (timed.cpu_calls_per_trial), so the judge's clock sees milliseconds, not one call's
# microseconds beside two messages' wake-ups.
MAX_CPU_CALLS = 16


class CandidateClock:
    """The candidate's side: `go` mapped read-only, `done` read-write."""

    def __init__(self, device: torch.device, fds: list[int], sizes: list[int]) -> None:
        if len(fds) != 2 or len(sizes) != 2:
            raise ProtocolError("a clock needs two words")
        try:
            self.go = devmem.import_fd(device, fds[0], int(sizes[0]), writable=False)
            self.done = devmem.import_fd(device, fds[1], int(sizes[1]), writable=True)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.device = device

    def gate(self, n: int) -> None:
        stream = torch.cuda.current_stream(self.device)
        devmem.stream_wait_u32(stream.cuda_stream, self.go.ptr, n)

    def release(self, n: int) -> None:
        stream = torch.cuda.current_stream(self.device)
        devmem.stream_write_u32(stream.cuda_stream, self.done.ptr, n)


class CandidateTrials:
    """Runs the judge's trials in the candidate process until `end`. Per `go`: on a GPU the
    first of `calls` and its `copy_outs` (the returned outputs into their places); on the cpu
    every call, each on its own set of the regions, each followed by its copy. `calls` None:
    the judge's empty trials (the copies alone on the cpu: its echo's)."""

    def __init__(
        self,
        channel: StreamChannel,
        device: torch.device,
        clock: CandidateClock | None,
        calls: list[Callable[[], object]] | None,
        copy_outs: list[Callable[[object], None]],
        *,
        touches: list[Callable[[], None]] | None = None,
        null_copies: list[Callable[[], None]] | None = None,
    ) -> None:
        self.channel = channel
        self.device = device
        self.clock = clock
        self.calls = calls
        self.copy_outs = copy_outs
        # cpu: each set's inputs read once before its call (outside the claim; the echo reads
        # the same bytes, so the judge's view is the call's with its inputs in cache, as the
        # reference's in the judge).
        self.touches = touches
        # cpu, the judge's echo: what an empty trial (`go` with `null`) does per set instead of
        # the call and its copy.
        self.null_copies = null_copies
        self._pending: dict[int, tuple[torch.cuda.Event, torch.cuda.Event]] = {}
        self.pending_go: dict[str, Any] | None = None  # a `go` the caller already received

    def serve(self) -> dict[str, float]:
        """Answers `go` messages until `end`; the claims not yet sent, by trial number."""
        while True:
            message, self.pending_go = self.pending_go or self.channel.recv(), None
            if message is None:
                raise ProtocolError("the judge hung up")
            kind = message.get("type")
            if kind == "end":
                return self._claims(block=True)
            if kind != "go":
                raise ProtocolError(f"expected 'go' or 'end', got {kind!r}")
            n = message.get("n")
            if not isinstance(n, int) or isinstance(n, bool):
                raise ProtocolError("'go' needs an integer n")
            seeds = _seeds(message.get("seeds"), len(self.copy_outs) or 1)
            if self.device.type == "cuda":
                self._gpu_trial(n, seeds)
            else:
                self._cpu_trial(n, seeds, null=message.get("null") is True)

    def _gpu_trial(self, n: int, seeds: list[int] | None) -> None:
        assert self.clock is not None
        if seeds is not None:
            seed_generators(seeds[0], self.device)  # host only, before the gate
        self.clock.gate(n)
        e1 = torch.cuda.Event(enable_timing=True)
        e2 = torch.cuda.Event(enable_timing=True)
        e1.record()
        error: tuple[str, str] | None = None
        if self.calls:
            try:
                returned = self.calls[0]()
                e2.record()
                self.copy_outs[0](returned)
            except Exception as e:  # the judge hears of it; `done` still comes
                error = _error_of(e)
                e2.record()
        else:
            e2.record()
        self.clock.release(n)
        self._pending[n] = (e1, e2)
        reply: dict[str, Any] = {"type": "enqueued", "n": n, "claims": self._claims(block=False)}
        if error is not None:
            reply["error"] = {"kind": error[0], "message": error[1]}
        self.channel.send(reply)

    def _cpu_trial(self, n: int, seeds: list[int] | None, *, null: bool = False) -> None:
        """The calls back to back (each on its own inputs, under its seed), each followed by
        its copy; the claim is the calls' time per call. An empty trial reads the inputs,
        seeds as a call would and makes the null copies only."""
        error: tuple[str, str] | None = None
        called = 0.0
        for k, copy_out in enumerate(self.copy_outs):
            returned: object = None
            if self.touches is not None:
                self.touches[k]()
            if seeds is not None:
                seed_generators(seeds[k], self.device)
            if null or self.calls is None:
                if self.null_copies is not None:
                    self.null_copies[k]()
                continue
            if self.calls is not None:
                start = time.perf_counter_ns()
                try:
                    returned = self.calls[k]()
                except Exception as e:
                    error = _error_of(e)
                    break
                called += (time.perf_counter_ns() - start) / 1e6
            try:
                copy_out(returned)
            except Exception as e:
                error = _error_of(e)
                break
        claim = called / max(1, len(self.copy_outs))
        reply: dict[str, Any] = {"type": "done", "n": n, "claims": {str(n): claim}}
        if error is not None:
            reply["error"] = {"kind": error[0], "message": error[1]}
        self.channel.send(reply)

    def _claims(self, *, block: bool) -> dict[str, float]:
        out: dict[str, float] = {}
        for n, (e1, e2) in list(self._pending.items()):
            if block:
                e2.synchronize()
            elif not e2.query():
                continue
            out[str(n)] = e1.elapsed_time(e2)
            del self._pending[n]
        return out


def _seeds(value: object, count: int) -> list[int] | None:
    """A `go`'s seeds: absent, or one non-negative 63-bit integer per set."""
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != count
        or not all(type(v) is int and 0 <= v < 1 << 63 for v in value)
    ):
        raise ProtocolError(f"'go' needs {count} seed(s), non-negative 63-bit integers")
    return value


def _error_of(e: BaseException) -> tuple[str, str]:
    return describe_call_failure(e)
