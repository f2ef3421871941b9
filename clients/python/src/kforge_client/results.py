"""Typed views of the server's answers (kforge extras; the old client returned dicts only).

Every view keeps the answer it was read from in `raw`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kforge_client.models import RuntimeStats

# The job states of GET /job/{id} (the old server's names) and kforge's own states.
FINISHED_STATUSES = ("completed", "failed")
FINISHED_STATES = ("success", "failed", "cancelled")


def _stats(value: Any) -> RuntimeStats | None:
    if isinstance(value, RuntimeStats):
        return value
    if isinstance(value, dict) and value:
        return RuntimeStats.from_dict(value)
    return None


def _text(d: dict[str, Any], key: str) -> str | None:
    value = d.get(key)
    return value if isinstance(value, str) else None


def _interval(value: Any) -> tuple[float, float] | None:
    """speedup_ci, [low, high], as a tuple; None when absent or malformed."""
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(x, (int, float)) for x in value)
    ):
        return float(value[0]), float(value[1])
    return None


@dataclass
class KernelExecResult:
    """kernel_exec_result: did the kernel compile, is it correct, how fast (ms)."""

    compiled: bool
    correctness: bool
    runtime: float  # mean, ms; 0.0 when not timed
    runtime_stats: RuntimeStats | None
    compilation_error: str | None
    validation_error: str | None
    runtime_error: str | None
    error_kind: str | None
    runtime_median: float | None
    speedup: float | None
    # The speedup's 95 % interval and what it says: faster | slower | indistinguishable.
    speedup_ci: tuple[float, float] | None
    speedup_verdict: str | None
    compilation_time: float | None
    metadata: dict[str, Any]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelExecResult:
        speedup = d.get("speedup")
        median = d.get("runtime_median")
        ctime = d.get("compilation_time")
        return cls(
            compiled=bool(d.get("compiled", False)),
            correctness=bool(d.get("correctness", False)),
            runtime=float(d.get("runtime") or 0.0),
            runtime_stats=_stats(d.get("runtime_stats")),
            compilation_error=_text(d, "compilation_error"),
            validation_error=_text(d, "validation_error"),
            runtime_error=_text(d, "runtime_error"),
            error_kind=_text(d, "error_kind"),
            runtime_median=float(median) if isinstance(median, (int, float)) else None,
            speedup=float(speedup) if isinstance(speedup, (int, float)) else None,
            speedup_ci=_interval(d.get("speedup_ci")),
            speedup_verdict=_text(d, "speedup_verdict"),
            compilation_time=float(ctime) if isinstance(ctime, (int, float)) else None,
            metadata=dict(d.get("metadata") or {}),
            raw=d,
        )

    @property
    def reason(self) -> str | None:
        """Why the kernel failed (compilation_error or validation_error), None if it passed."""
        if not self.compiled:
            return self.compilation_error
        if not self.correctness:
            return self.validation_error
        return None


@dataclass
class EvaluationResult:
    """The answer to an evaluate or compare once the job finished."""

    job_id: str
    status: str  # "success" (a verdict was reached) or "error" (the job could not run)
    state: str  # kforge's state: success, failed, cancelled
    kernel_exec_result: KernelExecResult
    ref_runtime: RuntimeStats | None  # compares
    speedup: float | None
    speedup_ci: tuple[float, float] | None  # its 95 % interval
    speedup_verdict: str | None  # faster | slower | indistinguishable
    error: str | None
    pod_name: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvaluationResult:
        exec_result = d.get("kernel_exec_result") or {}
        speedup = d.get("speedup")
        status = _text(d, "status") or "error"
        state = _text(d, "state") or ("success" if status in ("success", "completed") else "failed")
        if status == "completed":  # read from GET /job/{id}
            status = "success"
        elif status == "failed":
            status = "error"
        return cls(
            job_id=str(d.get("job_id", "")),
            status=status,
            state=state,
            kernel_exec_result=KernelExecResult.from_dict(exec_result),
            ref_runtime=_stats(d.get("ref_runtime")),
            speedup=float(speedup) if isinstance(speedup, (int, float)) else None,
            speedup_ci=_interval(d.get("speedup_ci")),
            speedup_verdict=_text(d, "speedup_verdict"),
            error=_text(d, "error"),
            pod_name=_text(d, "pod_name"),
            raw=d,
        )

    @property
    def ok(self) -> bool:
        """The job ran, the kernel compiled and is correct."""
        r = self.kernel_exec_result
        return self.status == "success" and r.compiled and r.correctness


@dataclass
class JobStatus:
    """GET /job/{id}: where a job is, and its result once finished."""

    job_id: str
    status: str  # submitted, compiling, validating, profiling, completed, failed
    state: str  # queued, running, success, failed, cancelled
    created_at: float
    error: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobStatus:
        created = d.get("created_at")
        return cls(
            job_id=str(d.get("job_id", "")),
            status=str(d.get("status", "")),
            state=str(d.get("state", "")),
            created_at=float(created) if isinstance(created, (int, float)) else 0.0,
            error=_text(d, "error"),
            raw=d,
        )

    @property
    def done(self) -> bool:
        if self.state:
            return self.state in FINISHED_STATES
        return self.status in FINISHED_STATUSES

    @property
    def result(self) -> EvaluationResult | None:
        """The result once the job finished, else None."""
        return EvaluationResult.from_dict(self.raw) if self.done else None
