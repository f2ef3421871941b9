"""The candidate's profiled pass on the wire, and the judge's checks of it (activity.py says what
the pass measures). The candidate process runs its own pass and sends it (pass_to_wire); the
judge reads it within bounds (pass_from_wire: at most MAX_WIRE_TRIALS trials of MAX_WIRE_OPS
operations, WireError otherwise) and cross-checks what it claims against what the judge saw
(cross_check), since it is the candidate process's claim.
"""

from __future__ import annotations

import math
from typing import Any

from kforge_worker.timing.activity import (
    DEVICE_CATEGORIES,
    SOURCE_CANDIDATE,
    Flag,
    KernelRecord,
    ProfiledPass,
    WindowActivity,
    exceeds,
    union_length,
)

# Bounds on a profiled pass read from the candidate process (pass_from_wire).
MAX_WIRE_TRIALS = 64


MAX_WIRE_OPS = 4096  # device operations per trial


MAX_WIRE_NAME = 1024  # characters of an operation's name


def pass_to_wire(profiled: ProfiledPass) -> dict[str, Any]:
    """The JSON form of a profiled pass (the `activity` of the candidate's `timed` reply), or
    {"error"} when the trace held no timed window. Trials the trace lost are left out, so
    there is one event time per window (pass_from_wire's rule)."""
    n = min(len(profiled.windows), len(profiled.event_ms))
    if n == 0:
        return {"error": "the profiler recorded no timed window (no trace ranges found)"}
    return {
        "event_ms": list(profiled.event_ms[:n]),
        "windows": [
            {
                "trial": w.trial,
                "launch_stream": w.launch_stream,
                "ops": [
                    {
                        "name": op.name,
                        "kind": op.kind,
                        "grid": list(op.grid) if op.grid else None,
                        "block": list(op.block) if op.block else None,
                        "stream": op.stream,
                        "start_us": op.start_us,
                        "duration_us": op.duration_us,
                    }
                    for op in w.ops
                ],
            }
            for w in profiled.windows[:n]
        ],
    }


class WireError(ValueError):
    """A profiled pass from the candidate process that is not one; the message names the
    field (e.g. `windows[2].ops[0].duration_us`)."""


def _wire_number(value: Any, where: str, *, minimum: float | None = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise WireError(f"{where}: must be a finite number")
    if minimum is not None and value < minimum:
        raise WireError(f"{where}: must be >= {minimum:g}")
    return float(value)


def _wire_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 1 << 63:
        raise WireError(f"{where}: must be an integer")
    return value


def _wire_dim3(value: Any, where: str) -> tuple[int, int, int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 3:
        raise WireError(f"{where}: must be null or [x, y, z]")
    x, y, z = (_wire_int(v, f"{where}[{i}]") for i, v in enumerate(value))
    if min(x, y, z) < 0:
        raise WireError(f"{where}: must not be negative")
    return (x, y, z)


def _wire_op(value: Any, where: str) -> KernelRecord:
    if not isinstance(value, dict):
        raise WireError(f"{where}: must be an object")
    name = value.get("name")
    if not isinstance(name, str) or len(name) > MAX_WIRE_NAME:
        raise WireError(f"{where}.name: must be a string of at most {MAX_WIRE_NAME} characters")
    kind = value.get("kind")
    if kind not in DEVICE_CATEGORIES.values():
        raise WireError(f"{where}.kind: must be kernel, memcpy or memset")
    return KernelRecord(
        name=name,
        kind=str(kind),
        grid=_wire_dim3(value.get("grid"), f"{where}.grid"),
        block=_wire_dim3(value.get("block"), f"{where}.block"),
        stream=_wire_int(value.get("stream"), f"{where}.stream"),
        start_us=_wire_number(value.get("start_us"), f"{where}.start_us", minimum=None),
        duration_us=_wire_number(value.get("duration_us"), f"{where}.duration_us"),
    )


def pass_from_wire(value: Any) -> ProfiledPass:
    """A profiled pass as the candidate process sent it, every field checked and its sizes
    bounded. Raises WireError naming the field."""
    if not isinstance(value, dict):
        raise WireError("activity: must be an object")
    events = value.get("event_ms")
    windows = value.get("windows")
    if not isinstance(events, list) or not isinstance(windows, list):
        raise WireError("activity: needs the lists event_ms and windows")
    if not 0 < len(windows) <= MAX_WIRE_TRIALS or len(events) != len(windows):
        raise WireError(
            f"activity: needs 1 to {MAX_WIRE_TRIALS} windows and one event time per window "
            f"(got {len(windows)} windows, {len(events)} event times)"
        )
    event_ms = [_wire_number(e, f"event_ms[{i}]") for i, e in enumerate(events)]
    out: list[WindowActivity] = []
    for i, w in enumerate(windows):
        where = f"windows[{i}]"
        if not isinstance(w, dict):
            raise WireError(f"{where}: must be an object")
        ops = w.get("ops")
        if not isinstance(ops, list) or len(ops) > MAX_WIRE_OPS:
            raise WireError(f"{where}.ops: must be a list of at most {MAX_WIRE_OPS} operations")
        stream = w.get("launch_stream")
        out.append(
            WindowActivity(
                trial=i,
                ops=[_wire_op(op, f"{where}.ops[{j}]") for j, op in enumerate(ops)],
                launch_stream=None
                if stream is None
                else _wire_int(stream, f"{where}.launch_stream"),
            )
        )
    return ProfiledPass(out, event_ms, source=SOURCE_CANDIDATE)


def cross_check(profiled: ProfiledPass, triton_launches: int = -1) -> list[Flag]:
    """The judge's checks of a candidate-reported pass against what else it knows: the
    launch stream's operations of a trial run between that trial's start and end events, so
    their busy time cannot exceed the event time (beyond the bound); and a kernel whose
    correctness calls launched Triton kernels (`triton_launches` > 0, as the candidate
    process counted them) launches some kernel when timed."""
    flags: list[Flag] = []
    for w, event in zip(profiled.windows, profiled.event_ms, strict=False):
        own = union_length((op.start_us, op.end_us) for op in w.ops if op.stream == w.launch_stream)
        if exceeds(own / 1e3, event):
            flags.append(
                Flag(
                    "activity_exceeds_event",
                    f"profiled trial {w.trial + 1}: the launch stream was busy for "
                    f"{own / 1e3:.4g} ms by the kernel records but the events measured "
                    f"{event:.4g} ms: records and events cannot both be true",
                )
            )
            break
    if triton_launches > 0 and not any(w.has_kernel for w in profiled.windows):
        flags.append(
            Flag(
                "activity_disagrees_with_launches",
                f"the kernel launched {triton_launches} Triton kernel(s) per correctness call "
                "but no kernel in any profiled timed trial: it behaves differently when timed, "
                "or its kernel records are not what ran",
            )
        )
    return flags
