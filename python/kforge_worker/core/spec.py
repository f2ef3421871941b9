"""The job spec a child receives, as typed values (docs/worker-protocol.md "Job spec").

The supervisor sends the canonical form that src/kforge/model/job_spec.cc writes: the server
resolves every default into it, so the job's own fields and its timing options are required
here (this worker holds no defaults of its own; only atol/rtol may be null, meaning the dtype's
default tolerance). Kernels use the REST API's IOContract form. tests/protocol/specs holds the
specs both workers must accept or reject alike (tests/python/test_protocol_vectors.py).
Inline tensor data is decoded once, here, and its size checked (`tensor_bytes`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import zlib
from dataclasses import dataclass, field
from typing import Any

# The request's vocabularies, in the order tests/protocol/vocabulary.json lists them (the
# C++ model's too); this worker runs the kernel types of PYTHON_KERNEL_TYPES (cuda: the
# native worker).
KERNEL_TYPES = ("torch", "torch_cuda", "triton", "cuda", "multi_kernel")
PYTHON_KERNEL_TYPES = ("torch", "torch_cuda", "triton", "multi_kernel")
ROLES = ("input", "output", "inout")
ARG_TYPES = ("tensor", "int", "float", "str", "bool")
INIT_KINDS = ("randn", "uniform", "zeros", "ones", "full", "arange")
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "bool")
DTYPE_SIZES = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "bool": 1,
}
KINDS = ("evaluate", "compare")
# The fields of a canonical spec (src/kforge/model/job_spec.cc); null is a value.
JOB_FIELDS = (
    "job_id",
    "kind",
    "kernel",
    "reference",
    "num_correct_trials",
    "measure_performance",
    "timing",
    "atol",
    "rtol",
    "seed",
    "device",
    "timeout_s",
)


class SpecError(ValueError):
    """The job spec is malformed; the message names the JSON path."""


@dataclass(frozen=True)
class InitSpec:
    kind: str = "randn"
    seed: int | None = None  # mixed with the server seed, never used alone
    mean: float = 0.0
    std: float = 1.0
    low: float = 0.0
    high: float = 1.0
    fill_value: float = 0.0
    start: float = 0.0
    step: float = 1.0


@dataclass(frozen=True)
class TensorData:
    data_b64: str
    dtype: str
    shape: tuple[int, ...]
    compress: str = "none"


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str = "float32"
    init: InitSpec | None = None  # neither init nor data means the dtype's default init
    data: TensorData | None = None


@dataclass(frozen=True)
class ArgSpec:
    name: str
    type: str = "tensor"
    role: str = "input"
    is_meta: bool = False
    value: Any = None
    tensor_spec: TensorSpec | None = None

    @property
    def is_tensor(self) -> bool:
        return self.type == "tensor"


@dataclass(frozen=True)
class LaunchSpec:
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    shared_mem_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None


@dataclass(frozen=True)
class IOContract:
    args: tuple[ArgSpec, ...]
    launch: LaunchSpec = field(default_factory=LaunchSpec)


@dataclass(frozen=True)
class KernelSpec:
    source_code: str
    kernel_type: str
    io: IOContract | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def entry_point(self) -> str | None:
        """metadata.entry_point, else metadata.kernel_name, else None."""
        for key in ("entry_point", "kernel_name"):
            value = self.metadata.get(key)
            if isinstance(value, str) and value:
                return value
        return None


@dataclass(frozen=True)
class TimingOptions:
    """`job.timing`; the server resolves every option (src/kforge/model/request.h)."""

    max_trials: int
    min_trials: int
    warmup_calls: int
    warmup_ms: float
    budget_ms: float
    rse_target: float
    cuda_graph: bool
    l2_flush: bool


@dataclass(frozen=True)
class DeviceMetricsSpec:
    """`job.device_metrics`: run the timed kernels under Nsight Compute (device_metrics.py).
    The server resolves the ncu executable and chooses the sections."""

    ncu: str
    sections: tuple[str, ...]
    timeout_s: float = 300.0


@dataclass(frozen=True)
class ReferenceReuseSpec:
    """`job.reference_reuse` (a job of a batch): where the batch's reference results live and
    the digest the server accepts for them (reference_reuse.py)."""

    dir: str
    key: str
    sha256: str | None = None


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    kind: str  # "evaluate" | "compare"
    kernel: KernelSpec
    reference: KernelSpec | None
    num_correct_trials: int
    measure_performance: bool
    timing: TimingOptions
    atol: float | None  # None: the dtype's default (compare.py resolve_tolerance)
    rtol: float | None
    seed: int
    device: str
    timeout_s: float
    scratch_dir: str = ""  # the supervisor's side fills these two in
    cache_dir: str = ""
    device_metrics: DeviceMetricsSpec | None = None
    reference_reuse: ReferenceReuseSpec | None = None
    # Pipelined stages: the job was admitted with a shared grant and asks for the exclusive
    # one around its timed regions (device_grant.py).
    exclusive_timing: bool = False


def _get(obj: dict[str, Any], key: str, path: str, kinds: tuple[type, ...], default: Any) -> Any:
    value = obj.get(key)
    if value is None:
        return default
    if bool not in kinds and isinstance(value, bool):
        raise SpecError(f"{path}.{key}: must be {_names(kinds)}, got boolean")
    if not isinstance(value, kinds):
        raise SpecError(f"{path}.{key}: must be {_names(kinds)}, got {_json_type(value)}")
    return value


def is_identifier(name: str) -> bool:
    """An ASCII identifier of at most 128 characters (src/kforge/model/kernel_rules.h)."""
    return name.isascii() and name.isidentifier() and len(name) <= 128


def _req(obj: dict[str, Any], key: str, path: str, kinds: tuple[type, ...]) -> Any:
    """A field the server always resolves: absent or null is an error."""
    if obj.get(key) is None:
        raise SpecError(f"{path}.{key}: is required ({RESOLVED})")
    return _get(obj, key, path, kinds, None)


RESOLVED = "the server resolves every default into the job spec"


_TYPE_NAMES = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    dict: "an object",
}


def _names(kinds: tuple[type, ...]) -> str:
    """The type in the words of the C++ reader (src/kforge/model/json_reader.h)."""
    if set(kinds) == {int, float}:
        return "a number"
    return " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", dict: "object", list: "array", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{path}: must be an object, got {_json_type(value)}")
    return value


def _choice(
    obj: dict[str, Any], key: str, path: str, allowed: tuple[str, ...], default: str
) -> str:
    value = _get(obj, key, path, (str,), default)
    if value not in allowed:
        raise SpecError(f"{path}.{key}: unknown value {value!r} (expected one of {allowed})")
    return str(value)


def _shape(value: Any, path: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    ):
        raise SpecError(f"{path}: must be a list of non-negative integers")
    return tuple(value)


def _dim3(value: Any, path: str) -> tuple[int, int, int] | None:
    if value is None:
        return None
    if isinstance(value, list):
        dims = [*value, 1, 1][:3]
    else:
        obj = _obj(value, path)
        dims = [obj.get("x", 1), obj.get("y", 1), obj.get("z", 1)]
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims):
        raise SpecError(f"{path}: every dimension must be a positive integer")
    return (dims[0], dims[1], dims[2])


def parse_init(value: Any, path: str) -> InitSpec:
    obj = _obj(value, path)
    num = (int, float)
    return InitSpec(
        kind=_choice(obj, "kind", path, INIT_KINDS, "randn"),
        seed=_get(obj, "seed", path, (int,), None),
        mean=float(_get(obj, "mean", path, num, 0.0)),
        std=float(_get(obj, "std", path, num, 1.0)),
        low=float(_get(obj, "low", path, num, 0.0)),
        high=float(_get(obj, "high", path, num, 1.0)),
        fill_value=float(_get(obj, "fill_value", path, num, 0.0)),
        start=float(_get(obj, "start", path, num, 0.0)),
        step=float(_get(obj, "step", path, num, 1.0)),
    )


@functools.lru_cache(maxsize=64)
def tensor_bytes(data: TensorData) -> bytes:
    """The contents of inline data, decoded (and inflated) once per process: the parser calls
    it to check the size, inputs.py for every tensor it builds from it. ValueError when the
    text is not base64 or zlib, or the bytes are not shape x dtype."""
    try:
        raw = base64.b64decode(data.data_b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"is not valid base64 ({e})") from e
    expected = math.prod(data.shape) * DTYPE_SIZES[data.dtype]
    if data.compress == "zlib":
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(raw, expected + 1)
        except zlib.error as e:
            raise ValueError(f"is not valid zlib data ({e})") from e
    if len(raw) != expected:
        raise ValueError(f"holds {len(raw)} bytes but shape x dtype needs {expected}")
    return raw


def parse_tensor_spec(value: Any, path: str) -> TensorSpec:
    obj = _obj(value, path)
    shape = _shape(obj.get("shape"), f"{path}.shape")
    dtype = _choice(obj, "dtype", path, DTYPES, "float32")
    if obj.get("init") is not None and obj.get("data") is not None:
        raise SpecError(f"{path}: 'init' and 'data' are mutually exclusive")
    init = parse_init(obj["init"], f"{path}.init") if obj.get("init") is not None else None
    data = None
    if obj.get("data") is not None:
        data = parse_tensor_data(obj["data"], f"{path}.data")
        if data.shape != shape:
            raise SpecError(f"{path}.data.shape: must equal tensor_spec.shape")
        if data.dtype != dtype:
            raise SpecError(f"{path}.data.dtype: must equal tensor_spec.dtype")
    return TensorSpec(shape=shape, dtype=dtype, init=init, data=data)


def parse_tensor_data(value: Any, path: str) -> TensorData:
    """Inline contents, as the REST API reads them (data_b64 and shape required, dtype
    float32 unless given), decoded once here to check the size (tensor_bytes)."""
    obj = _obj(value, path)
    if not isinstance(obj.get("data_b64"), str):
        raise SpecError(f"{path}.data_b64: is required (a base64 string)")
    if obj.get("shape") is None:
        raise SpecError(f"{path}.shape: is required")
    data = TensorData(
        data_b64=obj["data_b64"],
        dtype=_choice(obj, "dtype", path, DTYPES, "float32"),
        shape=_shape(obj["shape"], f"{path}.shape"),
        compress=_choice(obj, "compress", path, ("none", "zlib"), "none"),
    )
    try:
        tensor_bytes(data)
    except ValueError as e:
        raise SpecError(f"{path}.data_b64: {e}") from e
    return data


def parse_arg(value: Any, path: str) -> ArgSpec:
    obj = _obj(value, path)
    name = _get(obj, "name", path, (str,), "")
    if not is_identifier(name):
        raise SpecError(f"{path}.name: must be a Python identifier, got {name!r}")
    arg_type = _choice(obj, "type", path, ARG_TYPES, "tensor")
    spec = None
    if arg_type == "tensor":
        if obj.get("tensor_spec") is None:
            raise SpecError(f"{path}.tensor_spec: is required for a tensor arg")
        spec = parse_tensor_spec(obj["tensor_spec"], f"{path}.tensor_spec")
    elif obj.get("value") is None:
        raise SpecError(f"{path}.value: is required for a scalar arg")
    return ArgSpec(
        name=name,
        type=arg_type,
        role=_choice(obj, "role", path, ROLES, "input"),
        is_meta=bool(_get(obj, "is_meta", path, (bool,), False)),
        value=obj.get("value"),
        tensor_spec=spec,
    )


def parse_io(value: Any, path: str) -> IOContract:
    obj = _obj(value, path)
    args = obj.get("args")
    if not isinstance(args, list):
        raise SpecError(f"{path}.args: must be a list")
    parsed = tuple(parse_arg(a, f"{path}.args[{i}]") for i, a in enumerate(args))
    launch = LaunchSpec()
    if obj.get("launch") is not None:
        lpath = f"{path}.launch"
        lobj = _obj(obj["launch"], lpath)
        launch = LaunchSpec(
            grid=_dim3(lobj.get("grid"), f"{lpath}.grid"),
            block=_dim3(lobj.get("block"), f"{lpath}.block"),
            shared_mem_bytes=_get(lobj, "shared_mem_bytes", lpath, (int,), None),
            num_warps=_get(lobj, "num_warps", lpath, (int,), None),
            num_stages=_get(lobj, "num_stages", lpath, (int,), None),
        )
    return IOContract(args=parsed, launch=launch)


def parse_kernel(value: Any, path: str) -> KernelSpec:
    obj = _obj(value, path)
    source = _get(obj, "source_code", path, (str,), "")
    kernel_type = _get(obj, "kernel_type", path, (str,), "")
    if not kernel_type:
        raise SpecError(f"{path}.kernel_type: is required")
    io = parse_io(obj["io"], f"{path}.io") if obj.get("io") is not None else None
    metadata = _get(obj, "metadata", path, (dict,), {})
    return KernelSpec(source_code=source, kernel_type=kernel_type, io=io, metadata=metadata)


def parse_timing(value: Any, path: str) -> TimingOptions:
    """A resolved `timing` object: every option is required."""
    obj = _obj(value, path)
    num = (int, float)
    return TimingOptions(
        max_trials=int(_req(obj, "max_trials", path, (int,))),
        min_trials=int(_req(obj, "min_trials", path, (int,))),
        warmup_calls=int(_req(obj, "warmup_calls", path, (int,))),
        warmup_ms=float(_req(obj, "warmup_ms", path, num)),
        budget_ms=float(_req(obj, "budget_ms", path, num)),
        rse_target=float(_req(obj, "rse_target", path, num)),
        cuda_graph=bool(_req(obj, "cuda_graph", path, (bool,))),
        l2_flush=bool(_req(obj, "l2_flush", path, (bool,))),
    )


def parse_device_metrics(value: Any, path: str) -> DeviceMetricsSpec | None:
    if value is None:
        return None
    obj = _obj(value, path)
    ncu = _get(obj, "ncu", path, (str,), "")
    if not ncu:
        raise SpecError(f"{path}.ncu: is required (the path of the ncu executable)")
    sections = obj.get("sections")
    if not isinstance(sections, list) or not sections:
        raise SpecError(f"{path}.sections: must be a non-empty list of ncu section names")
    for i, m in enumerate(sections):
        if not isinstance(m, str) or not is_identifier(m):
            raise SpecError(f"{path}.sections[{i}]: must be an ncu section name")
    timeout = float(_get(obj, "timeout_s", path, (int, float), 300.0))
    if timeout <= 0:
        raise SpecError(f"{path}.timeout_s: must be positive")
    return DeviceMetricsSpec(ncu=ncu, sections=tuple(sections), timeout_s=timeout)


def parse_reference_reuse(value: Any, path: str) -> ReferenceReuseSpec | None:
    if value is None:
        return None
    obj = _obj(value, path)
    directory = _get(obj, "dir", path, (str,), "")
    key = _get(obj, "key", path, (str,), "")
    if not directory:
        raise SpecError(f"{path}.dir: is required")
    if not key or not all(c in "0123456789abcdef" for c in key):
        raise SpecError(f"{path}.key: must be a lowercase hexadecimal digest, got {key!r}")
    digest = _get(obj, "sha256", path, (str,), None)
    return ReferenceReuseSpec(dir=directory, key=key, sha256=digest)


def parse_job(value: Any) -> JobSpec:
    """Parses the `job` object of a `job` message (canonical: every field of JOB_FIELDS is
    present). Raises SpecError naming the field."""
    obj = _obj(value, "job")
    for key in JOB_FIELDS:
        if key not in obj:
            raise SpecError(f"job.{key}: is required ({RESOLVED})")
    kind = _req(obj, "kind", "job", (str,))
    if kind not in KINDS:
        raise SpecError(f"job.kind: unknown value {kind!r} (expected one of {KINDS})")
    kernel = parse_kernel(_req(obj, "kernel", "job", (dict,)), "job.kernel")
    reference = None
    if obj["reference"] is not None:
        reference = parse_kernel(obj["reference"], "job.reference")
    if kind == "compare" and reference is None:
        raise SpecError("job.reference: is required for a compare")
    if kind == "evaluate" and reference is not None:
        raise SpecError("job.reference: must be null for an evaluate")
    num = (int, float)
    atol = _get(obj, "atol", "job", num, None)
    rtol = _get(obj, "rtol", "job", num, None)
    trials = int(_req(obj, "num_correct_trials", "job", (int,)))
    if trials < 1:
        raise SpecError(f"job.num_correct_trials: must be at least 1, got {trials}")
    device = str(_req(obj, "device", "job", (str,)))
    if device != "cpu" and not device.startswith("cuda:"):
        raise SpecError(f"job.device: must be 'cpu' or 'cuda:N', got {device!r}")
    return JobSpec(
        job_id=str(_req(obj, "job_id", "job", (str,))),
        kind=kind,
        kernel=kernel,
        reference=reference,
        num_correct_trials=trials,
        measure_performance=bool(_req(obj, "measure_performance", "job", (bool,))),
        timing=parse_timing(_req(obj, "timing", "job", (dict,)), "job.timing"),
        atol=None if atol is None else float(atol),
        rtol=None if rtol is None else float(rtol),
        seed=int(_req(obj, "seed", "job", (int,))),
        device=device,
        timeout_s=float(_req(obj, "timeout_s", "job", num)),
        scratch_dir=str(_get(obj, "scratch_dir", "job", (str,), "")),
        cache_dir=str(_get(obj, "cache_dir", "job", (str,), "")),
        device_metrics=parse_device_metrics(obj.get("device_metrics"), "job.device_metrics"),
        reference_reuse=parse_reference_reuse(obj.get("reference_reuse"), "job.reference_reuse"),
        exclusive_timing=bool(_get(obj, "exclusive_timing", "job", (bool,), False)),
    )
