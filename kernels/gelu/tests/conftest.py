"""pytest setup of one op's own tests: ``<op>/tests/`` of the kernel library or of a
``kforge bench --kernels DIR`` directory (docs/kernel-library.md, "Per-op tests").

Run them with pytest alone, from anywhere::

    python -m pytest -q kernels/softmax/tests                     # both files
    python -m pytest -q kernels/softmax/tests/test_correctness.py

They read the op's directory, the parent of this one: ``manifest.json`` (or, for a ``--kernels``
op without one, the copy `kforge bench` keeps in ``tests/manifest.json``) and the four version
files ``v1_baseline.py`` .. ``v4_optimized.py``. Environment:

- ``KFORGE_TEST_DEVICE``: ``cpu`` or ``cuda:N`` (default ``cuda:0`` when torch sees a GPU, else
  ``cpu``). On ``cpu`` Triton runs in its interpreter: ``TRITON_INTERPRET=1`` is set here,
  before triton is imported.
- ``KFORGE_SIZE_PRESET``: ``default`` (the manifest's sizes for the device: its ``cpu`` sizes on
  the cpu device, its ``gpu`` sizes on a GPU) or ``seed`` (the ``gpu`` sizes, 256x256 ..
  4096x4096, on any device), as ``kforge bench --size-preset``.
- ``KFORGE_TEST_SIZES`` (``small,medium,large``), ``KFORGE_TEST_DTYPE`` (the op's default),
  ``KFORGE_CORRECT_TRIALS`` (3), ``KFORGE_BENCH_RUNS`` (timed runs per kernel, 5 on cpu, 50 on a
  GPU).

`kforge bench` writes this file from ``kernels/_scaffold/tests/`` when an op has none, and never
overwrites it: edit it freely. Run one op's tests per pytest invocation (each op has files of the
same names), or pass ``--import-mode=importlib`` to run several at once.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

VERSIONS = ("v1_baseline", "v2_tiling", "v3_coalesced", "v4_optimized")
SIZES = ("small", "medium", "large")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
OP_DIR = Path(__file__).resolve().parent.parent


def _device() -> torch.device:
    default = "cuda:0" if torch.cuda.is_available() else "cpu"
    return torch.device(os.environ.get("KFORGE_TEST_DEVICE") or default)


DEVICE = _device()
if DEVICE.type == "cpu":
    # Triton reads this when it is imported (by the first version file loaded).
    os.environ["TRITON_INTERPRET"] = "1"
    # The fix of kernels/interpreter_compat.py, here so that the directory stands alone: Triton
    # 3.6's interpreter under NumPy >= 2.4 fails on loops with run-time bounds
    # (triton-lang/triton#9172, fixed after 3.6.0).
    import triton.runtime.interpreter as _triton_interpreter

    if not getattr(_triton_interpreter, "_kforge_index_fix", False):
        _patch_lang_tensor = _triton_interpreter._patch_lang_tensor

        def _patch_lang_tensor_with_scalar_index(tensor: Any, scope: Any) -> None:
            _patch_lang_tensor(tensor, scope)
            scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

        _triton_interpreter._patch_lang_tensor = _patch_lang_tensor_with_scalar_index
        _triton_interpreter._kforge_index_fix = True


def _env_list(name: str, default: tuple[str, ...], allowed: tuple[str, ...]) -> tuple[str, ...]:
    raw = os.environ.get(name)
    if not raw:
        return default
    items = tuple(s.strip() for s in raw.split(",") if s.strip())
    for item in items:
        if item not in allowed:
            raise pytest.UsageError(f"{name}: '{item}' is not one of {', '.join(allowed)}")
    return items


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise pytest.UsageError(f"{name}: '{raw}' must be a positive integer")
    return int(raw)


def _load_manifest() -> dict[str, Any]:
    for path in (OP_DIR / "manifest.json", OP_DIR / "tests" / "manifest.json"):
        if path.is_file():
            return json.loads(path.read_text())
    raise pytest.UsageError(f"{OP_DIR}: no manifest.json (nor tests/manifest.json)")


def _init_tensor(init: dict[str, Any], shape: list[int], gen: torch.Generator) -> torch.Tensor:
    """A float32 tensor drawn like the IOContract init `kforge bench` gives its jobs."""
    kind = init.get("kind", "randn")
    if kind == "randn":
        t = torch.randn(shape, generator=gen) * init.get("std", 1.0) + init.get("mean", 0.0)
    elif kind == "uniform":
        low, high = init.get("low", 0.0), init.get("high", 1.0)
        t = torch.rand(shape, generator=gen) * (high - low) + low
    elif kind == "zeros":
        t = torch.zeros(shape)
    elif kind == "ones":
        t = torch.ones(shape)
    elif kind == "full":
        t = torch.full(shape, float(init["fill_value"]))
    elif kind == "arange":
        n = math.prod(shape)
        t = (torch.arange(n) * init.get("step", 1.0) + init.get("start", 0.0)).reshape(shape)
    else:
        raise pytest.UsageError(f"manifest.json: init kind '{kind}' is not supported here")
    return t.float()


@dataclass
class Op:
    """The op under test: its manifest, the chosen sizes and dtype, and its versions."""

    manifest: dict[str, Any]
    profile: str
    sizes: tuple[str, ...]
    dtype: str
    trials: int
    runs: int
    timings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.manifest["op"]

    def label(self, size: str) -> str:
        return self.manifest["sizes"][self.profile][size]["label"]

    def tolerance(self) -> dict[str, float]:
        return self.manifest["tolerance"][self.dtype]

    def inputs(self, size: str, seed: int) -> dict[str, Any]:
        """The manifest's arguments at `size`: tensors on the device in the dtype, scalars."""
        gen = torch.Generator().manual_seed(seed)
        shapes = self.manifest["sizes"][self.profile][size]["shapes"]
        args: dict[str, Any] = {}
        for arg in self.manifest["args"]:
            if arg["type"] == "tensor":
                t = _init_tensor(arg.get("init", {}), shapes[arg["name"]], gen)
                args[arg["name"]] = t.to(device=DEVICE, dtype=DTYPES[self.dtype])
            else:
                args[arg["name"]] = arg["value"]
        return args

    def reference(self, args: dict[str, Any]) -> Any:
        namespace = {"torch": torch, "F": torch.nn.functional, **args}
        return eval(self.manifest["reference"], namespace)

    def call(self, wrapper: Callable[..., Any], args: dict[str, Any]) -> Any:
        return eval(self.manifest["call"], {self.manifest["wrapper"]: wrapper, **args})

    def wrapper(self, version: str) -> Callable[..., Any]:
        """The version file's wrapper (``triton_<op>``); importing it is its compile check."""
        path = OP_DIR / f"{version}.py"
        if not path.is_file():
            pytest.fail(f"{path}: missing (every op has {', '.join(VERSIONS)})")
        spec = importlib.util.spec_from_file_location(f"kforge_op_{self.name}_{version}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, self.manifest["wrapper"], None)
        if fn is None:
            pytest.fail(f"{path}: defines no {self.manifest['wrapper']}()")
        return fn

    def check(self, out: Any, expected: torch.Tensor) -> None:
        assert isinstance(out, torch.Tensor), f"returned {type(out).__name__}, not a tensor"
        assert out.shape == expected.shape, f"shape {list(out.shape)} != {list(expected.shape)}"
        assert out.dtype == expected.dtype, f"dtype {out.dtype} != {expected.dtype}"
        tol = self.tolerance()
        torch.testing.assert_close(out, expected, atol=tol["atol"], rtol=tol["rtol"])

    def time_ms(self, fn: Callable[[], Any]) -> float:
        """Mean time per call over `runs` calls after one warm-up call: CUDA events around them
        on a GPU, the wall clock on cpu. A quick look, not kforge's protocol (no L2 flush, no
        outlier handling): `kforge bench` gives the numbers to quote."""
        fn()
        if DEVICE.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(DEVICE)
            start.record()
            for _ in range(self.runs):
                fn()
            end.record()
            torch.cuda.synchronize(DEVICE)
            return start.elapsed_time(end) / self.runs
        start_s = time.perf_counter()
        for _ in range(self.runs):
            fn()
        return (time.perf_counter() - start_s) * 1e3 / self.runs


def format_speedup(x: float) -> str:
    """Like kforge's logs: two decimals, two significant digits below 0.1x, never 0.00x."""
    if not math.isfinite(x) or x <= 0:
        return "—"
    if x >= 0.1:
        return f"{x:.2f}x"
    if x < 1e-6:
        return "<0.000001x"
    return f"{x:.{1 - math.floor(math.log10(x))}f}x"


def _make_op() -> Op:
    manifest = _load_manifest()
    preset = os.environ.get("KFORGE_SIZE_PRESET") or "default"
    if preset not in ("default", "seed"):
        raise pytest.UsageError(f"KFORGE_SIZE_PRESET: '{preset}' is not default or seed")
    profile = "gpu" if preset == "seed" or DEVICE.type != "cpu" else "cpu"
    dtype = os.environ.get("KFORGE_TEST_DTYPE") or manifest["default_dtype"]
    if dtype not in manifest["dtypes"]:
        raise pytest.UsageError(f"KFORGE_TEST_DTYPE: '{dtype}' is not one of {manifest['dtypes']}")
    return Op(
        manifest=manifest,
        profile=profile,
        sizes=_env_list("KFORGE_TEST_SIZES", SIZES, SIZES),
        dtype=dtype,
        trials=_env_int("KFORGE_CORRECT_TRIALS", 3),
        runs=_env_int("KFORGE_BENCH_RUNS", 5 if DEVICE.type == "cpu" else 50),
    )


@functools.cache
def _the_op() -> Op:
    """One per session: read at collection (the parameters) and by the fixture."""
    return _make_op()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    op = _the_op()
    if "version" in metafunc.fixturenames:
        metafunc.parametrize("version", VERSIONS)
    if "size" in metafunc.fixturenames:
        metafunc.parametrize("size", op.sizes, ids=[f"{s}-{op.label(s)}" for s in op.sizes])


@pytest.fixture(scope="session")
def op() -> Iterator[Op]:
    yield _the_op()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    op = _the_op() if _the_op.cache_info().currsize else None
    if op is None or not op.timings:
        return
    terminalreporter.section(f"{op.name}: mean time per call (ms), {DEVICE}, {op.dtype}")
    for t in op.timings:
        terminalreporter.write_line(
            f"{t['version']:<13} {t['size']:<7} {t['label']:<24} {t['kernel_ms']:>10.4g}"
            f"  torch {t['torch_ms']:.4g}  {format_speedup(t['speedup'])} vs torch"
        )
