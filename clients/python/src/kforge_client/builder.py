"""IOContractBuilder: a fluent way to write an IOContract.

Example:
    contract = (
        IOContractBuilder()
        .add_input_tensor("x", create_randn_spec([1024], seed=42))
        .add_output_tensor("out", [1024])
        .add_scalar("n", "int", 1024)
        .add_meta_param("BLOCK_SIZE", 256)
        .set_grid(4)
        .build()
    )

Every call of the old client's builder works as it did, and so do the keyword forms of the old
server's own docs, which its builder did not accept:

    IOContractBuilder()
    .add_input_tensor("x", shape=[1024], dtype="float32", init_kind="randn")
    .add_output_tensor("y", shape=[1024], dtype="float32")
    .add_meta_param("BLOCK_SIZE", value=256)
    .set_launch_config(grid=(4, 1, 1), num_warps=4)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Union, cast

from kforge_client.models import (
    ArgSpec,
    DimLike,
    IOContract,
    LaunchConfig,
    Scalar,
    TensorInit,
    TensorSpec,
    field_errors,
)
from kforge_client.specs import create_tensor_spec

__all__ = ["IOContractBuilder"]

SCALAR_TYPES = ("int", "float", "str", "bool")
# The init parameters create_tensor_spec passes on as keywords (not kind and seed, which have
# parameters of their own).
INIT_PARAMETERS = tuple(
    f.name for f in dataclasses.fields(TensorInit) if f.name not in ("kind", "seed")
)

TensorSpecLike = Union[TensorSpec, dict[str, Any]]


def _tensor_spec(
    call: str,
    tensor_spec: TensorSpecLike | None,
    *,
    shape: Sequence[int] | None,
    dtype: str | None,
    init_kind: str | None,
    seed: int | None,
    init_kwargs: dict[str, Any],
) -> TensorSpec:
    """The TensorSpec of add_input_tensor / add_inout_tensor: given whole (the old client's
    form) or by its parts as keywords (the old server docs' form), not both."""
    parts = {"shape": shape, "dtype": dtype, "init_kind": init_kind, "seed": seed}
    given = [k for k, v in parts.items() if v is not None] + sorted(init_kwargs)
    if tensor_spec is not None:
        if given:
            raise ValueError(
                f"{call}: give a tensor_spec or its parts ({', '.join(given)}), not both"
            )
        if isinstance(tensor_spec, TensorSpec):
            return tensor_spec
        if isinstance(tensor_spec, dict):
            with field_errors(f"{call}.tensor_spec"):
                return TensorSpec.from_dict(tensor_spec)
        raise TypeError(
            f"{call}: tensor_spec must be a TensorSpec or a dict, got "
            f"{type(tensor_spec).__name__} {tensor_spec!r} (to give a shape, write shape=...)"
        )
    if shape is None:
        raise TypeError(f"{call}: needs a tensor_spec, or shape= (with dtype=, init_kind=, ...)")
    unknown = sorted(set(init_kwargs) - set(INIT_PARAMETERS))
    if unknown:
        raise TypeError(
            f"{call}: unknown init parameter {unknown[0]!r}; "
            f"an init takes {', '.join(INIT_PARAMETERS)}"
        )
    if init_kind is None and (seed is not None or init_kwargs):
        # create_tensor_spec would drop them without a kind: say so rather than lose them.
        dropped = ["seed"] * (seed is not None) + sorted(init_kwargs)
        raise ValueError(
            f"{call}: {', '.join(dropped)} are init parameters: give init_kind= too "
            "(randn, uniform, ...)"
        )
    with field_errors(call):
        return create_tensor_spec(shape, dtype or "float32", init_kind, seed, **init_kwargs)


class IOContractBuilder:
    """Collects arguments in call order and the launch configuration."""

    def __init__(self) -> None:
        self.args: list[ArgSpec] = []
        self.launch_config: LaunchConfig | None = None

    def add_input_tensor(
        self,
        name: str,
        tensor_spec: TensorSpecLike | None = None,
        *,
        shape: Sequence[int] | None = None,
        dtype: str | None = None,
        init_kind: str | None = None,
        seed: int | None = None,
        **init_kwargs: float,
    ) -> IOContractBuilder:
        """A tensor the kernel reads: a TensorSpec (`create_randn_spec([1024], seed=42)`), or
        its parts by keyword, as create_tensor_spec takes them (`shape=[1024], dtype="float32",
        init_kind="uniform", seed=1, low=-1.0, high=1.0`)."""
        call = f"add_input_tensor({name!r})"
        spec = _tensor_spec(
            call,
            tensor_spec,
            shape=shape,
            dtype=dtype,
            init_kind=init_kind,
            seed=seed,
            init_kwargs=init_kwargs,
        )
        return self._add_tensor(name, spec, "input")

    def add_output_tensor(
        self, name: str, shape: Sequence[int], dtype: str = "float32"
    ) -> IOContractBuilder:
        """A tensor the kernel writes (the server allocates it and compares it)."""
        with field_errors(f"add_output_tensor({name!r})"):
            spec = TensorSpec(shape=cast("list[int]", shape), dtype=dtype)  # made a list there
        return self._add_tensor(name, spec, "output")

    def add_inout_tensor(
        self,
        name: str,
        tensor_spec: TensorSpecLike | None = None,
        *,
        shape: Sequence[int] | None = None,
        dtype: str | None = None,
        init_kind: str | None = None,
        seed: int | None = None,
        **init_kwargs: float,
    ) -> IOContractBuilder:
        """A tensor the kernel reads and updates in place; given as add_input_tensor's."""
        call = f"add_inout_tensor({name!r})"
        spec = _tensor_spec(
            call,
            tensor_spec,
            shape=shape,
            dtype=dtype,
            init_kind=init_kind,
            seed=seed,
            init_kwargs=init_kwargs,
        )
        return self._add_tensor(name, spec, "inout")

    def _add_tensor(self, name: str, spec: TensorSpec, role: str) -> IOContractBuilder:
        self.args.append(ArgSpec(name=name, type="tensor", tensor_spec=spec, role=role))
        return self

    def add_scalar(
        self,
        name: str,
        scalar_type: str | None = None,
        value: Scalar | None = None,
        *,
        type: str | None = None,  # the old docs' name for it: add_scalar(name, type, value)
    ) -> IOContractBuilder:
        """A scalar argument: scalar_type (or type=) is "int", "float", "str" or "bool"."""
        call = f"add_scalar({name!r})"
        if scalar_type is not None and type is not None:
            raise ValueError(f"{call}: give scalar_type or type=, not both")
        kind = scalar_type if scalar_type is not None else type
        if kind not in SCALAR_TYPES:
            raise ValueError(f"{call}: scalar_type must be one of {SCALAR_TYPES}, got {kind!r}")
        if value is None:
            raise TypeError(f"{call}: needs a value")
        self.args.append(ArgSpec(name=name, type=kind, value=value, role="input"))
        return self

    def add_meta_param(self, name: str, value: int) -> IOContractBuilder:
        """A Triton constexpr (passed by keyword; a -D define for a cuda kernel)."""
        self.args.append(ArgSpec(name=name, type="int", value=value, role="input", is_meta=True))
        return self

    def set_launch_config(
        self,
        launch_config: LaunchConfig | dict[str, Any] | None = None,
        *,
        grid: DimLike | None = None,
        block: DimLike | None = None,
        shared_mem_bytes: int | None = None,
        num_warps: int | None = None,
        num_stages: int | None = None,
    ) -> IOContractBuilder:
        """The launch configuration: a LaunchConfig, or its fields by keyword (`grid=(4, 1, 1),
        num_warps=4`; grid and block as an int, 1 to 3 ints, a dict or a LaunchDim). Replaces
        what was set before; `set_launch_config(None)` clears it."""
        parts = {
            "grid": grid,
            "block": block,
            "shared_mem_bytes": shared_mem_bytes,
            "num_warps": num_warps,
            "num_stages": num_stages,
        }
        given: dict[str, Any] = {k: v for k, v in parts.items() if v is not None}
        if launch_config is not None and given:
            raise ValueError(
                f"set_launch_config: give a launch_config or its fields ({', '.join(given)}), "
                "not both"
            )
        with field_errors("set_launch_config"):
            if given:
                launch_config = LaunchConfig(**given)
            elif isinstance(launch_config, dict):
                launch_config = LaunchConfig.from_dict(launch_config)
        if launch_config is not None and not isinstance(launch_config, LaunchConfig):
            raise TypeError(
                "set_launch_config: launch_config must be a LaunchConfig or a dict, got "
                f"{type(launch_config).__name__} {launch_config!r}"
            )
        self.launch_config = launch_config
        return self

    def _launch(self) -> LaunchConfig:
        if self.launch_config is None:
            self.launch_config = LaunchConfig()
        return self.launch_config

    def _update_launch(self, call: str, **fields: Any) -> IOContractBuilder:
        """Sets launch fields in place (as the old builder did), checked as a LaunchConfig's
        construction checks them."""
        launch = self._launch()
        with field_errors(call):
            checked = dataclasses.replace(launch, **fields)
        for key in fields:
            setattr(launch, key, getattr(checked, key))
        return self

    def set_grid(self, x: int, y: int = 1, z: int = 1) -> IOContractBuilder:
        """Grid dimensions (blocks for CUDA, programs for Triton)."""
        return self._update_launch("set_grid", grid=(x, y, z))

    def set_block(self, x: int, y: int = 1, z: int = 1) -> IOContractBuilder:
        """Block dimensions (threads per block, CUDA only)."""
        return self._update_launch("set_block", block=(x, y, z))

    def set_shared_mem(self, shared_mem_bytes: int) -> IOContractBuilder:
        """Dynamic shared memory per block in bytes (CUDA `extern __shared__` arrays)."""
        return self._update_launch("set_shared_mem", shared_mem_bytes=shared_mem_bytes)

    def set_num_warps(self, num_warps: int) -> IOContractBuilder:
        return self._update_launch("set_num_warps", num_warps=num_warps)

    def set_num_stages(self, num_stages: int) -> IOContractBuilder:
        return self._update_launch("set_num_stages", num_stages=num_stages)

    def build(self) -> IOContract:
        return IOContract(args=list(self.args), launch=self.launch_config)
