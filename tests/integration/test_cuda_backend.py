"""`kernel_type: "cuda"` end to end: the real server, the native CUDA worker (`kforge worker
cuda`) and, for compares with a torch reference, the Python worker through libkforge_cuda.so.

Runs on the test device: on `cpu` (CI, no GPU) NVRTC still compiles, so compile errors are
reported, and everything that needs a GPU fails fast with "no CUDA device on this server";
on a GPU (KFORGE_TEST_DEVICE=cuda:0) kernels run and are checked.
"""

from __future__ import annotations

import base64
import struct
import time
import zlib
from typing import Any

import pytest

from integration.cuda_kernels import (
    INFINITE_LOOP,
    OUT_OF_BOUNDS,
    SYNTAX_ERROR,
    TORCH_ADD_REF,
    TORCH_MATMUL_REF,
    VECTOR_ADD,
    cuda_kernel,
    naive_matmul,
    tiled_matmul,
    vector_add,
    vector_add_io,
)
from integration.kernels import FAST_TIMING, torch_kernel
from integration.kforge_server import KforgeServer, device_under_test

ON_GPU = device_under_test() != "cpu"
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs a GPU (KFORGE_TEST_DEVICE=cuda:N)")
cpu_only = pytest.mark.skipif(ON_GPU, reason="checks the no-GPU path")
NO_DEVICE = "no CUDA device on this server"


def post(srv: KforgeServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    with srv.client() as c:
        r = c.post(path, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def evaluate(srv: KforgeServer, kernel: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body = {"kernel": kernel, "timing": FAST_TIMING, "num_correct_trials": 2, **extra}
    return post(srv, "/evaluate", body)["kernel_exec_result"]


def compare(
    srv: KforgeServer, ref: dict[str, Any], custom: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    body = {"ref_kernel": ref, "custom_kernel": custom, "timing": FAST_TIMING, **extra}
    return post(srv, "/compare", body)


# --- every device ------------------------------------------------------------------------


def test_syntax_error_reports_compiled_false_and_the_nvrtc_log(server: KforgeServer) -> None:
    res = evaluate(server, vector_add(source=SYNTAX_ERROR))
    assert res["compiled"] is False, res
    assert res["correctness"] is False
    assert res["error_kind"] == "compile"
    log = res["compilation_error"]
    assert "NVRTC_ERROR_COMPILATION" in log
    assert "vector_add.cu(4)" in log  # file and line of the missing ';'
    assert 'expected a ";"' in log
    assert res["metadata"]["kernel_type"] == "cuda"
    assert res["metadata"]["worker_runtime"] == "native"


def test_unknown_kernel_name_is_a_compile_error_naming_the_field(server: KforgeServer) -> None:
    kernel = vector_add()
    kernel["metadata"]["kernel_name"] = "vector_sub"
    res = evaluate(server, kernel)
    assert res["compiled"] is False, res
    assert "metadata.kernel_name 'vector_sub' is not defined" in res["compilation_error"]


def test_a_kernel_without_kernel_name_is_its_sources_only_global_function(
    server: KforgeServer,
) -> None:
    # As the old server: the single __global__ function needs no name.
    kernel = vector_add()
    del kernel["metadata"]["kernel_name"]
    res = evaluate(server, kernel)
    assert res["compiled"] is True, res
    assert res["metadata"]["kernel_name"] == "vector_add"


def test_cuda_status_is_in_stats(server: KforgeServer) -> None:
    with server.client() as c:
        stats = c.get("/stats").json()
    device = next(d for d in stats["devices"] if d["name"] == server.devices)
    cuda = device["workers"]["cuda"]
    assert cuda["type"] == "cuda"
    assert cuda["state"] in ("ready", "busy", "starting")


def _missing(path: list[str | int]) -> Any:
    def edit(kernel: dict[str, Any]) -> None:
        target: Any = kernel
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


def _set(path: list[str | int], value: Any) -> Any:
    def edit(kernel: dict[str, Any]) -> None:
        target: Any = kernel
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _two_kernels_without_a_name(kernel: dict[str, Any]) -> None:
    kernel["source_code"] += "\n__global__ void other(float* x) {}\n"
    del kernel["metadata"]["kernel_name"]


@pytest.mark.parametrize(
    ("edit", "field", "reason"),
    [
        (
            _two_kernels_without_a_name,
            "kernel.metadata.kernel_name",
            "several __global__ functions (vector_add, other)",
        ),
        (_missing(["io", "launch", "block"]), "kernel.io.launch.block", "is required"),
        (_missing(["io", "launch", "grid"]), "kernel.io.launch.grid", "is required"),
        (
            _set(["metadata", "compile_options"], ["-O3", "-I/etc"]),
            "kernel.metadata.compile_options[1]",
            "not allowed",
        ),
        (
            _set(["metadata", "compile_options"], ["--fancy"]),
            "kernel.metadata.compile_options[0]",
            "not an allowed NVRTC option",
        ),
        (
            _set(["io", "launch", "block"], [1024, 2, 1]),
            "kernel.io.launch.block",
            "at most 1024 threads",
        ),
        (
            _set(["io", "args", 3], {"name": "n", "type": "str", "value": "x"}),
            "kernel.io.args[3].type",
            "cannot take a 'str'",
        ),
    ],
)
def test_malformed_cuda_requests_get_400_naming_the_json_path(
    server: KforgeServer, edit: Any, field: str, reason: str
) -> None:
    kernel = vector_add()
    edit(kernel)
    with server.client() as c:
        r = c.post("/evaluate", json={"kernel": kernel})
    assert r.status_code == 400, r.text
    err = r.json()
    assert err["field"] == field, err
    assert reason in err["message"], err


# --- no GPU (CI) --------------------------------------------------------------------------


@cpu_only
def test_valid_kernel_fails_fast_without_a_gpu(server: KforgeServer) -> None:
    start = time.monotonic()
    res = evaluate(server, vector_add())
    elapsed = time.monotonic() - start
    assert res["compiled"] is True, res  # NVRTC still compiled it
    assert res["correctness"] is False
    assert res["error_kind"] == "runtime"
    assert NO_DEVICE in res["runtime_error"]
    assert "compiled for sm_" in res["runtime_error"]
    assert elapsed < 30


@cpu_only
def test_torch_reference_vs_cuda_candidate_without_a_gpu(server: KforgeServer) -> None:
    out = compare(server, torch_kernel(TORCH_ADD_REF), vector_add())
    res = out["kernel_exec_result"]
    assert res["compiled"] is True, res
    assert res["correctness"] is False
    assert res["error_kind"] == "runtime"
    assert NO_DEVICE in res["runtime_error"], res


@cpu_only
def test_torch_reference_vs_broken_cuda_candidate_reports_the_log(server: KforgeServer) -> None:
    out = compare(server, torch_kernel(TORCH_ADD_REF), vector_add(source=SYNTAX_ERROR))
    res = out["kernel_exec_result"]
    assert res["compiled"] is False, res
    assert 'expected a ";"' in res["compilation_error"]


def test_inline_zlib_inputs_reach_the_native_worker(server: KforgeServer) -> None:
    """The canonical spec carries inline data; the native worker decodes it once, when it reads
    the spec, and builds the tensors from those bytes. The reference squares y, so the two
    kernels agree only where y is exactly 1: a pass on a GPU shows the inline ones were used
    (random inputs would differ)."""
    n = 4096
    ones = base64.b64encode(zlib.compress(struct.pack(f"<{n}f", *([1.0] * n)))).decode()
    x = base64.b64encode(struct.pack(f"<{n}f", *(float(i % 7) for i in range(n)))).decode()

    def kernel(expr: str) -> dict[str, Any]:
        k = vector_add(n=n, source=VECTOR_ADD.replace("x[i] + y[i]EXTRA", expr))
        args = k["io"]["args"]
        literal = {"dtype": "float32", "shape": [n]}
        args[0]["tensor_spec"] = {**args[0]["tensor_spec"], "data": {**literal, "data_b64": x}}
        args[1]["tensor_spec"] = {
            **args[1]["tensor_spec"],
            "data": {**literal, "data_b64": ones, "compress": "zlib"},
        }
        return k

    out = compare(server, kernel("x[i] + y[i] * y[i]"), kernel("x[i] + y[i]"))
    res = out["kernel_exec_result"]
    assert res["compiled"] is True, res
    if ON_GPU:
        assert res["correctness"] is True, res
        assert res["correctness_details"]["max_abs_error"] == 0.0, res["correctness_details"]
    else:
        assert res["error_kind"] == "runtime", res
        assert NO_DEVICE in res["runtime_error"]


# --- on a GPU -------------------------------------------------------------------------------


@gpu_only
def test_vector_add_passes_against_a_cuda_reference(server: KforgeServer) -> None:
    out = compare(server, vector_add(), vector_add(), num_correct_trials=3)
    res = out["kernel_exec_result"]
    assert res["compiled"] is True, res
    assert res["correctness"] is True, res
    assert res["correctness_details"]["trials_passed"] == 3
    assert res["runtime"] > 0
    assert out["ref_runtime"]["mean"] > 0
    assert res["metadata"]["compile_arch"].startswith("sm_")
    assert res["metadata"]["gpu_type"]


@gpu_only
def test_vector_add_evaluate_passes_and_second_compile_hits_the_cache(
    server: KforgeServer,
) -> None:
    kernel = vector_add(extra=" * 1.0f")  # a source no other test compiles
    first = evaluate(server, kernel)
    assert first["correctness"] is True, first
    second = evaluate(server, kernel)
    assert second["correctness"] is True, second
    assert second["metadata"]["compile"]["cache"] == "hit"


@gpu_only
def test_tiled_matmul_passes_against_a_naive_cuda_reference(server: KforgeServer) -> None:
    out = compare(server, naive_matmul(), tiled_matmul(), atol=1e-3, rtol=1e-3)
    res = out["kernel_exec_result"]
    assert res["correctness"] is True, res
    assert res["metadata"]["compile"]["options"] == ["--ptxas-options=-O3", "-DTILE=16"]


@gpu_only
def test_tiled_matmul_passes_against_torch(server: KforgeServer) -> None:
    out = compare(server, torch_kernel(TORCH_MATMUL_REF), tiled_matmul(), atol=1e-3, rtol=1e-3)
    res = out["kernel_exec_result"]
    assert res["correctness"] is True, res
    assert out["ref_runtime"]["mean"] > 0


@gpu_only
def test_torch_reference_vs_cuda_candidate_passes_on_identical_inputs(
    server: KforgeServer,
) -> None:
    out = compare(server, torch_kernel(TORCH_ADD_REF), vector_add(), num_correct_trials=3)
    res = out["kernel_exec_result"]
    assert res["compiled"] is True, res
    assert res["correctness"] is True, res
    assert res["correctness_details"]["trials_passed"] == 3
    assert out["speedup"] > 0


@gpu_only
def test_wrong_kernel_fails_with_the_max_error(server: KforgeServer) -> None:
    out = compare(server, vector_add(), vector_add(extra=" + 1.0f"))
    res = out["kernel_exec_result"]
    assert res["compiled"] is True
    assert res["correctness"] is False, res
    assert res["error_kind"] == "mismatch"
    assert res["correctness_details"]["max_abs_error"] == pytest.approx(1.0, rel=1e-3)
    assert "max abs error 1" in res["validation_error"]


@gpu_only
def test_wrong_kernel_fails_against_torch_too(server: KforgeServer) -> None:
    out = compare(server, torch_kernel(TORCH_ADD_REF), vector_add(extra=" + 1.0f"))
    res = out["kernel_exec_result"]
    assert res["correctness"] is False, res
    assert res["correctness_details"]["max_abs_error"] == pytest.approx(1.0, rel=1e-3)


@gpu_only
def test_out_of_bounds_write_is_caught_and_the_next_job_passes(server: KforgeServer) -> None:
    res = evaluate(server, vector_add(source=OUT_OF_BOUNDS))
    assert res["compiled"] is True
    assert res["correctness"] is False, res
    assert "illegal memory access" in res["runtime_error"].lower(), res
    after = evaluate(server, vector_add())
    assert after["correctness"] is True, after


@gpu_only
def test_a_cuda_graph_job_leaves_the_worker_sound_for_the_next(server: KforgeServer) -> None:
    """The graph's kernel nodes point at the job's buffers: they must outlive every replay,
    and the next job on the same warm worker must not meet them (an H200 run did)."""
    graph = evaluate(server, vector_add(), timing={**FAST_TIMING, "cuda_graph": True})
    assert graph["correctness"] is True, graph
    assert graph["runtime_stats"]["method"] == "cuda_graph", graph["warnings"]
    for _ in range(2):
        after = evaluate(server, vector_add())
        assert after["correctness"] is True and after["runtime_stats"]["median"] > 0, after


@gpu_only
def test_infinite_loop_is_killed_at_its_timeout(server: KforgeServer) -> None:
    start = time.monotonic()
    res = evaluate(server, vector_add(source=INFINITE_LOOP), timeout=5)
    elapsed = time.monotonic() - start
    assert res["error_kind"] == "timeout", res
    assert res["correctness"] is False
    assert "timed out after 5" in res["runtime_error"]
    assert elapsed < 40
    assert evaluate(server, vector_add())["correctness"] is True


@gpu_only
def test_parameter_count_mismatch_is_reported(server: KforgeServer) -> None:
    io = vector_add_io()
    io["args"].append({"name": "extra", "type": "int", "value": 1})
    res = evaluate(server, cuda_kernel(vector_add()["source_code"], io))
    assert res["correctness"] is False, res
    assert "takes 4 parameter(s)" in (res.get("runtime_error") or ""), res
