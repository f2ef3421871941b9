"""Request files of the kinds the kernel evaluation server kept in its test_data/ (written
anew here: legacy_requests/), replayed through the old-style client (`kernel_eval_client`)
exactly as its users sent them, only the URL changed.

On the cpu device the triton and torch requests must come out correct; the cuda ones must
compile and say there is no GPU to run them. On a GPU (KFORGE_TEST_DEVICE=cuda:0, from
scripts/gpu-check.sh) every request must come out correct, the legacy torch_cuda one
(load_inline) included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.kforge_server import KforgeServer, device_under_test
from kernel_eval_client import KernelCode, KernelEvalClient

REQUESTS = Path(__file__).parent / "legacy_requests"
FILES = sorted(REQUESTS.glob("*/*.json"))


def replay(server: KforgeServer, request: dict[str, Any]) -> dict[str, Any]:
    with KernelEvalClient(server.url) as client:
        return client.compare(
            KernelCode.from_dict(request["ref_kernel"]),
            KernelCode.from_dict(request["custom_kernel"]),
            num_trials=request.get("num_trials", 100),
            timeout=request.get("timeout"),
        )


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_request_file_replays(server: KforgeServer, path: Path) -> None:
    request = json.loads(path.read_text())
    out = replay(server, request)
    assert out["status"] == "success", out
    result = out["kernel_exec_result"]
    assert result["compiled"] is True, result
    on_gpu = server.devices != "cpu"
    if path.parent.name == "cuda" and not on_gpu:
        assert result["correctness"] is False
        assert "no CUDA device" in result["validation_error"], result
        return
    assert result["correctness"] is True, result.get("validation_error")
    # What the old clients read: the mean runtime and the reference's RuntimeStats.
    assert result["runtime"] > 0 and result["runtime"] == result["runtime_stats"].mean
    assert out["ref_runtime"]["mean"] > 0
    assert isinstance(result["metadata"]["gpu_id"], int)


def legacy_body(custom: str) -> dict[str, Any]:
    return {
        "ref_code": (REQUESTS / "kernelbench" / "ref_code_add.py").read_text(),
        "custom_code": (REQUESTS / "kernelbench" / custom).read_text(),
        "num_trials": 10,
    }


def test_legacy_body_on_the_root_route(server: KforgeServer) -> None:
    with httpx.Client(base_url=server.url, timeout=900) as c:
        r = c.post("/", json=legacy_body("custom_code_add_torch.py"))
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "success"
    assert out["kernel_exec_result"]["correctness"] is True, out["kernel_exec_result"]
    assert out["kernel_exec_result"]["metadata"]["kernel_type"] == "torch_cuda"
    assert out["ref_runtime"]["mean"] > 0


@pytest.mark.skipif(device_under_test() == "cpu", reason="load_inline compiles CUDA: GPU host only")
def test_legacy_body_with_an_inline_cuda_extension(server: KforgeServer) -> None:
    with httpx.Client(base_url=server.url, timeout=900) as c:
        r = c.post(
            "/compare", json={**legacy_body("custom_code_add_inline_cuda.py"), "timeout": 300}
        )
    assert r.status_code == 200, r.text
    assert r.json()["kernel_exec_result"]["correctness"] is True, r.json()["kernel_exec_result"]


# The old server's Llama-3 decoder-layer `multi_kernel` workload, in its request shape
# (entry_point "run", a description, one 3-D input, num_trials 10, timeout 300), scaled down
# for the cpu device: Triton RMSNorm, CuPy SiLU, torch attention and MLP.
DECODER_LAYER = '''
import math

import cupy as cp
import torch
import triton
import triton.language as tl

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE = 256, 8, 2, 32, 688


@triton.jit
def rms_norm_kernel(x_ptr, out_ptr, w_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=1.0)
    tl.store(out_ptr + row * n_cols + cols, x / rms * w, mask=mask)


silu_kernel = cp.RawKernel(r"""
extern "C" __global__ void silu(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.0f + expf(-x[i]));
}
""", "silu")


def weights(*shape, generator):
    return WEIGHTS(shape, generator)


def rms_norm(x):
    flat = x.reshape(-1, HIDDEN)
    out = torch.empty_like(flat)
    rms_norm_kernel[(flat.shape[0],)](flat, out, torch.ones(HIDDEN, device=x.device), HIDDEN,
                                      1e-6, BLOCK=HIDDEN)
    return out.view_as(x)


def silu(x):
    SILU(x)


def run(hidden_states):
    batch, seq, _ = hidden_states.shape
    g = GENERATOR(hidden_states.device)
    residual = hidden_states
    h = rms_norm(hidden_states)
    q = (h @ weights(HIDDEN, HEADS * HEAD_DIM, generator=g)).view(batch, seq, HEADS, HEAD_DIM)
    k = (h @ weights(HIDDEN, KV_HEADS * HEAD_DIM, generator=g)).view(batch, seq, KV_HEADS, HEAD_DIM)
    v = (h @ weights(HIDDEN, KV_HEADS * HEAD_DIM, generator=g)).view(batch, seq, KV_HEADS, HEAD_DIM)
    k = k.repeat_interleave(HEADS // KV_HEADS, dim=2)
    v = v.repeat_interleave(HEADS // KV_HEADS, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    attn = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM), dim=-1) @ v
    attn = attn.transpose(1, 2).reshape(batch, seq, HIDDEN)
    hidden_states = residual + attn @ weights(HIDDEN, HIDDEN, generator=g)
    residual = hidden_states
    h = rms_norm(hidden_states)
    gate = h @ weights(HIDDEN, INTERMEDIATE, generator=g)
    up = h @ weights(HIDDEN, INTERMEDIATE, generator=g)
    return residual + (silu(gate) * up) @ weights(INTERMEDIATE, HIDDEN, generator=g)
'''

# As the old workload: fresh random weights on every call, the SiLU through CuPy.
ORIGINAL = {
    "WEIGHTS(shape, generator)": "torch.randn(*shape, device=generator) * 0.02",
    "GENERATOR(hidden_states.device)": "hidden_states.device",
    "SILU(x)": (
        "out = torch.empty_like(x)\n"
        "    silu_kernel(((x.numel() + 255) // 256,), (256,),\n"
        "                (cp.asarray(x), cp.asarray(out), x.numel()))\n"
        "    return out"
    ),
}
# The same layer with seeded weights and the SiLU in torch: deterministic, and runs on cpu.
DETERMINISTIC = {
    "WEIGHTS(shape, generator)": (
        "torch.randn(*shape, generator=generator, device=generator.device) * 0.02"
    ),
    "GENERATOR(hidden_states.device)": "torch.Generator(hidden_states.device).manual_seed(0)",
    "SILU(x)": "return torch.nn.functional.silu(x)",
}


def decoder_request(variant: dict[str, str], seq_len: int) -> dict[str, Any]:
    source = DECODER_LAYER
    for placeholder, code in variant.items():
        source = source.replace(placeholder, code)
    return {
        "kernel": {
            "source_code": source,
            "kernel_type": "multi_kernel",
            "metadata": {"entry_point": "run", "description": "Llama3 decoder layer (scaled down)"},
            "io": {
                "args": [
                    {
                        "name": "hidden_states",
                        "type": "tensor",
                        "tensor_spec": {
                            "shape": [1, seq_len, 256],
                            "dtype": "float32",
                            "init": {"kind": "randn", "seed": 42},
                        },
                        "role": "input",
                    }
                ]
            },
        },
        "num_trials": 10,
        "timeout": 300,
    }


def test_decoder_layer_workload_shape_evaluates(server: KforgeServer) -> None:
    with httpx.Client(base_url=server.url, timeout=900) as c:
        r = c.post("/evaluate", json=decoder_request(DETERMINISTIC, seq_len=32))
    assert r.status_code == 200, r.text
    result = r.json()["kernel_exec_result"]
    assert result["compiled"] and result["correctness"], result
    assert result["runtime_stats"]["mean"] > 0
    assert result["runtime"] == result["runtime_stats"]["mean"]


def test_decoder_layer_as_the_old_server_wrote_it(server: KforgeServer) -> None:
    with httpx.Client(base_url=server.url, timeout=900) as c:
        r = c.post("/evaluate", json=decoder_request(ORIGINAL, seq_len=32))
    assert r.status_code == 200, r.text
    result = r.json()["kernel_exec_result"]
    assert result["compiled"] is True, result  # CuPy imports and the request shape is accepted
    if server.devices == "cpu":
        # CuPy needs a GPU: the SiLU call fails, and says why.
        assert result["correctness"] is False
        assert "cuda" in result["validation_error"].lower(), result["validation_error"]
