"""Builds a kernel's arguments: from an IOContract or from KernelBench's get_inputs().

Seeds come only from the job's server seed, mixed (SHA-256) with the trial index, the
argument name and the optional init.seed, so user code cannot predict them from anything
it can read. Random tensors are drawn on the job's device with a private generator, so the
same seed gives the same inputs on the same kind of device.

KernelBench's get_inputs() and get_init_inputs() run with the job's device as torch's
default device (`with torch.device(...)`), under the trial's seed: their tensors are drawn
there directly, not on the CPU and copied (for a 6 GB input, 0.01 s instead of 10 s). The
values differ from a CPU draw of the same seed but have the same distribution. A problem
whose functions fail that way (e.g. they call `.numpy()`) falls back to the CPU path for the
rest of the job, and the result says so (metadata.get_inputs_device, a warning).

Integer tensors: `uniform` draws integers in [ceil(low), floor(high)] (both ends
included); without an init they are uniform in [0, 9]. Bool tensors: `uniform` or no init
draws False/True with equal odds. Literal `data` is little-endian, optionally zlib'd.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from kforge_worker.core.spec import (
    ArgSpec,
    InitSpec,
    IOContract,
    TensorData,
    TensorSpec,
    tensor_bytes,
)

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}


class InputError(ValueError):
    """An argument cannot be built as declared."""


def derive_seed(server_seed: int, *parts: object) -> int:
    """A 63-bit seed from the server seed and labels (trial index, arg name, ...)."""
    text = ":".join([str(server_seed), *(str(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


@dataclass(frozen=True)
class BoundArg:
    """One argument value with the role it was declared with."""

    name: str
    value: Any
    role: str = "input"  # input | output | inout
    is_meta: bool = False

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.value, torch.Tensor)


@dataclass(frozen=True)
class InputSet:
    """One trial's arguments. `from_io` is False for KernelBench get_inputs() lists."""

    args: tuple[BoundArg, ...]
    from_io: bool

    def clone(self) -> InputSet:
        return replace(self, args=tuple(replace(a, value=clone_value(a.value)) for a in self.args))

    def shared(self) -> InputSet:
        """The same values as new tensor objects on the same memory (detached views), for an
        invocation the judge only sends to the candidate process, which works on its own
        copy: a clone() there cost one more device copy of GB-sized inputs per call."""
        return replace(self, args=tuple(replace(a, value=_view(a.value)) for a in self.args))

    def tensors(self, roles: tuple[str, ...]) -> list[BoundArg]:
        return [a for a in self.args if a.is_tensor and a.role in roles]


def clone_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list | tuple):
        return type(value)(clone_value(v) for v in value)
    return value


def _view(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, list | tuple):
        return type(value)(_view(v) for v in value)
    return value


def _generator(device: torch.device, seed: int) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def _random_tensor(
    spec: TensorSpec, init: InitSpec, device: torch.device, seed: int
) -> torch.Tensor:
    dtype = DTYPES[spec.dtype]
    shape = spec.shape
    gen = _generator(device, seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen, device=device).bool()
    if not dtype.is_floating_point:
        low, high = math.ceil(init.low), math.floor(init.high)
        if init.kind == "randn":
            raise InputError(f"init 'randn' needs a floating dtype, got {spec.dtype}")
        if low > high:
            raise InputError(f"no integer lies in [{init.low}, {init.high}]")
        return torch.randint(low, high + 1, shape, generator=gen, device=device, dtype=dtype)
    if init.kind == "randn":
        t = torch.randn(shape, generator=gen, device=device, dtype=dtype)
        if init.std != 1.0 or init.mean != 0.0:
            t.mul_(init.std).add_(init.mean)
        return t
    t = torch.empty(shape, device=device, dtype=dtype)
    return t.uniform_(init.low, init.high, generator=gen)


def decode_tensor_data(data: TensorData, device: torch.device) -> torch.Tensor:
    """Literal contents: base64, optionally zlib-compressed, little-endian. Decoded once per
    process (spec.tensor_bytes: the parser already did, and checked the size)."""
    try:
        raw = tensor_bytes(data)
    except ValueError as e:
        raise InputError(f"bad tensor data: {e}") from e
    dtype = DTYPES[data.dtype]
    if math.prod(data.shape) == 0:
        return torch.empty(data.shape, dtype=dtype, device=device)
    flat = torch.frombuffer(bytearray(raw), dtype=dtype)
    return flat.reshape(data.shape).to(device)


def make_tensor(spec: TensorSpec, device: torch.device, seed: int) -> torch.Tensor:
    """A tensor per its spec; `seed` is already mixed for this trial and argument."""
    dtype = DTYPES[spec.dtype]
    if spec.data is not None:
        t = decode_tensor_data(spec.data, device)
        if tuple(t.shape) != spec.shape or t.dtype != dtype:
            raise InputError("tensor data's shape/dtype differ from the tensor_spec")
        return t
    init = spec.init
    if init is None:
        default_kind = "randn" if dtype.is_floating_point else "uniform"
        init = InitSpec(kind=default_kind, low=0.0, high=9.0)
    if init.kind in ("randn", "uniform"):
        return _random_tensor(spec, init, device, seed)
    if init.kind == "zeros":
        return torch.zeros(spec.shape, dtype=dtype, device=device)
    if init.kind == "ones":
        return torch.ones(spec.shape, dtype=dtype, device=device)
    if init.kind == "full":
        return torch.full(spec.shape, init.fill_value, dtype=dtype, device=device)
    if init.kind == "arange":
        n = math.prod(spec.shape)
        values = torch.arange(n, dtype=torch.float64, device=device) * init.step + init.start
        return values.reshape(spec.shape).to(dtype)
    raise InputError(f"unknown init kind {init.kind!r}")


def _scalar(arg: ArgSpec) -> Any:
    if arg.type == "int":
        return int(arg.value)
    if arg.type == "float":
        return float(arg.value)
    if arg.type == "bool":
        return bool(arg.value)
    return str(arg.value)


def make_io_inputs(io: IOContract, server_seed: int, trial: int, device: torch.device) -> InputSet:
    """One trial's arguments from an IOContract. Output-only tensors are allocated empty;
    the caller poisons them before the kernel runs."""
    args = []
    for arg in io.args:
        if not arg.is_tensor:
            args.append(BoundArg(arg.name, _scalar(arg), role="input", is_meta=arg.is_meta))
            continue
        spec = arg.tensor_spec
        assert spec is not None
        if arg.role == "output":
            value = torch.empty(spec.shape, dtype=DTYPES[spec.dtype], device=device)
        else:
            init_seed = spec.init.seed if spec.init is not None else None
            seed = derive_seed(server_seed, "trial", trial, "arg", arg.name, "init", init_seed)
            try:
                value = make_tensor(spec, device, seed)
            except InputError as e:
                raise InputError(f"argument {arg.name!r}: {e}") from e
        args.append(BoundArg(arg.name, value, role=arg.role))
    return InputSet(args=tuple(args), from_io=True)


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, device) for v in value)
    return value


def seed_generators(seed: int, device: torch.device) -> None:
    """What torch.manual_seed does to the cpu's generator and `device`'s, in about a
    microsecond (torch.manual_seed visits every backend: ~60 us on a cpu): a timed call is
    seeded between the judge's brackets, and so is its verification."""
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        if torch.cuda.is_initialized():
            index = device.index if device.index is not None else torch.cuda.current_device()
            torch.cuda.default_generators[index].manual_seed(seed)
        else:
            torch.cuda.manual_seed_all(seed)


def call_seeded(fn: Callable[[], Any], seed: int) -> Any:
    """Calls a user function (get_inputs, get_init_inputs, Model(...)) under torch.manual_seed."""
    torch.manual_seed(seed)
    return fn()


class ProblemCalls:
    """Calls a KernelBench problem's get_inputs()/get_init_inputs() under a seed with the
    job's device as torch's default device; after the first call that raises there, every
    call of the job runs on the CPU (the old path) and `fallback` says why."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.fallback: str | None = None

    @property
    def generated_on(self) -> str:
        """Where the problem's tensors are drawn: the device, or "cpu" after a fallback."""
        return "cpu" if self.fallback is not None else str(self.device)

    def call(self, fn: Callable[[], Any], seed: int, what: str) -> Any:
        """fn() under `seed`; an exception from the CPU path propagates."""
        if self.device.type != "cpu" and self.fallback is None:
            try:
                with self.device:
                    return call_seeded(fn, seed)
            except Exception as e:
                self.fallback = (
                    f"{what} raised {type(e).__name__} with {self.device} as torch's default "
                    f"device ({str(e)[:200]}); the problem's inputs are made on the cpu"
                )
        return call_seeded(fn, seed)


def make_kernelbench_inputs(
    get_inputs: Callable[[], Any],
    server_seed: int,
    trial: int,
    device: torch.device,
    calls: ProblemCalls | None = None,
) -> InputSet:
    """One trial's arguments from KernelBench's get_inputs() (made on the device through
    `calls`, else on the CPU), moved to the device."""
    seed = derive_seed(server_seed, "trial", trial, "get_inputs")
    if calls is None:
        values = call_seeded(get_inputs, seed)
    else:
        values = calls.call(get_inputs, seed, "get_inputs()")
    if not isinstance(values, list | tuple):
        raise InputError(f"get_inputs() must return a list, got {type(values).__name__}")
    args = tuple(BoundArg(f"arg{i}", to_device(v, device)) for i, v in enumerate(values))
    return InputSet(args=args, from_io=False)


def summarize(inputs: InputSet, io: IOContract | None) -> list[dict[str, Any]]:
    """What the inputs were, for result metadata (no values of tensors)."""
    specs = {a.name: a for a in io.args} if io is not None else {}
    out: list[dict[str, Any]] = []
    for a in inputs.args:
        entry: dict[str, Any] = {"name": a.name, "role": a.role}
        if isinstance(a.value, torch.Tensor):
            entry.update(dtype=str(a.value.dtype).removeprefix("torch."), shape=list(a.value.shape))
            spec = specs.get(a.name)
            if spec is not None and spec.tensor_spec is not None and a.role != "output":
                ts = spec.tensor_spec
                if ts.data is not None:
                    entry["init"] = "data"
                else:
                    entry["init"] = ts.init.kind if ts.init is not None else "default"
        else:
            entry.update(type=type(a.value).__name__, value=a.value if _plain(a.value) else None)
            if a.is_meta:
                entry["is_meta"] = True
        out.append(entry)
    return out


def _plain(value: Any) -> bool:
    return isinstance(value, int | float | str | bool) or value is None
