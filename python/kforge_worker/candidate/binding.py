"""How one trial's arguments are passed to a kernel, and how its outputs are read back.

Calling conventions (docs/evaluation-protocol.md, "The compare rule"):
- KernelBench lists (get_inputs()): every callable receives the same positional list.
- A Triton-style kernel (triton, multi_kernel) with its own IOContract receives every
  non-meta argument positionally, outputs included, and the meta (constexpr) arguments as
  keywords; its outputs are its output/inout tensors (or its return value if it declares
  none).
- A torch Model called with an IOContract receives the non-output, non-meta arguments
  positionally and the meta ones as keywords; a torch reference of a candidate's IOContract
  receives only the input/inout tensors. Its outputs are its return value(s).
- A torch callable with an IOContract of its own whose signature cannot take those, but
  takes every argument of its IOContract positionally in declared order (outputs, scalars
  and meta ones too), is called that way: the kernel evaluation server's convention
  (takes_io_positionally). Its outputs are still its return value(s).

Output buffers are poisoned before a run (NaN for floats, a bit pattern for integers) so
elements a kernel never writes cannot pass; where the expected outputs are known (the judge's
correctness trials), with a value outside every expected value's tolerance (poison_for).

An invocation crosses to the candidate process as a plan (plan_invocation: one slot per
argument object, a large uniformly filled output described by its fill) and is rebuilt there
(invocation_from_plan).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from kforge_worker.candidate import wire
from kforge_worker.check.bits import bits_view
from kforge_worker.check.compare import (
    Tolerance,
    clear_of_every_value,
    finite_range,
)
from kforge_worker.core.inputs import DTYPES, BoundArg, InputSet
from kforge_worker.core.spec import IOContract

_INT_PATTERNS = (0x5A, 0x25)


@dataclass
class Invocation:
    args: list[Any]
    kwargs: dict[str, Any]
    outputs: list[BoundArg] = field(default_factory=list)  # written in place; [] = return value
    read_only: list[BoundArg] = field(default_factory=list)  # must be unchanged afterwards
    # Output buffers passed as arguments that the kernel may write but whose contents are not
    # its outputs (bind_all_positional: its outputs are its return value).
    writable: list[BoundArg] = field(default_factory=list)

    @property
    def output_only(self) -> list[BoundArg]:
        """Declared outputs with role `output` (no input data): the ones to poison."""
        return [a for a in self.outputs if a.role == "output"]


def bind_positional(inputs: InputSet) -> Invocation:
    args = list(inputs.args)
    return Invocation([a.value for a in args], {}, read_only=[a for a in args if a.is_tensor])


def bind_own(inputs: InputSet) -> Invocation:
    """Triton style, the arguments built from this kernel's own IOContract."""
    args = [a.value for a in inputs.args if not a.is_meta]
    kwargs = {a.name: a.value for a in inputs.args if a.is_meta}
    return Invocation(args, kwargs, inputs.tensors(("output", "inout")), inputs.tensors(("input",)))


def bind_values(inputs: InputSet) -> Invocation:
    """A torch Model with an IOContract: non-output args positionally, meta as keywords."""
    args = [a.value for a in inputs.args if not a.is_meta and a.role != "output"]
    kwargs = {a.name: a.value for a in inputs.args if a.is_meta}
    return Invocation(args, kwargs, read_only=inputs.tensors(("input",)))


def bind_read_tensors(inputs: InputSet) -> Invocation:
    """A torch reference of a candidate's IOContract: input/inout tensors only."""
    tensors = inputs.tensors(("input", "inout"))
    return Invocation([a.value for a in tensors], {}, read_only=inputs.tensors(("input",)))


def bind_all_positional(inputs: InputSet) -> Invocation:
    """The kernel evaluation server's convention for a torch callable with an IOContract:
    every argument positionally, in declared order (outputs, scalars and meta ones too). Its
    outputs are its return value(s); the output buffers it is passed are only its to write."""
    return Invocation(
        [a.value for a in inputs.args],
        {},
        read_only=inputs.tensors(("input",)),
        writable=inputs.tensors(("output", "inout")),
    )


def _binds(signature: inspect.Signature, positional: int, keywords: list[str]) -> bool:
    try:
        signature.bind(*range(positional), **dict.fromkeys(keywords))
    except TypeError:
        return False
    return True


def takes_io_positionally(
    signature: inspect.Signature | None, io: IOContract | None, *, tensors_only: bool
) -> bool:
    """Whether a torch callable with the IOContract `io` of its own is to be called as the
    kernel evaluation server called it (bind_all_positional): its signature cannot take what
    kforge passes (bind_values, or with `tensors_only` bind_read_tensors: a reference of the
    candidate's IOContract) but takes every argument of `io` positionally. A callable that
    takes kforge's arguments is called as before; one that takes neither fails as it would."""
    if signature is None or io is None or not io.args:
        return False
    if tensors_only:
        usual = sum(1 for a in io.args if a.is_tensor and a.role in ("input", "inout"))
        keywords: list[str] = []
    else:
        usual = sum(1 for a in io.args if not a.is_meta and a.role != "output")
        keywords = [a.name for a in io.args if a.is_meta]
    if _binds(signature, usual, keywords):
        return False
    return _binds(signature, len(io.args), [])


def foreign_inputs(inputs: InputSet, io: IOContract, device: torch.device) -> InputSet:
    """The arguments of a kernel whose own IOContract differs from the one that defined the
    inputs: its input/inout tensors take the defining tensors in order, its scalars come from
    its own contract and its output-only tensors are fresh zeros."""
    source = iter(inputs.tensors(("input", "inout")))
    bound: list[BoundArg] = []
    for spec in io.args:
        if not spec.is_tensor:
            bound.append(BoundArg(spec.name, spec.value, "input", spec.is_meta))
        elif spec.role == "output":
            ts = spec.tensor_spec
            assert ts is not None
            zeros = torch.zeros(ts.shape, dtype=DTYPES[ts.dtype], device=device)
            bound.append(BoundArg(spec.name, zeros, "output"))
        else:
            taken = next(source, None)
            if taken is None:
                raise ValueError(
                    f"argument {spec.name!r}: the reference declares more input tensors than "
                    "the candidate's IOContract provides"
                )
            bound.append(BoundArg(spec.name, taken.value, spec.role))
    return InputSet(tuple(bound), from_io=True)


def bind_foreign(inputs: InputSet, io: IOContract, device: torch.device) -> Invocation:
    """Triton style, for a kernel whose own IOContract differs from the one that defined the
    inputs (foreign_inputs)."""
    return bind_own(foreign_inputs(inputs, io, device))


def collect_outputs(inv: Invocation, returned: Any) -> list[tuple[str, Any]]:
    """(name, value) of each output: declared output buffers, else the return value(s)."""
    if inv.outputs:
        return [(a.name, a.value) for a in inv.outputs]
    if returned is None:
        return []
    if isinstance(returned, list | tuple):
        return [(f"output[{i}]", v) for i, v in enumerate(returned)]
    return [("output", returned)]


def poison_value(dtype: torch.dtype, variant: int) -> float | int | bool:
    """Variant 0 and 1 differ in every bit pattern that matters."""
    if dtype == torch.bool:
        return variant == 0
    if dtype.is_floating_point:
        return float("nan") if variant == 0 else -8573.0
    pattern = _INT_PATTERNS[variant % 2]
    size = torch.empty((), dtype=dtype).element_size()
    value = int.from_bytes(bytes([pattern]) * size, "little")
    return value


def poison(outputs: list[BoundArg], variant: int = 0) -> None:
    with torch.no_grad():
        for a in outputs:
            a.value.fill_(poison_value(a.value.dtype, variant))


def poison_against(outputs: list[BoundArg], expected: list[Any]) -> None:
    """Fills each buffer with values that differ from the expected output at every element
    (NaN where finite values are expected, 0 where NaN is; bitwise NOT for integers/bool);
    generic poison where shapes or dtypes differ."""
    with torch.no_grad():
        for i, a in enumerate(outputs):
            want = expected[i] if i < len(expected) else None
            buf = a.value
            if (
                not isinstance(want, torch.Tensor)
                or want.shape != buf.shape
                or (want.dtype != buf.dtype)
            ):
                buf.fill_(poison_value(buf.dtype, 0))
            elif buf.dtype.is_floating_point:
                nan = torch.full_like(buf, float("nan"))
                buf.copy_(torch.where(torch.isnan(want.to(buf.device)), torch.zeros_like(buf), nan))
            else:
                buf.copy_(torch.bitwise_not(want.to(buf.device)))


def is_poison(t: torch.Tensor, variant: int) -> torch.Tensor:
    """Elementwise: still holds the generic poison `variant`."""
    value = poison_value(t.dtype, variant)
    if t.dtype.is_floating_point and variant == 0:
        return torch.isnan(t)
    return t == torch.tensor(value, dtype=t.dtype, device=t.device)


def timing_rotation(
    slots: list[dict[str, Any]], values: list[Any], set_count: int
) -> tuple[list[int], list[int]]:
    """The slots a timed trial loop on `set_count` input sets refreshes before every trial,
    and those it only checks unchanged. With several sets every input and inout tensor is
    copied from the next set (`restored`); with one set only an inout one is (from a pristine
    copy), and a read-only input keeps its values, checked by digest before the first trial
    and after the last (`unchanged`). The candidate's loop and the judge's empty trials both
    follow this, so the judge copies what the candidate copies."""
    rotating = [
        i
        for i, slot in enumerate(slots)
        if slot.get("role") in ("input", "inout") and isinstance(values[i], torch.Tensor)
    ]
    if set_count > 1:
        return rotating, []
    restored = [i for i in rotating if slots[i].get("role") == "inout"]
    return restored, [i for i in rotating if i not in restored]


def copy_returned(inv: Invocation, value: object, places: list[torch.Tensor]) -> None:
    """Copies what a call returned into the judge's places for it (nothing when the call
    writes declared buffers). A returned output of another shape or dtype than the place the
    judge made from the reference's is an error of the kernel's."""
    if inv.outputs or not places:
        return
    outputs = collect_outputs(inv, value)
    if len(outputs) != len(places):
        raise RuntimeError(f"the kernel returned {len(outputs)} output(s), expected {len(places)}")
    for (name, got), place in zip(outputs, places, strict=True):
        if not isinstance(got, torch.Tensor):
            raise RuntimeError(f"output '{name}' is a {type(got).__name__}, not a tensor")
        if got.shape != place.shape or got.dtype != place.dtype:
            raise RuntimeError(
                f"output '{name}' has shape {tuple(got.shape)} and dtype {got.dtype}, "
                f"expected {tuple(place.shape)} and {place.dtype}"
            )
        place.copy_(got)


def invocation_from_plan(
    plan: dict[str, Any], slots: Any, device: torch.device | None = None
) -> Invocation:
    """Rebuilds the judge's Invocation (plan_invocation) from its plan and the slot
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
    """The output buffer a slot's `fill` describes (uniform_fill)."""
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


def poison_for(buf: torch.Tensor, want: Any, tol: Tolerance) -> None:
    """Fills `buf` with values that differ from `want` at every element and tell nothing
    about it: one constant outside every expected value's tolerance (floats, integers),
    random bits (bool, where no such constant exists)."""
    with torch.no_grad():
        if not isinstance(want, torch.Tensor) or want.shape != buf.shape or want.dtype != buf.dtype:
            buf.fill_(poison_value(buf.dtype, 0))
            return
        want = want.to(buf.device)
        if buf.dtype == torch.bool:
            buf.copy_(torch.randint(0, 2, buf.shape, device=buf.device).bool())
            return
        if buf.dtype.is_floating_point:
            # First from the expected values' finite range (one pass, no copy of them: a
            # float64 copy and masks of a 6 GB output took tens of GB); only when every
            # constant lies inside it, element by element, a chunk at a time.
            info = torch.finfo(buf.dtype)
            constants = [
                c
                for c in (info.max, info.min, info.max / 3, -info.max / 3, 1e30, -1e30)
                if abs(c) <= info.max  # an infinity could equal an expected one
            ]
            bounds = finite_range(want)
            chosen = next(
                (c for c in constants if bounds is None or _clear_of(c, bounds, tol)), None
            )
            if chosen is None:
                clear = (c for c in constants if clear_of_every_value(c, want, tol))
                chosen = next(clear, math.nan)
            buf.fill_(chosen)
            return
        info_i = torch.iinfo(buf.dtype)
        for c in (info_i.max, info_i.min, info_i.max // 3, info_i.min // 3):
            if not bool((want == c).any()):
                buf.fill_(c)
                return
        buf.fill_(poison_value(buf.dtype, 0))


def _clear_of(c: float, bounds: tuple[float, float], tol: Tolerance) -> bool:
    """Whether `c` is outside the tolerance of every value in [low, high]: beyond the range by
    more than the widest tolerance of any value in it (with a margin for rounding)."""
    low, high = bounds
    reach = (tol.atol + tol.rtol * max(abs(low), abs(high))) * (1 + 1e-6)
    return c - high > reach or low - c > reach


def plan_invocation(inv: Invocation, *, fills: bool = False) -> tuple[dict[str, Any], list[Any]]:
    """The invocation as a plan of slots (one per argument object) and the slot values. With
    `fills`, a large output buffer holding one value everywhere (a poisoned one) is described
    by its slot's `fill` instead of sent (its value None): the candidate makes it itself."""
    slots: list[dict[str, Any]] = []
    values: list[Any] = []
    by_id: dict[int, int] = {}

    def slot_of(value: Any, name: str, role: str, is_meta: bool) -> int:
        key = id(value)
        if key not in by_id:
            by_id[key] = len(slots)
            slots.append({"name": name, "role": role, "is_meta": is_meta})
            values.append(value)
        return by_id[key]

    named = {id(a.value): a for a in [*inv.outputs, *inv.read_only, *inv.writable]}

    def ref(value: Any, fallback: str) -> dict[str, Any]:
        if isinstance(value, torch.Tensor | list | tuple):
            arg = named.get(id(value))
            name = arg.name if arg else fallback
            role = arg.role if arg else "input"
            return {"slot": slot_of(value, name, role, bool(arg and arg.is_meta))}
        return {"lit": wire.encode(value, [])}

    plan: dict[str, Any] = {
        "args": [ref(v, f"arg{i}") for i, v in enumerate(inv.args)],
        "kwargs": {k: ref(v, k) for k, v in inv.kwargs.items()},
    }
    plan["outputs"] = [slot_of(a.value, a.name, a.role, a.is_meta) for a in inv.outputs]
    plan["read_only"] = [slot_of(a.value, a.name, a.role, a.is_meta) for a in inv.read_only]
    if fills:
        for i, slot in enumerate(slots):
            fill = uniform_fill(values[i]) if slot["role"] == "output" else None
            if fill is not None:
                slot["fill"], values[i] = fill, None
    plan["slots"] = slots
    return plan, values


def uniform_fill(value: Any) -> dict[str, Any] | None:
    """`{"dtype", "shape", "value"}` of a tensor of at least wire.FD_MIN_BYTES whose every
    element has the same bits, where torch.full rebuilds exactly those bits; else None."""
    if not isinstance(value, torch.Tensor) or value.dtype not in wire.NAMES:
        return None
    if value.numel() * value.element_size() < wire.FD_MIN_BYTES:
        return None
    bits = bits_view(value.detach().reshape(-1))  # None for complex dtypes
    if bits is None or not bool((bits == bits[0]).all()):
        return None
    encoded = wire.encode(value.reshape(-1)[0].item(), [])
    scalar = wire.decode(encoded, [])  # what the candidate will read
    rebuilt = bits_view(torch.full((1,), scalar, dtype=value.dtype, device=value.device))
    if rebuilt is None or not bool(rebuilt[0] == bits[0]):  # e.g. a NaN with a payload
        return None
    return {"dtype": wire.dtype_name(value.dtype), "shape": list(value.shape), "value": encoded}
