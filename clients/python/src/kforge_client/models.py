"""Request models: KernelCode and its IOContract, as the kernel evaluation server defined them.

Plain dataclasses (no pydantic needed). Nested values may be given as dicts, as with the old
server's pydantic models: `ArgSpec(name="x", type="tensor", tensor_spec={"shape": [8]})` and
`KernelCode(source_code=..., kernel_type="torch")` are converted on construction, and so are
launch dimensions given as an int or a tuple (`LaunchConfig(grid=(4, 1, 1))`). `to_dict()`
gives the JSON body (fields that are None are left out); `from_dict()` reads one back. Values
the JSON body cannot carry as they are (a shape that is not a list of ints, a grid of four
numbers) raise at construction, naming the field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, TypeVar, Union

__all__ = [
    "ArgSpec",
    "BaseKernelMetadata",
    "CudaKernelMetadata",
    "IOContract",
    "KernelCode",
    "KernelType",
    "LaunchConfig",
    "LaunchDim",
    "MultiKernelMetadata",
    "RuntimeStats",
    "Scalar",
    "TensorData",
    "TensorInit",
    "TensorSpec",
    "TorchKernelMetadata",
    "TritonKernelMetadata",
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


def _plain(value: Any, drop_none: bool) -> Any:
    """A dumped value as JSON: enums become their values, typed metadata its dict; with
    drop_none, keys whose value is None are left out (the wire's "not given")."""
    if isinstance(value, BaseKernelMetadata):
        value = value.model_dump()
    if isinstance(value, dict):
        return {k: _plain(v, drop_none) for k, v in value.items() if not (drop_none and v is None)}
    if isinstance(value, list):
        return [_plain(v, drop_none) for v in value]
    if isinstance(value, Enum):
        return value.value
    return value


def _drop_none(value: Any) -> Any:
    return _plain(value, drop_none=True)


@contextlib.contextmanager
def field_errors(where: str) -> Iterator[None]:
    """Prefixes a TypeError or ValueError raised inside with `where` (the call or field the
    bad value came through), so the message says which value of the caller's was wrong."""
    try:
        yield
    except TypeError as e:
        raise TypeError(f"{where}: {e}") from e
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from e


def _int(where: str, value: Any) -> int:
    """`value` as an int for the JSON body: an int, numpy's ints (shapes often are) or a whole
    float (the old server's pydantic models took 4.0); a TypeError naming the field else."""
    if isinstance(value, bool):
        raise TypeError(f"{where} must be an int, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{where} must be an int, got {type(value).__name__} {value!r}") from None


def _optional_int(where: str, value: Any) -> int | None:
    return None if value is None else _int(where, value)


def _shape(where: str, value: Any) -> list[int]:
    """A shape: a list, tuple or torch.Size of ints, each at least 0."""
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise TypeError(f"{where} must be a list of ints, got {type(value).__name__} {value!r}")
    dims = [_int(f"{where}[{i}]", d) for i, d in enumerate(value)]
    for i, d in enumerate(dims):
        if d < 0:
            raise ValueError(f"{where}[{i}] must be >= 0, got {d}")
    return dims


def _str(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{where} must be a str, got {type(value).__name__} {value!r}")
    return value


class _Model:
    """to_dict / from_dict for the dataclasses below, and the pydantic methods that code
    written for the old server's (pydantic) models calls: model_dump, dict, model_validate."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: fields that are None are left out, enums become their values."""
        return self.model_dump(exclude_none=True)

    def model_dump(self, *, exclude_none: bool = False) -> dict[str, Any]:
        """Every field as plain data (nested models as dicts, enums as their values); fields
        that are None too, unless exclude_none (as pydantic's model_dump)."""
        out: dict[str, Any] = _plain(dataclasses.asdict(self), exclude_none)  # type: ignore[call-overload]
        return out

    @classmethod
    def from_dict(cls: type[T], d: dict[str, Any]) -> T:
        """Builds the model from its JSON form; unknown keys are ignored (as the old server's
        models ignored them)."""
        if not isinstance(d, dict):
            raise TypeError(f"{cls.__name__}.from_dict needs a dict, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def model_validate(cls: type[T], obj: Any) -> T:
        """The model itself, or the model built from its dict (as pydantic's)."""
        return obj if isinstance(obj, cls) else cls.from_dict(obj)

    # pydantic v1's name for model_dump (the old server's manual sends `kernel_code.dict()`).
    # Assigned last, so `dict` in the annotations above still means the builtin.
    dict = model_dump


def _coerce(value: Any, model: type[T], where: str) -> T | None:
    """A nested model given as the model or as its dict (as the old pydantic models took)."""
    if value is None or isinstance(value, model):
        return value
    if isinstance(value, dict):
        with field_errors(where):
            return model.from_dict(value)
    raise TypeError(
        f"{where} must be a {model.__name__} or a dict, got {type(value).__name__} {value!r}"
    )


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

    def __post_init__(self) -> None:
        self.kind = _str("TensorInit.kind", self.kind)
        self.seed = _optional_int("TensorInit.seed", self.seed)


@dataclass
class TensorData(_Model):
    """Literal tensor contents: base64 of the raw little-endian bytes, optionally zlib."""

    data_b64: str
    dtype: str = "float32"
    shape: list[int] = field(default_factory=list)
    compress: str = "none"  # "none" | "zlib"

    def __post_init__(self) -> None:
        self.shape = _shape("TensorData.shape", self.shape)


@dataclass
class TensorSpec(_Model):
    """A tensor argument: its shape and dtype, and `init` (generated) or `data` (literal)."""

    shape: list[int] = field(default_factory=list)
    dtype: str = "float32"
    init: TensorInit | None = None
    data: TensorData | None = None

    def __post_init__(self) -> None:
        self.shape = _shape("TensorSpec.shape", self.shape)
        self.dtype = _str("TensorSpec.dtype", self.dtype)
        self.init = _coerce(self.init, TensorInit, "TensorSpec.init")
        self.data = _coerce(self.data, TensorData, "TensorSpec.data")


@dataclass
class LaunchDim(_Model):
    """A grid or block size (x, y, z), each at least 1."""

    x: int = 1
    y: int = 1
    z: int = 1

    def __post_init__(self) -> None:
        for axis in ("x", "y", "z"):
            n = _int(f"LaunchDim.{axis}", getattr(self, axis))
            if n < 1:
                raise ValueError(f"LaunchDim.{axis} must be >= 1, got {n}")
            setattr(self, axis, n)


# What a grid or block may be given as: the server's {x, y, z} or [x, y?, z?] forms.
DimLike = Union[LaunchDim, dict[str, int], int, tuple[int, ...], list[int]]


def _launch_dim(where: str, value: Any) -> LaunchDim | None:
    """A grid or block given as a LaunchDim, a dict {x, y, z}, an int (x), or 1 to 3 ints
    (x, y, z; the docs' `grid=(4, 1, 1)`)."""
    if value is None or isinstance(value, LaunchDim):
        return value
    if isinstance(value, dict):
        return _coerce(value, LaunchDim, where)
    if isinstance(value, (list, tuple)):
        if not 1 <= len(value) <= 3:
            raise ValueError(f"{where} takes 1 to 3 dimensions (x, y, z), got {list(value)!r}")
        with field_errors(where):
            return LaunchDim(*value)
    if not isinstance(value, (str, bytes, float)) and hasattr(value, "__index__"):
        with field_errors(where):
            return LaunchDim(x=value)
    raise TypeError(
        f"{where} must be a LaunchDim, a dict {{x, y, z}}, an int or 1 to 3 ints, "
        f"got {type(value).__name__} {value!r}"
    )


@dataclass
class LaunchConfig(_Model):
    """grid (CUDA and Triton), block and shared_mem_bytes (CUDA: dynamic shared memory per
    block), num_warps / num_stages (Triton). grid and block may be given as an int, a tuple
    of 1 to 3 ints or a dict, as well as a LaunchDim."""

    grid: LaunchDim | None = None
    block: LaunchDim | None = None
    shared_mem_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None

    def __post_init__(self) -> None:
        self.grid = _launch_dim("LaunchConfig.grid", self.grid)
        self.block = _launch_dim("LaunchConfig.block", self.block)
        for name in ("shared_mem_bytes", "num_warps", "num_stages"):
            setattr(self, name, _optional_int(f"LaunchConfig.{name}", getattr(self, name)))


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
        self.name = _str("ArgSpec.name", self.name)
        where = f"ArgSpec({self.name!r})"
        self.type = _str(f"{where}.type", self.type)
        self.role = _str(f"{where}.role", self.role)
        self.tensor_spec = _coerce(self.tensor_spec, TensorSpec, f"{where}.tensor_spec")


@dataclass
class IOContract(_Model):
    """The kernel's arguments and launch configuration."""

    args: list[ArgSpec] = field(default_factory=list)
    launch: LaunchConfig | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.args, (list, tuple)):
            raise TypeError(f"IOContract.args must be a list, got {type(self.args).__name__}")
        self.args = [self._arg(i, a) for i, a in enumerate(self.args)]
        self.launch = _coerce(self.launch, LaunchConfig, "IOContract.launch")

    @staticmethod
    def _arg(index: int, arg: Any) -> ArgSpec:
        where = f"IOContract.args[{index}]"
        coerced = _coerce(arg, ArgSpec, where)
        if coerced is None:
            raise TypeError(f"{where} must be an ArgSpec or a dict, got None")
        return coerced


M = TypeVar("M", bound="BaseKernelMetadata")


class BaseKernelMetadata:
    """A typed view of KernelCode.metadata, as KernelCode.get_typed_metadata() returns it.
    Keys without a field of their own are kept as attributes too (the old server's metadata
    models allowed extra keys); model_dump() gives the dict back."""

    # Keys from_dict must find (the old server refused a multi_kernel without entry_point).
    required: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **extra: Any) -> None:
        for key, value in extra.items():
            setattr(self, key, value)

    @classmethod
    def from_dict(cls: type[M], d: dict[str, Any] | None) -> M:
        """Built from a metadata dict; an empty one gives the defaults."""
        missing = [key for key in cls.required if key not in (d or {})]
        if missing:
            raise ValueError(f"{cls.__name__} needs metadata.{missing[0]}")
        return cls(**(d or {}))

    def model_dump(self) -> dict[str, Any]:
        """Every field and extra key, as a dict."""
        return dict(vars(self))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class CudaKernelMetadata(BaseKernelMetadata):
    """metadata of a cuda kernel (kforge reads kernel_name and compiler_options; backend,
    name_expressions and jitify were the old server's CuPy settings and are only carried)."""

    def __init__(
        self,
        *,
        kernel_name: str | None = None,
        compiler_options: list[str] | None = None,
        backend: str = "nvrtc",
        name_expressions: list[str] | None = None,
        jitify: bool = False,
        **extra: Any,
    ) -> None:
        self.kernel_name = kernel_name
        self.compiler_options = compiler_options
        self.backend = backend
        self.name_expressions = name_expressions
        self.jitify = jitify
        super().__init__(**extra)


class TorchKernelMetadata(BaseKernelMetadata):
    """metadata of a torch kernel: the function, or the class and method, to run."""

    def __init__(
        self,
        *,
        function_name: str | None = None,
        class_name: str | None = None,
        method_name: str | None = None,
        **extra: Any,
    ) -> None:
        self.function_name = function_name
        self.class_name = class_name
        self.method_name = method_name
        super().__init__(**extra)


class TritonKernelMetadata(BaseKernelMetadata):
    """metadata of a triton kernel: the @triton.jit function to launch."""

    def __init__(self, *, kernel_name: str | None = None, **extra: Any) -> None:
        self.kernel_name = kernel_name
        super().__init__(**extra)


class MultiKernelMetadata(BaseKernelMetadata):
    """metadata of a multi_kernel script: its entry point (required)."""

    required = ("entry_point",)

    def __init__(self, *, entry_point: str, description: str | None = None, **extra: Any) -> None:
        self.entry_point = entry_point
        self.description = description
        super().__init__(**extra)


@dataclass
class KernelCode(_Model):
    """A kernel: its source, type, optional IOContract and metadata.

    metadata keys the server reads: entry_point, kernel_name (triton, cuda), compile_options
    (or the old compiler_options) for cuda, function_name / class_name / method_name (torch).
    It may be a dict or one of the *KernelMetadata classes.
    """

    source_code: str
    kernel_type: KernelType = KernelType.TORCH
    io: IOContract | None = None
    metadata: dict[str, Any] | BaseKernelMetadata | None = None

    def __post_init__(self) -> None:
        self.source_code = _str("KernelCode.source_code", self.source_code)
        self.kernel_type = KernelType(self.kernel_type)
        self.io = _coerce(self.io, IOContract, "KernelCode.io")
        if self.metadata is not None and not isinstance(self.metadata, (dict, BaseKernelMetadata)):
            raise TypeError(
                "KernelCode.metadata must be a dict or a *KernelMetadata, "
                f"got {type(self.metadata).__name__}"
            )

    def get_typed_metadata(self) -> BaseKernelMetadata | None:
        """metadata as the class of this kernel type (CudaKernelMetadata for cuda, ...);
        None without metadata or for torch_cuda, which has no class of its own."""
        typed = _METADATA_TYPES.get(self.kernel_type)
        if isinstance(self.metadata, BaseKernelMetadata):
            if type(self.metadata) is BaseKernelMetadata and typed is not None:
                return typed.from_dict(self.metadata.model_dump())
            return self.metadata
        if isinstance(self.metadata, dict) and typed is not None:
            return typed.from_dict(self.metadata)
        return None


_METADATA_TYPES: dict[KernelType, type[BaseKernelMetadata]] = {
    KernelType.CUDA: CudaKernelMetadata,
    KernelType.TORCH: TorchKernelMetadata,
    KernelType.TRITON: TritonKernelMetadata,
    KernelType.MULTI_KERNEL: MultiKernelMetadata,
}


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
