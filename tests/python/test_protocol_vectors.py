"""The worker contract's shared vectors (tests/protocol/README.md), read by the Python worker:
job specs (spec.py), timing statistics (stats.py), tolerances (compare.py), error kinds and
result documents (results.py). tests/unit/protocol/protocol_vectors_test.cc reads the same
files with the C++ code, so the two sides cannot drift apart unnoticed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from kforge_worker.check import compare
from kforge_worker.core import spec as spec_module
from kforge_worker.core.spec import JobSpec, SpecError, TimingOptions, parse_job, tensor_bytes
from kforge_worker.judge import results
from kforge_worker.timing import stats, timing

VECTORS = Path(__file__).resolve().parents[1] / "protocol"
ACCEPTED = sorted((VECTORS / "specs").glob("accepted_*.json"))
REJECTED = json.loads((VECTORS / "specs" / "rejected.json").read_text())["cases"]
TIMING = json.loads((VECTORS / "timing.json").read_text())


def load(name: str) -> Any:
    return json.loads((VECTORS / name).read_text())


def number(value: Any) -> float:
    """ "Infinity" stands for +inf in the vectors (JSON has none)."""
    return math.inf if value == "Infinity" else float(value)


def close(expected: float, actual: float) -> bool:
    if math.isinf(expected):
        return expected == actual
    return abs(expected - actual) <= 1e-12 * max(1.0, abs(expected))


def what_was_read(job: JobSpec) -> dict[str, Any]:
    """What the worker read from a spec, in the vectors' `expect` shape."""
    args = job.kernel.io.args if job.kernel.io is not None else ()
    inline = {}
    for a in args:
        if a.tensor_spec is not None and a.tensor_spec.data is not None:
            raw = tensor_bytes(a.tensor_spec.data)
            inline[a.name] = {"nbytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    return {
        "kind": job.kind,
        "kernel_type": job.kernel.kernel_type,
        "reference_kernel_type": job.reference.kernel_type if job.reference else None,
        "num_correct_trials": job.num_correct_trials,
        "measure_performance": job.measure_performance,
        "timing": dataclasses.asdict(job.timing),
        "atol": job.atol,
        "rtol": job.rtol,
        "seed": job.seed,
        "device": job.device,
        "timeout_s": job.timeout_s,
        "arg_names": [a.name for a in args],
        "inline_data": inline,
    }


def test_the_vectors_are_there() -> None:
    assert len(ACCEPTED) >= 4
    assert len(REJECTED) >= 20


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: p.stem)
def test_accepted_spec_reads_as_declared(path: Path) -> None:
    vector = json.loads(path.read_text())
    assert what_was_read(parse_job(vector["spec"])) == vector["expect"]


@pytest.mark.parametrize("case", REJECTED, ids=lambda c: c["name"])
def test_rejected_spec_names_the_field(case: dict[str, Any]) -> None:
    with pytest.raises(SpecError) as raised:
        parse_job(case["spec"])
    message = str(raised.value)
    assert message.startswith("job." + case["field"]), message
    if "message" in case:
        assert case["message"] in message, message


def test_error_kinds_are_the_listed_ones() -> None:
    assert list(results.ERROR_KINDS) == load("error_kinds.json")["error_kinds"]


def test_vocabularies_are_the_listed_ones() -> None:
    """The worker's vocabularies and the Python client's KernelType are vocabulary.json's
    lists (the C++ model's, which the MCP schemas take theirs from)."""
    from kforge_client.models import KernelType

    v = load("vocabulary.json")
    assert list(spec_module.KERNEL_TYPES) == v["kernel_types"]
    assert list(spec_module.PYTHON_KERNEL_TYPES) == v["python_worker_kernel_types"]
    assert list(spec_module.DTYPES) == v["dtypes"]
    assert list(spec_module.ARG_TYPES) == v["arg_types"]
    assert list(spec_module.ROLES) == v["arg_roles"]
    assert list(spec_module.INIT_KINDS) == v["init_kinds"]
    assert sorted(k.value for k in KernelType) == sorted(v["kernel_types"])


def _openapi_enums() -> dict[str, list[Any]]:
    """Every `enum` of docs/openapi.json by its schema path."""
    doc = json.loads((VECTORS.parents[1] / "docs" / "openapi.json").read_text())
    found: dict[str, list[Any]] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("enum"), list):
                found[path] = node["enum"]
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}/{i}")

    walk(doc, "")
    return found


@pytest.mark.parametrize(
    ("schema_path", "vocabulary"),
    [
        ("/components/schemas/KernelCode/properties/kernel_type", "kernel_types"),
        ("/components/schemas/TensorSpec/properties/dtype", "dtypes"),
        ("/components/schemas/ArgSpec/properties/type", "arg_types"),
        ("/components/schemas/ArgSpec/properties/role", "arg_roles"),
        ("/components/schemas/TensorInit/properties/kind", "init_kinds"),
        ("/components/schemas/KernelExecutionResult/properties/error_kind", "error_kinds"),
    ],
)
def test_openapi_lists_the_vocabularies(schema_path: str, vocabulary: str) -> None:
    """docs/openapi.json's enums are the vectors' lists (error_kind: also null), and every
    enum of a kernel type in it is the whole list."""
    enums = _openapi_enums()
    want = (load("error_kinds.json") | load("vocabulary.json"))[vocabulary]
    got = [value for value in enums[schema_path] if value is not None]
    assert got == want, schema_path
    if vocabulary == "kernel_types":
        for path, values in enums.items():
            if path.endswith("/kernel_type"):
                assert values == want, path


@pytest.mark.parametrize("case", TIMING["stats"], ids=lambda c: c["name"])
def test_timing_statistics(case: dict[str, Any]) -> None:
    got = dataclasses.asdict(stats.compute_stats(case["samples"], "cuda_event"))
    for key, want in case["stats"].items():
        assert close(number(want), got[key]), (key, want, got[key])


def test_relative_standard_error() -> None:
    for case in TIMING["relative_standard_error"]:
        got = stats.relative_standard_error(case["samples"])
        assert close(number(case["rse"]), got), case


def options(obj: dict[str, Any]) -> TimingOptions:
    return TimingOptions(**obj)


@pytest.mark.parametrize("case", TIMING["stop_reason"], ids=lambda c: c["name"])
def test_stop_rule(case: dict[str, Any]) -> None:
    got = stats.stop_reason(case["samples"], options(case["options"]), case["elapsed_ms"])
    assert got == case["stop_reason"]


def test_spin_sizing_and_warning_bounds() -> None:
    for case in TIMING["spin_us_for"]:
        assert close(case["spin_us"], timing.spin_us_for(case["enqueue_ms"])), case
    for case in TIMING["next_spin_us"]:
        got = timing.next_spin_us(case["spin_us"], case["observed_enqueue_ms"])
        assert close(case["next_spin_us"], got), case
    for case in TIMING["launch_not_hidden"]:
        flagged = stats.launch_not_hidden_message(case["uncovered"], case["trials"], 0.02) != ""
        assert flagged == case["flagged"], case
    for case in TIMING["stream_skew"]:
        message = stats.stream_skew_message(case["sync_median_ms"], case["event_median_ms"])
        assert (message != "") == case["flagged"], case


def test_window_overhead() -> None:
    for case in TIMING["without_window_overhead"]:
        raw = stats.compute_stats(case["samples"], "cuda_event")
        got = dataclasses.asdict(stats.without_window_overhead(raw, case["overhead_ms"]))
        for key, want in case["stats"].items():
            assert close(want, got[key]), (key, want, got[key])


def test_default_tolerances_and_overrides() -> None:
    for case in load("tolerances.json")["cases"]:
        dtype = getattr(torch, case["dtype"])
        tol = compare.resolve_tolerance(dtype, case["atol"], case["rtol"])
        assert (tol.atol, tol.rtol) == (case["expect"]["atol"], case["expect"]["rtol"]), case


def test_result_documents() -> None:
    vectors = load("results.json")
    fresh = results.JobResult().to_dict()
    assert set(vectors["always"]) <= set(fresh)
    assert not set(vectors["when_set"]) & set(fresh)
    assert set(fresh) <= set(vectors["always"]) | set(vectors["when_set"])
    for key, want in vectors["fresh"].items():
        assert fresh[key] == want, key
    for case in vectors["fail_cases"]:
        r = results.JobResult()
        for kind, message in case["fails"]:
            r.fail(kind, message)
        got = r.to_dict()
        for key, want in case["expect"].items():
            assert got[key] == want, (case["name"], key)
        for key in case["absent"]:
            assert key not in got, (case["name"], key)
    for case in vectors["check_cases"]:
        r = results.JobResult()
        for name, passed, message, fatal in case["checks"]:
            r.add_check(name, passed, message, fatal=fatal)
        got = r.to_dict()
        assert got["checks"] == case["expect_checks"]
        assert got["honesty"] == case["expect_honesty"]
