"""The Python client (clients/python: kforge_client, alias kernel_eval_client) against the real
server: its examples run as written, and every public call of the old client and of kforge's
additions, blocking and async, does what it says."""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import importlib
import json
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import kernel_eval_client
import kforge_client
from integration.kernels import FAST_TIMING, TORCH_ADD_REF, model_source, torch_kernel
from integration.kforge_server import REPO, KforgeServer
from kforge_client import (
    ArgSpec,
    AsyncKernelEvalClient,
    CompareJob,
    EvaluateJob,
    IOContract,
    IOContractBuilder,
    KernelCode,
    KernelEvalClient,
    KernelEvalError,
    KernelType,
    LaunchConfig,
    LaunchDim,
    RuntimeStats,
    TensorData,
    TensorInit,
    TensorSpec,
    create_arange_spec,
    create_full_spec,
    create_ones_spec,
    create_randn_spec,
    create_tensor_spec,
    create_uniform_spec,
    create_zeros_spec,
    load_from_file,
    save_to_file,
    to_json,
)

CLIENT = REPO / "clients" / "python"
EXAMPLES = sorted((CLIENT / "examples").glob("*.py"))

REF = KernelCode(source_code=TORCH_ADD_REF, kernel_type=KernelType.TORCH)
# 2^16 elements: large enough that the add takes measurable time on a busy cpu, so the
# typed speedup fields below are always given.
ADD_N = 1 << 16
ADD_IO = IOContractBuilder().add_input_tensor("x", create_randn_spec([ADD_N])).build()
ADD_IO.args.append(ArgSpec(name="y", tensor_spec=create_randn_spec([ADD_N])))


def add_candidate(expression: str = "x + y") -> KernelCode:
    return KernelCode(
        source_code=f"def f(x, y):\n    return {expression}\n",
        kernel_type="torch",
        io=ADD_IO,
        metadata={"function_name": "f"},
    )


FAST = {"timing": FAST_TIMING, "num_correct_trials": 2}
SLEEPY = torch_kernel(model_source("time.sleep(120)\nreturn x", prelude="import time"))


@pytest.fixture(scope="module")
def own_server() -> Iterator[KforgeServer]:
    """A server of this module's own: cleanup_jobs must not delete other tests' jobs."""
    srv = KforgeServer().start()
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


# --- the package ----------------------------------------------------------------------------


def test_the_package_has_pypi_metadata_and_both_names() -> None:
    meta = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    for key in ("name", "version", "description", "readme", "requires-python", "license"):
        assert meta.get(key), key
    assert meta["version"] == kforge_client.__version__
    assert "Typing :: Typed" in meta["classifiers"]
    assert any(d.startswith("httpx") for d in meta["dependencies"])
    for package in ("kforge_client", "kernel_eval_client"):
        assert (CLIENT / "src" / package / "py.typed").exists()
    # This checkout's client is the one imported (an editable install or the test path).
    assert Path(kforge_client.__file__).is_relative_to(CLIENT / "src")


def test_the_old_package_name_serves_the_same_objects() -> None:
    assert set(kernel_eval_client.__all__) == set(kforge_client.__all__)
    for name in kforge_client.__all__:
        assert getattr(kernel_eval_client, name) is getattr(kforge_client, name), name
    for module in ("models", "builder", "specs", "client"):
        old = importlib.import_module(f"kernel_eval_client.{module}")
        new = importlib.import_module(f"kforge_client.{module}")
        for name in new.__all__:
            assert getattr(old, name) is getattr(new, name), (module, name)
    assert kernel_eval_client.models.RuntimeStats is RuntimeStats


# --- examples -------------------------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_runs_against_the_server(server: KforgeServer, example: Path) -> None:
    args = [sys.executable, str(example), server.url]
    if example.name == "cuda_kernel.py" and server.devices != "cpu":
        args.append("--expect-gpu")
    env = {**os.environ, "PYTHONPATH": str(CLIENT / "src")}
    r = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env, check=False)
    assert r.returncode == 0, f"{example.name}:\n{r.stdout}\n{r.stderr}"
    expected = {
        "simple_pytorch.py": "Custom kernel passed validation",
        "triton_kernel.py": "Speedup:",
        "cuda_kernel.py": "kernel_scale: compiled successfully",
        "advanced_patterns.py": "6 of 6 patterns worked",
        "batch_and_async.py": "n=4096",
    }[example.name]
    assert expected in r.stdout, r.stdout


# --- the old client's calls -----------------------------------------------------------------


def test_old_client_calls(own_server: KforgeServer) -> None:
    with KernelEvalClient(own_server.url, timeout=120) as client:
        health = client.health_check()
        assert health["status"] == "healthy" and "available_gpus" in health["gpu_manager"]

        out = client.compare(REF, add_candidate(), num_trials=5, **FAST)
        assert out["status"] == "success"
        assert isinstance(out["ref_runtime"], RuntimeStats)
        assert out["ref_runtime"]["mean"] == out["ref_runtime"].mean > 0
        stats = out["kernel_exec_result"]["runtime_stats"]
        assert isinstance(stats, RuntimeStats) and stats.min <= stats.median <= stats.max
        assert out["kernel_exec_result"]["runtime"] == stats.mean

        # Kernels as dicts work too; a wrong kernel is a result with the reason.
        wrong = add_candidate("x - y").to_dict()
        out = client.compare(REF.to_dict(), wrong, num_trials=5, **FAST)
        assert out["kernel_exec_result"]["correctness"] is False
        assert "elements differ" in out["kernel_exec_result"]["validation_error"]

        evaluated = client.evaluate(torch_kernel(model_source("return x * 2")), **FAST)
        assert evaluated["kernel_exec_result"]["correctness"] is True
        job = client.get_job_status(evaluated["job_id"])
        assert job["status"] == "completed" and isinstance(job["created_at"], float)
        assert job["error"] is None

        stats = client.get_stats()
        assert stats["job_stats"]["total_jobs"] >= 3
        assert stats["throughput"]["total_requests"] >= 3
        cleaned = client.cleanup_jobs()  # the old server's default age, 300 s
        assert cleaned == {"status": "cleanup_completed", "deleted": 0, "older_than_seconds": 300}
        assert client.cleanup_jobs(older_than_seconds=0)["deleted"] >= 3
        with pytest.raises(KernelEvalError):
            client.get_job_status(evaluated["job_id"])  # deleted


def test_bad_requests_raise_naming_the_field(own_server: KforgeServer) -> None:
    client = KernelEvalClient(own_server.url)
    with pytest.raises(KernelEvalError) as bad:
        client.evaluate(add_candidate(), timeout=1)
    assert bad.value.status_code == 400 and bad.value.field == "timeout"
    assert "timeout: must be between 5" in str(bad.value)
    with pytest.raises(KernelEvalError) as missing:
        client.job("0123456789abcdef")
    assert missing.value.status_code == 404
    client.close()


SCALE_TRITON = """
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets) * 2)
"""


def test_the_old_docs_keyword_forms_run(server: KforgeServer) -> None:
    # The old server's docs (its CLAUDE.md) wrote the builder's calls by keyword, which its own
    # client refused; the contract they build here is one kforge runs (test_client_compat.py
    # checks it equals the old positional forms' contract).
    io = (
        IOContractBuilder()
        .add_input_tensor("x", shape=[1024], dtype="float32", init_kind="randn")
        .add_output_tensor("y", shape=[1024], dtype="float32")
        .add_meta_param("BLOCK_SIZE", value=256)
        .set_launch_config(grid=(4, 1, 1), num_warps=4)
        .build()
    )
    kernel = KernelCode(source_code=SCALE_TRITON, kernel_type="triton", io=io)
    ref = KernelCode(
        source_code="def scale(x, **meta):\n    return x * 2\n",
        kernel_type="torch",
        io=io,
        metadata={"function_name": "scale"},
    )
    with KernelEvalClient(server.url) as client:
        out = client.compare(ref, kernel, num_trials=5, **FAST)
    assert out["status"] == "success", out
    res = out["kernel_exec_result"]
    assert res["correctness"] is True, (res.get("validation_error"), res.get("runtime_error"))


# --- kforge's additions ---------------------------------------------------------------------


def test_typed_results_jobs_and_batches(own_server: KforgeServer) -> None:
    with KernelEvalClient(own_server.url, poll_interval=0.1) as client:
        result = client.compare_result(REF, add_candidate(), num_trials=5, **FAST)
        assert result.ok and result.status == "success" and result.state == "success"
        assert result.ref_runtime is not None and result.speedup is not None
        assert result.speedup_ci is not None and result.speedup_ci[0] <= result.speedup_ci[1]
        assert result.speedup_verdict in ("faster", "slower", "indistinguishable")
        assert result.kernel_exec_result.speedup_ci == result.speedup_ci
        assert result.kernel_exec_result.runtime_median is not None
        assert result.kernel_exec_result.reason is None

        broken = client.evaluate_result(torch_kernel("import torch\nclass Model(:\n"), **FAST)
        assert not broken.ok and not broken.kernel_exec_result.compiled
        assert "SyntaxError" in (broken.kernel_exec_result.reason or "")

        job_id = client.submit_compare(REF, add_candidate(), num_trials=5, **FAST)
        assert client.job(job_id).status in ("submitted", "compiling", "validating", "completed")
        waited = client.wait_for_job(job_id)
        assert waited.ok and waited.job_id == job_id
        assert client.job(job_id).done and client.job(job_id).result is not None

        sleeper = client.submit_evaluate(SLEEPY)
        cancelled = client.cancel_job(sleeper, reason="no longer needed")
        assert cancelled.state == "cancelled" and "no longer needed" in (cancelled.error or "")
        assert cancelled.status == "failed" and cancelled.done

        items = [
            CompareJob(REF, add_candidate(), num_trials=5, options=FAST),
            CompareJob(REF, add_candidate("x * y"), num_trials=5, options=FAST),
            EvaluateJob(torch_kernel(model_source("return x + 1")), options=FAST),
        ]
        results = client.run_batch(items)
        assert [r.ok for r in results] == [True, False, True]
        ids = client.submit_batch(items[:1])
        assert client.wait_for_job(ids[0]).ok

        doc = client.openapi()
        assert doc["openapi"] == "3.1.0" and "/evaluate" in doc["paths"]


def test_async_client(own_server: KforgeServer) -> None:
    async def scenario() -> dict[str, Any]:
        async with AsyncKernelEvalClient(own_server.url, poll_interval=0.1) as client:
            health = await client.health_check()
            compared, evaluated = await asyncio.gather(
                client.compare(REF, add_candidate(), num_trials=5, **FAST),
                client.evaluate(torch_kernel(model_source("return x * 2")), **FAST),
            )
            job = await client.get_job_status(evaluated["job_id"])
            typed = await client.compare_result(REF, add_candidate("x - y"), **FAST)
            evaluated_typed = await client.evaluate_result(
                torch_kernel(model_source("return x")), **FAST
            )
            job_id = await client.submit_compare(REF, add_candidate(), **FAST)
            waited = await client.wait_for_job(job_id)
            looked_up = await client.job(job_id)
            eval_id = await client.submit_evaluate(SLEEPY)
            cancelled = await client.cancel_job(eval_id)
            batch = await client.run_batch([EvaluateJob(add_candidate(), options=FAST)] * 3)
            batch_ids = await client.submit_batch([CompareJob(REF, add_candidate(), options=FAST)])
            stats = await client.get_stats()
            cleaned = await client.cleanup_jobs(max_age_hours=1)
            doc = await client.openapi()
        return locals()

    out = asyncio.run(scenario())
    assert out["health"]["status"] == "healthy"
    assert out["compared"]["ref_runtime"]["mean"] > 0
    assert out["evaluated"]["kernel_exec_result"]["correctness"] is True
    assert out["job"]["status"] == "completed"
    assert out["typed"].kernel_exec_result.correctness is False
    assert out["evaluated_typed"].ok
    assert out["waited"].ok and out["looked_up"].done
    assert out["cancelled"].state == "cancelled"
    assert [r.ok for r in out["batch"]] == [True, True, True]
    assert len(out["batch_ids"]) == 1
    assert "job_stats" in out["stats"]
    assert out["cleaned"]["status"] == "cleanup_completed"
    assert "/compare" in out["doc"]["paths"]


# --- models, builder, helpers ---------------------------------------------------------------


def test_models_round_trip_and_take_dicts(tmp_path: Path) -> None:
    contract = (
        IOContractBuilder()
        .add_input_tensor("a", create_randn_spec([4, 8], "float16", seed=1, mean=1.0, std=2.0))
        .add_inout_tensor("b", create_uniform_spec([8], seed=2, low=-1.0, high=1.0))
        .add_output_tensor("c", [4, 8], "float16")
        .add_scalar("n", "int", 32)
        .add_scalar("alpha", "float", 0.5)
        .add_meta_param("BLOCK", 64)
        .set_grid(2, 3)
        .set_block(64)
        .set_shared_mem(1024)
        .set_num_warps(4)
        .set_num_stages(2)
        .build()
    )
    data = contract.to_dict()
    assert data["args"][1]["role"] == "inout" and data["args"][5]["is_meta"] is True
    assert data["launch"] == {
        "grid": {"x": 2, "y": 3, "z": 1},
        "block": {"x": 64, "y": 1, "z": 1},
        "shared_mem_bytes": 1024,
        "num_warps": 4,
        "num_stages": 2,
    }
    assert "value" not in data["args"][0]  # None is left out
    assert IOContract.from_dict(data) == contract
    assert IOContract(**data) == contract  # nested dicts are converted, as pydantic did
    builder = IOContractBuilder().set_launch_config(LaunchConfig(grid=LaunchDim(x=9)))
    assert builder.build().launch.grid.x == 9  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="scalar_type"):
        IOContractBuilder().add_scalar("x", "tensor", 1)

    # Every request file's launch config survives the client (a dropped shared_mem_bytes made
    # the cuda row_sum replay read past its shared memory on the GPU).
    for path in sorted((Path(__file__).parent / "legacy_requests").glob("*/*.json")):
        request = json.loads(path.read_text())
        for key in ("ref_kernel", "custom_kernel"):
            launch = (request[key].get("io") or {}).get("launch")
            if launch:
                parsed = KernelCode.from_dict(request[key]).to_dict()["io"]["launch"]
                assert {k: parsed[k] for k in launch} == {
                    k: ({"x": 1, "y": 1, "z": 1} | v) if isinstance(v, dict) else v
                    for k, v in launch.items()
                }, path

    kernel = KernelCode(source_code="k", kernel_type="cuda", io=data, metadata={"kernel_name": "k"})
    assert kernel.kernel_type is KernelType.CUDA and isinstance(kernel.io, IOContract)
    assert KernelCode.from_dict(kernel.to_dict()) == kernel
    assert kernel.to_dict()["kernel_type"] == "cuda"
    with pytest.raises(ValueError):
        KernelCode(source_code="k", kernel_type="rust")

    for obj, kind in ((contract, "IOContract"), (kernel, "KernelCode"), ({"a": 1}, "dict")):
        path = tmp_path / f"{kind}.json"
        save_to_file(obj, path)
        loaded = load_from_file(path, kind)
        assert loaded == obj
        assert to_json(obj) == to_json(loaded)
    assert to_json(contract, pretty=True).startswith("{\n")
    with pytest.raises(ValueError, match="obj_type"):
        load_from_file(tmp_path / "dict.json", "Nope")


def test_spec_helpers() -> None:
    assert create_tensor_spec([2]).to_dict() == {"shape": [2], "dtype": "float32"}
    assert create_zeros_spec([2]).init == TensorInit(kind="zeros")
    assert create_ones_spec([2], "int32").init == TensorInit(kind="ones")
    assert create_full_spec([2], 3.5).init == TensorInit(kind="full", fill_value=3.5)
    assert create_arange_spec([4], start=1.0, step=0.5).init == TensorInit(
        kind="arange", start=1.0, step=0.5
    )
    assert create_tensor_spec([3], "float64", "randn", seed=7, std=3.0).to_dict() == {
        "shape": [3],
        "dtype": "float64",
        "init": {"kind": "randn", "seed": 7, "std": 3.0},
    }
    literal = TensorSpec(shape=[1], data={"data_b64": "AACAPw==", "shape": [1]})
    assert isinstance(literal.data, TensorData) and literal.data.compress == "none"


def test_runtime_stats_reads_as_attributes_and_as_a_mapping() -> None:
    stats = RuntimeStats.from_dict({"mean": 2.0, "median": 1.5, "trials": 10, "method": "x"})
    assert stats.mean == stats["mean"] == 2.0 and stats.get("max") == 0.0
    assert stats["trials"] == 10 and "method" in stats and "nope" not in stats
    assert stats.get("nope", 1) == 1 and stats.keys()[-1] == "method"
    with pytest.raises(KeyError):
        stats["nope"]


# --- retries and batches -------------------------------------------------------------------


def test_a_full_queue_is_retried_after_retry_after() -> None:
    # One job at a time: a second submit gets 503 with Retry-After (5 s) while the first runs.
    srv = KforgeServer(extra_args=["--max-queued-jobs", "1"]).start()
    try:
        srv.wait_ready()
        sleeper = torch_kernel(model_source("time.sleep(4)\nreturn x", prelude="import time"))
        body = {"kernel": sleeper, "num_correct_trials": 1, "measure_performance": False}
        with srv.client() as c:
            r = c.post("/evaluate", params={"wait": "false"}, json=body)
            assert r.status_code == 202, r.text
            full = c.post("/evaluate", params={"wait": "false"}, json=body)
            assert full.status_code == 503 and full.headers["Retry-After"] == "5", full.text
        with KernelEvalClient(srv.url, retries=0) as impatient:
            with pytest.raises(KernelEvalError) as refused:
                impatient.evaluate_result(add_candidate(), **FAST)
            assert refused.value.status_code == 503
        with KernelEvalClient(srv.url, poll_interval=0.1, retries=30, max_retry_wait=0.5) as c2:
            t0 = time.monotonic()
            result = c2.evaluate_result(add_candidate(), **FAST)
            assert result.ok, result
            assert time.monotonic() - t0 >= 0.5  # it waited for the sleeper, retrying
    finally:
        srv.stop()


def test_one_problems_compares_go_in_one_batch(own_server: KforgeServer) -> None:
    items = [CompareJob(REF, add_candidate(e), num_trials=5, options=FAST)
             for e in ("x + y", "y + x", "x * y")]  # fmt: skip
    with KernelEvalClient(own_server.url, poll_interval=0.1) as client:
        results = client.run_batch(items)
    assert [r.ok for r in results] == [True, True, False]
    # The server computed the reference once: the later candidates reused it.
    reuse = [r.kernel_exec_result.raw.get("reference_reuse") for r in results]
    assert all(r is not None for r in reuse), reuse
    assert len({r["key"] for r in reuse}) == 1 and any(r["reused"] for r in reuse), reuse


def test_retry_after_is_seconds_or_a_date_else_a_doubling_backoff() -> None:
    from kforge_client._protocol import MAX_BACKOFF_S, retry_after_s

    def refusal(headers: dict[str, str]) -> httpx.Response:
        return httpx.Response(503, headers=headers)

    assert retry_after_s(refusal({"Retry-After": "5"}), 0) == 5.0
    assert retry_after_s(refusal({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), 0) == 0.0
    later = email.utils.format_datetime(
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    )
    assert 25 <= retry_after_s(refusal({"Retry-After": later}), 0) <= 30
    assert [retry_after_s(refusal({}), k) for k in range(3)] == [0.5, 1.0, 2.0]
    assert retry_after_s(refusal({"Retry-After": "soon"}), 20) == MAX_BACKOFF_S
