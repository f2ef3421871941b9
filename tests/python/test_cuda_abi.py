"""cuda_abi.py: the Python worker's binding of libkforge_cuda.so (a `cuda` kernel compiled
with NVRTC and launched on torch tensors). Compile errors and the no-GPU answer are checked
on the cpu-only CI machine; launches need a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from kforge_worker.candidate import cuda_abi
from kforge_worker.core.spec import parse_kernel

VECTOR_ADD = """
extern "C" __global__ void vector_add(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + y[i] * SCALE;
}
"""


def kernel(source: str = VECTOR_ADD, n: int = 1000, **launch: Any) -> dict[str, Any]:
    tensor = {"shape": [n], "dtype": "float32"}
    return {
        "source_code": source,
        "kernel_type": "cuda",
        "metadata": {"kernel_name": "vector_add", "compile_options": ["-O3"]},
        "io": {
            "args": [
                {"name": "x", "type": "tensor", "tensor_spec": tensor},
                {"name": "y", "type": "tensor", "tensor_spec": tensor},
                {"name": "out", "type": "tensor", "role": "output", "tensor_spec": tensor},
                {"name": "n", "type": "int", "value": n},
                {"name": "SCALE", "type": "float", "value": 2.0, "is_meta": True},
            ],
            "launch": launch or {"grid": [(n + 127) // 128], "block": [128]},
        },
    }


def have_library() -> bool:
    try:
        cuda_abi.library_path()
    except cuda_abi.CudaUnavailable:
        return False
    return True


needs_library = pytest.mark.skipif(
    not have_library(), reason="libkforge_cuda.so is not built (make build)"
)


def test_library_path_prefers_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFORGE_CUDA_ABI", "/opt/elsewhere/libkforge_cuda.so")
    assert cuda_abi.library_path() == Path("/opt/elsewhere/libkforge_cuda.so")


def test_kernel_request_carries_the_parsed_contract(tmp_path: Path) -> None:
    spec = parse_kernel(kernel(), "kernel")
    request = cuda_abi.kernel_request(spec, str(tmp_path))
    assert request["kernel_type"] == "cuda"
    assert request["metadata"]["kernel_name"] == "vector_add"
    assert [a["name"] for a in request["io"]["args"]] == ["x", "y", "out", "n", "SCALE"]
    assert request["io"]["launch"]["block"] == (128, 1, 1)
    assert request["cache_dir"] == str(tmp_path / "cuda")


@needs_library
def test_compile_error_carries_the_nvrtc_log(tmp_path: Path) -> None:
    broken = kernel(source=VECTOR_ADD.replace("out[i] =", "out[i] = ;"))
    with pytest.raises(cuda_abi.CudaCompileError) as e:
        cuda_abi.CudaKernel(parse_kernel(broken, "kernel"), str(tmp_path))
    assert e.value.code == cuda_abi.ERROR_COMPILE
    assert "NVRTC_ERROR_COMPILATION" in str(e.value)
    assert "expected an expression" in str(e.value)


@needs_library
def test_malformed_request_names_the_field(tmp_path: Path) -> None:
    spec = parse_kernel(kernel(grid=[8]), "kernel")  # no block
    with pytest.raises(cuda_abi.CudaAbiError) as e:
        cuda_abi.CudaKernel(spec, str(tmp_path))
    assert e.value.code == cuda_abi.ERROR_INVALID_ARGUMENT
    assert "kernel.io.launch.block" in str(e.value)


@needs_library
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU answer")
def test_valid_kernel_compiles_then_reports_no_device(tmp_path: Path) -> None:
    with pytest.raises(cuda_abi.CudaUnavailable) as e:
        cuda_abi.CudaKernel(parse_kernel(kernel(), "kernel"), str(tmp_path))
    assert e.value.code == cuda_abi.ERROR_NO_DEVICE
    assert "no CUDA device on this server" in str(e.value)
    assert list((tmp_path / "cuda").glob("*.kfc")), "the compiled kernel was not cached"


@needs_library
@pytest.mark.gpu
def test_launch_on_torch_tensors_on_the_current_stream(tmp_path: Path) -> None:
    n = 1000
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    compiled = cuda_abi.CudaKernel(parse_kernel(kernel(n=n), "kernel"), str(tmp_path))
    assert compiled.info["arch"].startswith("sm_")
    assert compiled.info["options"] == ["--ptxas-options=-O3", "-DSCALE=2.0"]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        compiled.launch([x.data_ptr(), y.data_ptr(), out.data_ptr()], stream.cuda_stream)
    stream.synchronize()
    torch.testing.assert_close(out, x + 2.0 * y)
    again = cuda_abi.CudaKernel(parse_kernel(kernel(n=n), "kernel"), str(tmp_path))
    assert again.info["cache"] == "hit"
    compiled.close()
    again.close()


@needs_library
@pytest.mark.gpu
def test_wrong_number_of_tensors_is_refused(tmp_path: Path) -> None:
    compiled = cuda_abi.CudaKernel(parse_kernel(kernel(), "kernel"), str(tmp_path))
    x = torch.zeros(1000, device="cuda")
    with pytest.raises(cuda_abi.CudaAbiError):
        compiled.launch([x.data_ptr()], torch.cuda.current_stream().cuda_stream)
