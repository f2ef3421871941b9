"""Request models: KernelCode and its IOContract, as the kernel evaluation server defined them.

Plain dataclasses (no pydantic needed). Nested values may be given as dicts, as with the old
server's pydantic models: `ArgSpec(name="x", type="tensor", tensor_spec={"shape": [8]})` and
`KernelCode(source_code=..., kernel_type="torch")` are converted on construction. `to_dict()`
gives the JSON body (fields that are None are left out); `from_dict()` reads one back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar, Union

__all__ = [
    "ArgSpec",
    "IOContract",
    "KernelCode",
    "KernelType",
    "LaunchConfig",
    "LaunchDim",
    "RuntimeStats",
    "Scalar",
    "TensorData",
    "TensorInit",
    "TensorSpec",
    "as_kernel_dict",
]

Scalar = Union[int, float, str, bool]

T = TypeVar("T", bound="_Model")


class KernelType(str, Enum):
    """Kernel implementation types."""

    TORCH = "torch"  # a PyTorch module (KernelBench Model / ModelNew) or a named function
    CUDA = "cuda"  # raw CUDA C++ (__global__ functions), launched by the server
    TRITON = "triton"  # a @triton.jit kernel or a Python wrapper that launches one
    TORCH_CUDA = "torch_cuda"  # PyTorch with inline CUDA (load_inline)
    MULTI_KERNEL = "multi_kernel"  # a Python entry point mixing kernel types


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    return value


class _Model:
    """to_dict / from_dict for the dataclasses below."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: fields that are None are left out, enums become their values."""
        out: dict[str, Any] = _drop_none(dataclasses.asdict(self))  # type: ignore[call-overload]
        return out

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        """Builds the model from its JSON form; unknown keys are ignored (as the old server's
        models ignored them)."""
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__}.from_dict needs a dict, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})


def _coerce(value: Any, model: type[T]) -> T | None:
    if value is None or isinstance(value, model):
        return value
    if isinstance(value, dict):
        return model.from_dict(value)
    raise TypeError(f"expected {model.__name__} or a dict, got {type(value).__name__}")


@dataclass
class TensorInit(_Model):
    """How the server generates a tensor: randn, uniform, zeros, ones, full or arange."""

    kind: str = "randn"
    seed: int | None = None
    mean: float | None = None  # randn
    std: float | None = None  # randn
    low: float | None = None  # uniform
    high: float | None = None  # uniform
    fill_value: float | None = None  # full
    start: float | None = None  # arange
    step: float | None = None  # arange


@dataclass
class TensorData(_Model):
    """Literal tensor contents: base64 of the raw little-endian bytes, optionally zlib."""

    data_b64: str
    dtype: str = "float32"
    shape: list[int] = field(default_factory=list)
    compress: str = "none"  # "none" | "zlib"


@dataclass
class TensorSpec(_Model):
    """A tensor argument: its shape and dtype, and `init` (generated) or `data` (literal)."""

    shape: list[int] = field(default_factory=list)
    dtype: str = "float32"
    init: TensorInit | None = None
    data: TensorData | None = None

    def __post_init__(self) -> None:
        self.shape = list(self.shape)
        self.init = _coerce(self.init, TensorInit)
        self.data = _coerce(self.data, TensorData)


@dataclass
class LaunchDim(_Model):
    x: int = 1
    y: int = 1
    z: int = 1


@dataclass
class LaunchConfig(_Model):
    """grid (CUDA and Triton), block and shared_mem_bytes (CUDA: dynamic shared memory per
    block), num_warps / num_stages (Triton)."""

    grid: LaunchDim | None = None
    block: LaunchDim | None = None
    shared_mem_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None

    def __post_init__(self) -> None:
        self.grid = _coerce(self.grid, LaunchDim)
        self.block = _coerce(self.block, LaunchDim)


@dataclass
class ArgSpec(_Model):
    """One kernel argument, in call order: a tensor (tensor_spec) or a scalar (value)."""

    name: str
    type: str = "tensor"  # "tensor" | "int" | "float" | "str" | "bool"
    value: Scalar | None = None
    tensor_spec: TensorSpec | None = None
    role: str = "input"  # "input" | "output" | "inout"
    is_meta: bool = False  # a Triton constexpr

    def __post_init__(self) -> None:
        self.tensor_spec = _coerce(self.tensor_spec, TensorSpec)


@dataclass
class IOContract(_Model):
    """The kernel's arguments and launch configuration."""

    args: list[ArgSpec] = field(default_factory=list)
    launch: LaunchConfig | None = None

    def __post_init__(self) -> None:
        self.args = [a if isinstance(a, ArgSpec) else ArgSpec.from_dict(a) for a in self.args]
        self.launch = _coerce(self.launch, LaunchConfig)


@dataclass
class KernelCode(_Model):
    """A kernel: its source, type, optional IOContract and metadata.

    metadata keys the server reads: entry_point, kernel_name (triton, cuda), compile_options
    (or the old compiler_options) for cuda, function_name / class_name / method_name (torch).
    """

    source_code: str
    kernel_type: KernelType = KernelType.TORCH
    io: IOContract | None = None
    metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.kernel_type = KernelType(self.kernel_type)
        self.io = _coerce(self.io, IOContract)
        if self.metadata is not None and not isinstance(self.metadata, dict):
            raise TypeError(f"metadata must be a dict, got {type(self.metadata).__name__}")


@dataclass
class RuntimeStats:
    """Runtime statistics in milliseconds. Readable as attributes (stats.mean) and as a
    mapping (stats["mean"]), so code written for either form of the old client works."""

    mean: float
    std: float
    min: float
    max: float
    median: float
    percentile_95: float = 0.0
    percentile_99: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)  # kforge's fields: trials, method, ...

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RuntimeStats:
        """Missing fields read as 0.0; other keys are kept in `extra`."""
        known = ("mean", "std", "min", "max", "median", "percentile_95", "percentile_99")
        values = {k: float(d.get(k) or 0.0) for k in known}
        return cls(**values, extra={k: v for k, v in d.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "extra"}
        out.update(self.extra)
        return out

    def __getitem__(self, key: str) -> Any:
        data = self.to_dict()
        if key not in data:
            raise KeyError(key)
        return data[key]

    def __contains__(self, key: object) -> bool:
        return key in self.to_dict()

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_dict().get(key, default)

    def keys(self) -> list[str]:
        return list(self.to_dict())


def as_kernel_dict(kernel: KernelCode | dict[str, Any]) -> dict[str, Any]:
    """The JSON form of a kernel given as a KernelCode or already as a dict."""
    if isinstance(kernel, KernelCode):
        return kernel.to_dict()
    if isinstance(kernel, dict):
        return _drop_none(kernel)  # type: ignore[no-any-return]
    raise TypeError(f"a kernel must be a KernelCode or a dict, got {type(kernel).__name__}")
