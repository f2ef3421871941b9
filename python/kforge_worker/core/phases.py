"""Per-phase wall times of a job (`phases_ms` in the result, docs/worker-protocol.md).

The phases are exclusive: entering a phase inside another pauses the outer one, so every
millisecond is charged to at most one phase and their sum never exceeds the job's wall
time. A phase that never ran is absent, not zero.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# The phases, in the order results list them.
PHASES = ("import", "compile", "inputs", "reference", "candidate", "compare", "timing")


@dataclass
class _Open:
    name: str
    since_ns: int


class PhaseClock:
    """Charges wall time to named phases (milliseconds), innermost phase only."""

    def __init__(self, now_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        """`now_ns`: a monotonic clock in nanoseconds (tests pass their own)."""
        self._now_ns = now_ns
        self._ms: dict[str, float] = {}
        self._stack: list[_Open] = []  # the open phases, innermost last

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charges the time spent inside to `name` (minus any phase opened inside it)."""
        assert name in PHASES, name
        now = self._now_ns()
        if self._stack:
            self._charge(self._stack[-1], now)
        self._stack.append(_Open(name, now))
        try:
            yield
        finally:
            now = self._now_ns()
            self._charge(self._stack.pop(), now)
            if self._stack:
                self._stack[-1].since_ns = now

    def credit(self, name: str, ms: float) -> None:
        """Moves up to `ms` of the running phase's time to `name` (a part another process
        measured inside a request this one timed, e.g. the candidate's compile inside its
        load). Without a running phase, or with a non-positive `ms`, nothing changes."""
        assert name in PHASES, name
        if not self._stack or not ms > 0:
            return
        top = self._stack[-1]
        self._charge(top, self._now_ns())
        running = top.name
        moved = min(float(ms), self._ms.get(running, 0.0))
        self._ms[running] -= moved
        self._ms[name] = self._ms.get(name, 0.0) + moved

    def to_dict(self) -> dict[str, float]:
        """The phases that ran, in PHASES order, in ms rounded to microseconds (an open
        phase counts up to now)."""
        if self._stack:
            self._charge(self._stack[-1], self._now_ns())
        return {p: round(self._ms[p], 3) for p in PHASES if p in self._ms}

    def _charge(self, entry: _Open, now: int) -> None:
        self._ms[entry.name] = self._ms.get(entry.name, 0.0) + (now - entry.since_ns) / 1e6
        entry.since_ns = now
