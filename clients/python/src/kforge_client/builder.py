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
"""

from __future__ import annotations

from kforge_client.models import ArgSpec, IOContract, LaunchConfig, LaunchDim, Scalar, TensorSpec

__all__ = ["IOContractBuilder"]

SCALAR_TYPES = ("int", "float", "str", "bool")


class IOContractBuilder:
    """Collects arguments in call order and the launch configuration."""

    def __init__(self) -> None:
        self.args: list[ArgSpec] = []
        self.launch_config: LaunchConfig | None = None

    def add_input_tensor(self, name: str, tensor_spec: TensorSpec) -> IOContractBuilder:
        """A tensor the kernel reads."""
        self.args.append(ArgSpec(name=name, type="tensor", tensor_spec=tensor_spec, role="input"))
        return self

    def add_output_tensor(
        self, name: str, shape: list[int], dtype: str = "float32"
    ) -> IOContractBuilder:
        """A tensor the kernel writes (the server allocates it and compares it)."""
        spec = TensorSpec(shape=list(shape), dtype=dtype)
        self.args.append(ArgSpec(name=name, type="tensor", tensor_spec=spec, role="output"))
        return self

    def add_inout_tensor(self, name: str, tensor_spec: TensorSpec) -> IOContractBuilder:
        """A tensor the kernel reads and updates in place."""
        self.args.append(ArgSpec(name=name, type="tensor", tensor_spec=tensor_spec, role="inout"))
        return self

    def add_scalar(self, name: str, scalar_type: str, value: Scalar) -> IOContractBuilder:
        """A scalar argument: scalar_type is "int", "float", "str" or "bool"."""
        if scalar_type not in SCALAR_TYPES:
            raise ValueError(f"scalar_type must be one of {SCALAR_TYPES}, got {scalar_type!r}")
        self.args.append(ArgSpec(name=name, type=scalar_type, value=value, role="input"))
        return self

    def add_meta_param(self, name: str, value: int) -> IOContractBuilder:
        """A Triton constexpr (passed by keyword; a -D define for a cuda kernel)."""
        self.args.append(ArgSpec(name=name, type="int", value=value, role="input", is_meta=True))
        return self

    def set_launch_config(self, launch_config: LaunchConfig) -> IOContractBuilder:
        self.launch_config = launch_config
        return self

    def _launch(self) -> LaunchConfig:
        if self.launch_config is None:
            self.launch_config = LaunchConfig()
        return self.launch_config

    def set_grid(self, x: int, y: int = 1, z: int = 1) -> IOContractBuilder:
        """Grid dimensions (blocks for CUDA, programs for Triton)."""
        self._launch().grid = LaunchDim(x=x, y=y, z=z)
        return self

    def set_block(self, x: int, y: int = 1, z: int = 1) -> IOContractBuilder:
        """Block dimensions (threads per block, CUDA only)."""
        self._launch().block = LaunchDim(x=x, y=y, z=z)
        return self

    def set_shared_mem(self, shared_mem_bytes: int) -> IOContractBuilder:
        """Dynamic shared memory per block in bytes (CUDA `extern __shared__` arrays)."""
        self._launch().shared_mem_bytes = shared_mem_bytes
        return self

    def set_num_warps(self, num_warps: int) -> IOContractBuilder:
        self._launch().num_warps = num_warps
        return self

    def set_num_stages(self, num_stages: int) -> IOContractBuilder:
        self._launch().num_stages = num_stages
        return self

    def build(self) -> IOContract:
        return IOContract(args=list(self.args), launch=self.launch_config)
