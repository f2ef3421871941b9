"""Helpers that make TensorSpecs, and JSON (de)serialisation of IOContracts and kernels."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union, cast

from kforge_client.models import IOContract, KernelCode, TensorInit, TensorSpec

__all__ = [
    "create_arange_spec",
    "create_full_spec",
    "create_ones_spec",
    "create_randn_spec",
    "create_tensor_spec",
    "create_uniform_spec",
    "create_zeros_spec",
    "load_from_file",
    "save_to_file",
    "to_json",
]

Serializable = Union[IOContract, KernelCode, TensorSpec, dict[str, Any]]


def create_tensor_spec(
    shape: Sequence[int],
    dtype: str = "float32",
    init_kind: str | None = None,
    seed: int | None = None,
    **init_kwargs: float,
) -> TensorSpec:
    """A TensorSpec generated on the server; without init_kind the server's default (randn).

    init_kwargs: mean, std (randn), low, high (uniform), fill_value (full), start, step (arange).
    """
    # TensorSpec checks the shape (a str is not a list of chars, an int is not a shape) and
    # makes it a list.
    as_given = cast("list[int]", shape)
    if init_kind is None:
        return TensorSpec(shape=as_given, dtype=dtype)
    return TensorSpec(
        shape=as_given, dtype=dtype, init=TensorInit(kind=init_kind, seed=seed, **init_kwargs)
    )


def create_randn_spec(
    shape: list[int],
    dtype: str = "float32",
    seed: int | None = None,
    mean: float = 0.0,
    std: float = 1.0,
) -> TensorSpec:
    return create_tensor_spec(shape, dtype, "randn", seed=seed, mean=mean, std=std)


def create_uniform_spec(
    shape: list[int],
    dtype: str = "float32",
    seed: int | None = None,
    low: float = 0.0,
    high: float = 1.0,
) -> TensorSpec:
    return create_tensor_spec(shape, dtype, "uniform", seed=seed, low=low, high=high)


def create_zeros_spec(shape: list[int], dtype: str = "float32") -> TensorSpec:
    return create_tensor_spec(shape, dtype, "zeros")


def create_ones_spec(shape: list[int], dtype: str = "float32") -> TensorSpec:
    return create_tensor_spec(shape, dtype, "ones")


def create_full_spec(shape: list[int], fill_value: float, dtype: str = "float32") -> TensorSpec:
    return create_tensor_spec(shape, dtype, "full", fill_value=fill_value)


def create_arange_spec(
    shape: list[int], dtype: str = "float32", start: float = 0.0, step: float = 1.0
) -> TensorSpec:
    return create_tensor_spec(shape, dtype, "arange", start=start, step=step)


def _plain(obj: Serializable) -> Any:
    return obj.to_dict() if hasattr(obj, "to_dict") else obj


def to_json(obj: Serializable, pretty: bool = False) -> str:
    """The JSON text of an IOContract, KernelCode, TensorSpec or dict."""
    return json.dumps(_plain(obj), indent=2 if pretty else None)


def save_to_file(obj: Serializable, filename: str | Path, pretty: bool = True) -> None:
    Path(filename).write_text(to_json(obj, pretty=pretty))


def load_from_file(filename: str | Path, obj_type: str = "IOContract") -> Any:
    """Reads JSON written by save_to_file: obj_type "IOContract", "KernelCode" or "dict"."""
    data = json.loads(Path(filename).read_text())
    if obj_type == "IOContract":
        return IOContract.from_dict(data)
    if obj_type == "KernelCode":
        return KernelCode.from_dict(data)
    if obj_type == "dict":
        return data
    raise ValueError(f"obj_type must be 'IOContract', 'KernelCode' or 'dict', got {obj_type!r}")
