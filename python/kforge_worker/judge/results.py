"""The result of a job, as typed values, and its wire form (docs/worker-protocol.md "Result")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kforge_worker.check.compare import Mismatch
from kforge_worker.core.phases import PhaseClock
from kforge_worker.timing.activity import Flag, KernelActivity, not_measured
from kforge_worker.timing.stats import TimingStats

# Each text of a result (an error message, a traceback, a warning, a check's message) is cut
# to this many bytes of UTF-8 before it leaves the judge, keeping its start and its end: the
# job's code chooses those texts (an exception may carry 100 MB), and the server bounds a
# worker's frames (docs/worker-protocol.md). The server applies the same cap again
# (src/kforge/jobs/result_caps.h). Nsight Compute's output is bounded by device_metrics.py.
MAX_TEXT_BYTES = 64 * 1024

ERROR_KINDS = (
    "compile",
    "runtime",
    "mismatch",
    "timeout",
    "crash",
    "memory_limit",
    "cancelled",
    "worker",
)


@dataclass
class TrialResult:
    trial: int
    passed: bool
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    mismatch_count: int = 0
    message: str = ""


@dataclass
class FirstMismatch:
    trial: int
    output: str
    index: list[int]
    expected: Any
    actual: Any

    @staticmethod
    def of(trial: int, output: str, m: Mismatch) -> FirstMismatch:
        return FirstMismatch(trial, output, m.index, m.expected, m.actual)


@dataclass
class CorrectnessDetails:
    trials: int
    trials_passed: int = 0
    atol: float | None = None
    rtol: float | None = None
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    mismatch_count: int = 0
    numel: int = 0
    first_mismatch: FirstMismatch | None = None
    per_trial: list[TrialResult] = field(default_factory=list)


@dataclass
class Check:
    """An honesty check. A failed `fatal` check made correctness false."""

    name: str
    passed: bool
    message: str = ""
    fatal: bool = True


@dataclass
class JobResult:
    compiled: bool = False
    correctness: bool = False
    runtime: float = -1.0
    runtime_stats: TimingStats | None = None
    ref_runtime: float = -1.0
    ref_runtime_stats: TimingStats | None = None
    speedup: float | None = None
    # A 95 % interval of the speedup (stats.speedup_interval) and what it says: `faster`,
    # `slower` or `indistinguishable` (None where a side has fewer than 2 trials).
    speedup_ci: list[float] | None = None
    speedup_verdict: str | None = None
    # Kernel activity (docs/architecture.md "What the GPU time means"): the device's own clock for
    # the timed window; kernel_time is the median summed kernel time (ms). `ref_` for the
    # reference. Present in every result; `kernel_activity.measured` says whether it was.
    kernel_time: float | None = None
    kernels: list[dict[str, Any]] = field(default_factory=list)
    idle_gap_ms: float | None = None
    timing_flags: list[dict[str, str]] = field(default_factory=list)
    kernel_activity: dict[str, Any] = field(
        default_factory=lambda: not_measured("not timed").to_dict()
    )
    ref_kernel_time: float | None = None
    ref_kernels: list[dict[str, Any]] = field(default_factory=list)
    ref_idle_gap_ms: float | None = None
    ref_timing_flags: list[dict[str, str]] = field(default_factory=list)
    ref_kernel_activity: dict[str, Any] = field(
        default_factory=lambda: not_measured("not timed").to_dict()
    )
    # What Nsight Compute printed per role (device_metrics.py); the server turns it into
    # metadata.device_metrics and drops it. Absent unless device metrics were asked for.
    device_metrics_raw: dict[str, Any] | None = None
    # A job of a batch: what it reused of the batch's reference results and the digest of
    # the file it leaves for the next (reference_reuse.py). Absent otherwise.
    reference_reuse: dict[str, Any] | None = None
    error_kind: str | None = None
    compilation_error: str | None = None
    runtime_error: str | None = None
    validation_error: str | None = None
    correctness_details: CorrectnessDetails | None = None
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Not a field: its times become `phases_ms` in to_dict().
        self.phases = PhaseClock()

    def add_check(self, name: str, passed: bool, message: str = "", *, fatal: bool = True) -> None:
        """Records a check; repeated names keep the first failure (or the single pass)."""
        for i, existing in enumerate(self.checks):
            if existing.name == name:
                if existing.passed and not passed:
                    self.checks[i] = Check(name, passed, message, fatal)
                return
        self.checks.append(Check(name, passed, message, fatal))

    def set_activity(
        self, activity: KernelActivity, flags: list[Flag], *, reference: bool = False
    ) -> None:
        """Records one kernel's activity (the reference's with `reference`)."""
        prefix = "ref_" if reference else ""
        setattr(self, f"{prefix}kernel_time", activity.kernel_time_ms)
        setattr(self, f"{prefix}kernels", [k.to_dict() for k in activity.kernels])
        setattr(self, f"{prefix}idle_gap_ms", activity.idle_gap_ms)
        setattr(self, f"{prefix}timing_flags", [f.to_dict() for f in flags])
        setattr(self, f"{prefix}kernel_activity", activity.to_dict())

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def fail(self, kind: str, message: str) -> None:
        """Sets the error kind (the first one wins) and its message field."""
        assert kind in ERROR_KINDS, kind
        if self.error_kind is None:
            self.error_kind = kind
        if kind == "compile":
            self.compilation_error = self.compilation_error or message
        elif kind == "mismatch":
            self.validation_error = self.validation_error or message
        else:
            self.runtime_error = self.runtime_error or message

    def to_dict(self) -> dict[str, Any]:
        """The `result` object of the wire protocol (JSON-ready, NaN handled by protocol),
        every text capped to MAX_TEXT_BYTES (but Nsight Compute's, which the server parses)."""
        out = dataclasses.asdict(self)
        for key in (
            "compilation_error",
            "runtime_error",
            "validation_error",
            "device_metrics_raw",
            "reference_reuse",
        ):
            if out[key] is None:
                del out[key]
        out["honesty"] = [
            {"code": c.name, "message": c.message, "fatal": c.fatal}
            for c in self.checks
            if not c.passed
        ]
        out["phases_ms"] = self.phases.to_dict()
        return dict(_capped(out, skip=("device_metrics_raw",)))


def cap_text(text: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """`text` when its UTF-8 has at most `max_bytes` bytes; else its start and its end around
    a marker saying how many bytes were cut (the server's cap_text, result_caps.cc)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    room = len(f"\n[... kforge cut {len(data)} of {len(data)} bytes here ...]\n")
    keep = max(0, max_bytes - room)
    head = data[: keep // 2].decode("utf-8", "ignore")
    tail = data[len(data) - (keep - keep // 2) :].decode("utf-8", "ignore")
    cut = (
        len(data)
        - len(head.encode("utf-8", "surrogatepass"))
        - len(tail.encode("utf-8", "surrogatepass"))
    )
    return f"{head}\n[... kforge cut {cut} of {len(data)} bytes here ...]\n{tail}"


def _capped(value: Any, skip: tuple[str, ...] = ()) -> Any:
    if isinstance(value, str):
        return cap_text(value)
    if isinstance(value, dict):
        return {k: v if k in skip else _capped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_capped(v) for v in value]
    return value
