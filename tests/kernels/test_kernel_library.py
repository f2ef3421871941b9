"""Every version of every op in kernels/ against its torch reference (the small size of the
device's profile in the manifest), plus the library's contracts: manifests that match their
shapes, self-contained version files, the torch interface with clear errors for bad input.

On the cpu device Triton runs in its interpreter, which does not implement bfloat16 dots
(triton-lang/triton#11584), so bfloat16 attention is checked on the GPU only.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from kernel_cases import (
    DTYPES,
    LIBRARY,
    OPS,
    VERSIONS,
    Case,
    apply_interpreter_compat,
    device,
    expected_cost,
    interpreted,
    load_op,
    make_case,
)

SIZES = ("small", "medium", "large")
SELF_CONTAINED_IMPORTS = {"__future__", "math", "os", "collections.abc", "torch", "triton"}
SELF_CONTAINED_IMPORTS |= {"triton.language"}


@pytest.fixture(scope="session", autouse=True)
def _interpreter_compat() -> None:
    if interpreted():
        apply_interpreter_compat()


def version_fn(op: str, version: str) -> Callable[..., Any]:
    return load_op(op).VERSIONS[version]


def assert_matches(out: Any, expected: torch.Tensor, tol: dict[str, float]) -> None:
    assert isinstance(out, torch.Tensor), f"returned {type(out).__name__}"
    assert out.shape == expected.shape and out.dtype == expected.dtype
    assert out.device == expected.device
    torch.testing.assert_close(out, expected, atol=tol["atol"], rtol=tol["rtol"])


# ---- the manifests ----


@pytest.mark.parametrize("op", OPS)
def test_manifest_is_complete_and_its_costs_match_the_shapes(op: str) -> None:
    m = load_op(op).MANIFEST
    assert m["op"] == op and m["wrapper"].startswith("triton_")
    for key in ("definition", "inputs_outputs", "complexity", "bound", "bound_reason"):
        assert m["phase1"][key], key
    assert m["phase1"]["bound"] in ("memory", "compute")
    names = [a["name"] for a in m["args"]]
    assert len(set(names)) == len(names)
    tensors = [a["name"] for a in m["args"] if a["type"] == "tensor"]
    assert tensors and all(
        a["type"] in ("tensor", "int", "float", "str", "bool") for a in m["args"]
    )
    assert all("value" in a for a in m["args"] if a["type"] != "tensor")
    assert m["default_dtype"] in m["dtypes"] and set(m["dtypes"]) <= set(m["tolerance"])
    assert set(m["dtypes"]) <= set(DTYPES)
    for profile in ("gpu", "cpu"):
        assert list(m["sizes"][profile]) == list(SIZES)
        for size in m["sizes"][profile].values():
            assert set(size["shapes"]) == set(tensors)
            assert (size["elements_moved"], size["flops"]) == expected_cost(m, size)
    # The GPU sizes are the skill's 256x256, 1024x1024, 4096x4096 (for mha: the sequence length).
    gpu = m["sizes"]["gpu"]
    first = tensors[0]
    sides = [gpu[s]["shapes"][first][-2] for s in SIZES]
    assert sides == [256, 1024, 4096]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("version", VERSIONS)
def test_version_file_is_self_contained_and_describes_itself(op: str, version: str) -> None:
    path = LIBRARY / op / f"{version}.py"
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import (versions must stand alone)"
            imported.add(node.module or "")
    assert imported <= SELF_CONTAINED_IMPORTS, f"{path.name} imports {imported}"
    wrapper = load_op(op).MANIFEST["wrapper"]
    assert any(isinstance(n, ast.FunctionDef) and n.name == wrapper for n in tree.body)
    doc = ast.get_docstring(tree, clean=False) or ""
    lines = doc.splitlines()
    assert lines[0].startswith(f"{version} — "), lines[0]
    assert lines[1].startswith("ko: ") and len(lines[1]) > 4, "second line: the Korean summary"


# ---- correctness against the torch reference ----


def _dtype_cases() -> list[Any]:
    cases = []
    for op in OPS:
        for version in VERSIONS:
            for dtype in load_op(op).MANIFEST["dtypes"]:
                marks = []
                if op == "mha" and dtype == "bfloat16" and interpreted():
                    marks.append(pytest.mark.skip(reason="the interpreter has no bfloat16 dot"))
                cases.append(pytest.param(op, version, dtype, marks=marks))
    return cases


@pytest.mark.parametrize(("op", "version", "dtype"), _dtype_cases())
def test_version_matches_torch_at_small_size(op: str, version: str, dtype: str) -> None:
    case = make_case(load_op(op).MANIFEST, "small", dtype, seed=hash((op, dtype)) % 1000)
    expected = case.reference()
    out = case.call(version_fn(op, version))
    assert_matches(out, expected, case.tolerance(dtype))


def _strided_case(op: str) -> tuple[Case, dict[str, Any]]:
    """Non-contiguous inputs of the op at the small size, float32."""
    m = load_op(op).MANIFEST
    case = make_case(m, "small", m["default_dtype"], seed=7)
    a = case.args
    if op == "add":  # column slices of wider tensors
        a["x"] = torch.cat([a["x"], a["x"]], dim=1)[:, 3:-5]
        a["y"] = torch.cat([a["y"], a["y"]], dim=1)[:, 5:-3]
    elif op in ("softmax", "gelu"):  # a transposed view
        a["x"] = a["x"].t()
    elif op == "layer_norm":  # rows with a stride, and a matching weight/bias
        a["x"] = a["x"][:, : a["x"].shape[1] - 5]
        a["weight"] = a["weight"][: a["x"].shape[1]]
        a["bias"] = a["bias"][: a["x"].shape[1]]
    else:  # attention in [batch, seq, heads, head_dim] memory, viewed as [b, h, s, d]
        for name in ("query", "key", "value"):
            a[name] = a[name].transpose(1, 2).contiguous().transpose(1, 2)
    return case, a


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("version", VERSIONS)
def test_version_handles_non_contiguous_inputs(op: str, version: str) -> None:
    case, args = _strided_case(op)
    assert any(isinstance(v, torch.Tensor) and not v.is_contiguous() for v in args.values())
    expected = case.reference()
    out = case.call(version_fn(op, version))
    assert_matches(out, expected, case.tolerance(case.manifest["default_dtype"]))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_both_forms(version: str, approximate: str) -> None:
    x = torch.randn(8, 100, device=device()) * 4  # tails where tanh saturates
    expected = F.gelu(x, approximate=approximate)
    assert_matches(
        version_fn("gelu", version)(x, approximate), expected, {"atol": 1e-5, "rtol": 1e-5}
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_softmax_other_dims_and_extreme_values(version: str) -> None:
    fn = version_fn("softmax", version)
    x = torch.randn(4, 6, 40, device=device())
    for dim in (0, 1, -1):
        assert_matches(fn(x, dim), torch.softmax(x, dim), {"atol": 1e-5, "rtol": 1e-5})
    big = torch.tensor([[1e4, -1e4, 0.0, float("-inf")], [88.0, 89.0, 90.0, 91.0]], device=device())
    assert_matches(fn(big, -1), torch.softmax(big, -1), {"atol": 1e-6, "rtol": 1e-5})


@pytest.mark.parametrize("version", VERSIONS)
def test_layer_norm_without_affine_and_over_two_dims(version: str) -> None:
    fn = version_fn("layer_norm", version)
    x = torch.randn(6, 5, 24, device=device()) * 10 + 100  # a large mean: variance must be stable
    tol = {"atol": 1e-4, "rtol": 1e-4}
    assert_matches(fn(x, (24,)), F.layer_norm(x, (24,)), tol)
    w, b = torch.randn(5, 24, device=device()), torch.randn(5, 24, device=device())
    assert_matches(fn(x, (5, 24), w, b, 1e-3), F.layer_norm(x, (5, 24), w, b, 1e-3), tol)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("causal", [False, True])
def test_mha_causal_ragged_lengths_and_odd_head_dim(version: str, causal: bool) -> None:
    fn = version_fn("mha", version)
    q = torch.randn(1, 2, 40, 24, device=device())
    k = torch.randn(1, 2, 72, 24, device=device())
    v = torch.randn(1, 2, 72, 24, device=device())
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.3)
    assert_matches(fn(q, k, v, is_causal=causal, scale=0.3), expected, {"atol": 1e-4, "rtol": 1e-4})


# ---- bad input gets a clear error naming the argument ----

_BAD_INPUTS: dict[str, list[tuple[Callable[[], tuple[Any, ...]], type[Exception], str]]] = {
    "add": [
        (
            lambda: (torch.ones(4, dtype=torch.int32), torch.ones(4, dtype=torch.int32)),
            TypeError,
            "x:",
        ),
        (lambda: (torch.ones(4), torch.ones(5)), ValueError, "y:"),
        (lambda: (torch.ones(4), torch.ones(4, dtype=torch.float16)), TypeError, "y:"),
    ],
    "softmax": [
        (lambda: (torch.ones(4, dtype=torch.int64),), TypeError, "x:"),
        (lambda: (torch.ones(4, 4), 2), IndexError, "dim:"),
    ],
    "gelu": [
        (lambda: (torch.ones(4, dtype=torch.int32),), TypeError, "x:"),
        (lambda: (torch.ones(4), "fast"), ValueError, "approximate:"),
    ],
    "layer_norm": [
        (lambda: (torch.ones(4, 8), (7,)), ValueError, "normalized_shape:"),
        (lambda: (torch.ones(4, 8), (8,), torch.ones(7)), ValueError, "weight:"),
        (lambda: ("x", (8,)), TypeError, "x:"),
    ],
    "mha": [
        (
            lambda: (torch.ones(1, 1, 4, 8), torch.ones(1, 1, 4, 8), torch.ones(1, 1, 5, 8)),
            ValueError,
            "key/value:",
        ),
        (lambda: (torch.ones(1, 1, 4, 8, dtype=torch.int32),) * 3, TypeError, "query:"),
    ],
}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("version", VERSIONS)
def test_bad_input_is_rejected_naming_the_argument(op: str, version: str) -> None:
    fn = version_fn(op, version)
    for make_args, error, field in _BAD_INPUTS[op]:
        args = tuple(a.to(device()) if isinstance(a, torch.Tensor) else a for a in make_args())
        with pytest.raises(error, match=f"^{field}"):
            fn(*args)


@pytest.mark.parametrize("version", VERSIONS)
def test_mha_rejects_what_it_does_not_implement(version: str) -> None:
    fn = version_fn("mha", version)
    q = torch.ones(1, 1, 4, 8, device=device())
    with pytest.raises(ValueError, match=r"^attn_mask:"):
        fn(q, q, q, attn_mask=torch.ones(4, 4, dtype=torch.bool, device=device()))
    with pytest.raises(ValueError, match=r"^dropout_p:"):
        fn(q, q, q, dropout_p=0.1)


# ---- each op's own tests (kernels/<op>/tests, from kernels/_scaffold/tests) ----

SCAFFOLD = LIBRARY / "_scaffold" / "tests"
OP_TEST_FILES = ("conftest.py", "test_correctness.py", "test_benchmark.py")


@pytest.mark.parametrize("op", OPS)
def test_each_op_carries_the_scaffolds_tests(op: str) -> None:
    for name in OP_TEST_FILES:
        own = LIBRARY / op / "tests" / name
        assert own.read_text() == (SCAFFOLD / name).read_text(), f"{own}: differs from {SCAFFOLD}"
    # The interpreter fix is copied into the conftest, so that an op directory stands alone.
    fix = 'scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))'
    assert fix in (LIBRARY / "interpreter_compat.py").read_text()
    assert fix in (SCAFFOLD / "conftest.py").read_text()


def _run_op_tests(tests: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest alone on an op's tests/ directory, in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests), *args],
        cwd=tests.parent, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "KFORGE_TEST_DEVICE": str(device())},
    )  # fmt: skip


def test_an_ops_tests_pass_with_pytest_alone_for_a_correct_op() -> None:
    run = _run_op_tests(LIBRARY / "add" / "tests")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "24 passed" in run.stdout  # 4 versions x 3 sizes, correctness and benchmark
    assert "vs torch" in run.stdout and "0.00x" not in run.stdout  # the timing table


def test_an_ops_tests_fail_for_a_wrong_version(tmp_path: Path) -> None:
    """A copy of add (an agent's directory: no manifest of its own, the bench's copy in tests/)
    whose v2 subtracts instead of adding: both files fail v2 at every size, and only v2."""
    op_dir = tmp_path / "add"
    shutil.copytree(LIBRARY / "add", op_dir, ignore=shutil.ignore_patterns("__pycache__"))
    (op_dir / "manifest.json").rename(op_dir / "tests" / "manifest.json")
    (op_dir / "__init__.py").unlink()
    v2 = op_dir / "v2_tiling.py"
    wrong = v2.read_text().replace("(x + alpha * y)", "(x - alpha * y)")
    assert wrong != v2.read_text()
    v2.write_text(wrong)
    run = _run_op_tests(op_dir / "tests")
    assert run.returncode == 1, run.stdout[-4000:]
    failed = sorted(
        line.split(" ")[1] for line in run.stdout.splitlines() if line.startswith("FAILED")
    )
    assert len(failed) == 6 and all("[v2_tiling-" in f for f in failed), failed
    files = {Path(f.split("::")[0]).name for f in failed}
    assert files == {"test_benchmark.py", "test_correctness.py"}, failed
    assert "18 passed" in run.stdout
