"""Warm-up of the zygote (no CUDA) and of each child (CUDA context and first launches).

The zygote must never initialise CUDA (a CUDA context does not survive fork): it warms
torch's CPU ops on tensors small enough to stay single-threaded (an OpenMP pool started
before fork is unsafe in the child), the Triton interpreter on the cpu device, and Triton's
compile pipeline for GPUTarget("cuda", arch, 32) when --arch is given (a full compile, so
the MLIR passes and ptxas are paged in).

A child on a GPU creates its CUDA context, launches a Triton kernel once (this loads
Triton's driver and launcher machinery), runs torch's common ops once and one short profiler
pass (Kineto/CUPTI's first start costs seconds), so the job pays none of it. Every step is
timed and may fail on its own; failures are reported, not fatal.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import triton

from kforge_worker.core.devinfo import WorkerDevice, describe, one_cpu_thread

# warm_kernels and fused_compare are imported in the functions that use them, on purpose: their
# @triton.jit decides at import whether the kernels are compiled or interpreted, so they wait
# for TRITON_INTERPRET's final value (__main__.py sets it per device).


@dataclass
class WarmupReport:
    steps_ms: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    total_ms: float = 0.0

    def run(self, name: str, step: Callable[[], object]) -> None:
        start = time.perf_counter()
        try:
            step()
        except Exception as e:
            self.errors[name] = "".join(traceback.format_exception_only(e)).strip()
        elapsed = (time.perf_counter() - start) * 1e3
        self.steps_ms[name] = round(elapsed, 3)
        self.total_ms = round(self.total_ms + elapsed, 3)


def torch_common_ops(device: torch.device) -> None:
    """The ops the harness itself uses (inputs, poison, compare, checks), once each."""
    gen = torch.Generator(device=device)
    gen.manual_seed(1)
    a = torch.randn(64, generator=gen, device=device)
    b = torch.empty(64, device=device).uniform_(0.0, 1.0, generator=gen)
    i = torch.randint(0, 10, (64,), generator=gen, device=device, dtype=torch.int32)
    c = a.clone()
    c.zero_()
    c.fill_(float("nan"))
    torch.allclose(a, b)
    both = torch.isfinite(a) & ~torch.isnan(b)
    d = (a.to(torch.float64) - b.to(torch.float64)).abs()
    torch.where(both, d <= 1e-4 + 1e-4 * b.abs().to(torch.float64), a == b)
    int(torch.argmax((a != b).to(torch.uint8)).item())
    float(d.max().item())
    bool(torch.equal(i.view(torch.int32), i))
    torch.bitwise_not(i)
    (a.half() + 1).bfloat16().sub(1).eq(0).sum()
    torch.full((8,), 3.0, device=device).sum()
    torch.arange(16, dtype=torch.float64, device=device).reshape(4, 4).to(torch.float32)


def harness_checks(device: torch.device) -> None:
    """The judge's own checks (compare, plausibility, poison, bit equality) once per common
    dtype on small tensors, passing and failing: a job's first use of each loads its device
    kernels, a fixed cost that showed as ~70 ms of `compare` phase on an H200 whatever the
    output's size. Small enough that no CPU op starts a thread pool (a candidate is forked
    after this on the cpu device)."""
    from kforge_worker.candidate.binding import poison_for
    from kforge_worker.check.compare import (
        compare_tensors,
        output_spread,
        resolve_tolerance,
        same_bits,
    )

    gen = torch.Generator(device=device)
    gen.manual_seed(2)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        want = torch.randn(256, generator=gen, device=device).to(dtype)
        got = want.clone()
        tol = resolve_tolerance(dtype, None, None)
        compare_tensors("warm", want, got, tol)
        output_spread(want, got, tol)
        same_bits(want, got)
        got[7] = float("nan")
        compare_tensors("warm", want, got, tol)  # the mismatch path: counts, first element
        poison_for(torch.empty_like(want), want, tol)


def candidate_checks(device: torch.device) -> None:
    """What a candidate process runs of the checks: the bit equality of inputs before and
    after a call and their digests (candidate/server.py; on a GPU the digest kernel, verified at
    its first use), once per common dtype."""
    from kforge_worker.check.compare import bits_digest, same_bits

    gen = torch.Generator(device=device)
    gen.manual_seed(2)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        want = torch.randn(4096, generator=gen, device=device).to(dtype)
        same_bits(want, want.clone())
        bits_digest(want)


def _warm_add_call(device: torch.device) -> tuple[tuple[Any, ...], tuple[int]]:
    """The warm-up kernel's arguments (x, x, out, n) and grid."""
    from kforge_worker.process import warm_kernels

    n = 1000
    x = torch.arange(n, dtype=torch.float32, device=device)
    return (x, x, torch.empty_like(x), n), (triton.cdiv(n, warm_kernels.BLOCK),)


def triton_launch(device: torch.device) -> None:
    from kforge_worker.process import warm_kernels

    args, grid = _warm_add_call(device)
    x, _, out, _ = args
    warm_kernels.warm_add[grid](*args, BLOCK=warm_kernels.BLOCK)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if not torch.equal(out, x + x):
        raise RuntimeError("the warm-up kernel computed a wrong result")


def triton_compile(arch: int) -> Any:
    """A full compile (cache bypassed) of the warm-up kernel for a CUDA target, no GPU used;
    the compiled kernel (it is also in Triton's cache now)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kforge_worker.process import warm_kernels

    src = ASTSource(
        fn=warm_kernels.warm_add,
        signature=warm_kernels.SIGNATURE,
        constexprs={"BLOCK": warm_kernels.BLOCK},
    )
    with triton.knobs.compilation.scope():
        triton.knobs.compilation.always_compile = True
        return triton.compile(src, target=GPUTarget("cuda", arch, 32))


def triton_host_modules(compiled: list[Any]) -> None:
    """Triton's C modules for the GPU, built into the zygote's cache without loading them (a
    child loads them from there, through the read-only layer of triton_cache.py): the
    driver's utilities (`cuda_utils`) and the launchers of `compiled`'s signatures: the
    warm-up kernel's (pointers, an int, a constexpr: a vector add's too) and those of
    fused_compare's kernels (pointers and constexprs). Otherwise every process of
    every child ran the host's C compiler for each at its first launch: 0.43-0.50 s for
    `cuda_utils` alone on an H100 host (bench/child_warmup_profile.py). Loading them here is
    what Triton would do, but it maps libcuda into the zygote; building them is enough."""
    from pathlib import Path

    from triton.backends.nvidia import driver as nvidia

    _build_host_module(Path(nvidia.dirname, "driver.c").read_text(), "cuda_utils")
    for kernel in compiled:
        src = kernel.src
        constants = {
            (src.fn.arg_names.index(k),) if isinstance(k, str) else k: v
            for k, v in src.constants.items()
        }
        launcher = nvidia.make_launcher(
            constants, dict(src.signature), getattr(kernel.metadata, "tensordesc_meta", None)
        )
        _build_host_module(launcher, "__triton_launcher")  # once per distinct source


def _build_host_module(src: str, name: str) -> None:
    """What triton.runtime.build.compile_module_from_src does, less loading the module: the
    same key, cache entry and build (Triton 3.6), so a later call finds it in the cache."""
    import hashlib
    import sysconfig
    import tempfile

    from triton.backends.nvidia import driver as nvidia
    from triton.runtime import build
    from triton.runtime.cache import get_cache_manager

    key = hashlib.sha256((src + build.platform_key()).encode("utf-8")).hexdigest()
    cache = get_cache_manager(key)
    filename = f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    if cache.get_file(filename) is not None:
        return
    with tempfile.TemporaryDirectory() as tmpdir:
        src_path = os.path.join(tmpdir, name + ".c")
        with open(src_path, "w") as f:
            f.write(src)
        so = build._build(
            name,
            src_path,
            tmpdir,
            nvidia.library_dirs(),
            nvidia.include_dirs,
            nvidia.libraries,
            [],
        )
        with open(so, "rb") as f:
            cache.put(f.read(), filename, binary=True)


def preload_modules() -> None:
    """Modules a job may need that are cheap to import once in the zygote. torch.profiler's
    first pass imports torch._inductor.config and torch.distributed (881 modules with sympy
    and dynamo: 3.6 s of the 5.1 s first pass on an H200); imported here, they cost each
    child nothing, and Kineto/CUPTI themselves start in the child (warm_child's `profiler`),
    since a process that started them cannot fork safely."""
    import importlib

    for name in (
        "torch._inductor.config",
        "torch.distributed",
        "torch.utils.cpp_extension",
        "triton.compiler.errors",
        "triton.runtime.autotuner",
        "triton.runtime.interpreter",
        "triton.backends.nvidia.compiler",
        "triton.backends.nvidia.driver",
        "numpy",
        "kforge_worker.process.warm_kernels",
        "kforge_worker.check.fused_compare",
        # The judge's and candidate's own modules (a child imported correctness.py in its
        # warm-up: ~0.1 s on an H100 host).
        "kforge_worker.judge.correctness",
        "kforge_worker.judge.evaluate",
        "kforge_worker.candidate.server",
    ):
        try:
            importlib.import_module(name)
        except Exception:  # an optional backend may be missing
            continue


def warm_zygote(device: WorkerDevice, arch: int | None) -> WarmupReport:
    report = WarmupReport()
    report.run("preload_modules", preload_modules)
    report.run("torch_cpu_ops", lambda: torch_common_ops(torch.device("cpu")))
    if not device.is_cuda:
        report.run("triton_interpreter", lambda: triton_launch(torch.device("cpu")))
    elif arch is not None:
        compiled: list[Any] = []
        report.run("triton_compile", lambda: compiled.append(triton_compile(arch)))
        report.run("fused_compare_compile", lambda: compiled.extend(_fused_compile(arch)))
        if compiled:
            report.run("triton_host_modules", lambda: triton_host_modules(compiled))
    return report


def _fused_compile(arch: int) -> list[Any]:
    from kforge_worker.check import fused_compare

    return fused_compare.precompile(arch)


def warm_child(device: WorkerDevice, role: str = "judge") -> tuple[WarmupReport, dict[str, Any]]:
    """Warms a job process; returns the report and the `device` description for `ready`.
    `role` is "judge" (the forked child) or "candidate" (its candidate process), which
    skips what only the judge does (the fused comparison, the judge's own checks: it keeps
    the bit-equality check it runs on the inputs) and the cuBLAS handle (a Triton or `cuda`
    candidate never uses it; a torch one that does makes it in its first correctness call,
    before anything is timed): ~0.4 s of a 1.4 s warm-up on an H200."""
    judge = role == "judge"
    report = WarmupReport()
    described: dict[str, Any] = {"kind": device.kind}
    tdev = device.torch_device()
    if not device.is_cuda:
        one_cpu_thread()
    if device.is_cuda:
        # cuInit and the device count apart from the primary context, so /stats says which
        # of the two the jail or a busy driver makes slow.
        report.run("cuda_init", torch.cuda.init)
        report.run("cuda_context", lambda: _cuda_context(tdev))
        # A child's first Triton launch took ~1 s on an H100 (2.1-2.5 s warm-ups): its parts
        # as steps of their own, so /stats says which it is.
        report.run("triton_driver", _triton_driver)
        report.run("triton_kernel", lambda: _triton_kernel(tdev))
    report.run("triton_launch", lambda: triton_launch(tdev))
    report.run("torch_ops", lambda: torch_common_ops(tdev))
    if device.is_cuda and judge:
        report.run("fused_compare", lambda: _fused_compare(tdev))
    if judge:
        report.run("harness_checks", lambda: harness_checks(tdev))
    else:
        report.run("candidate_checks", lambda: candidate_checks(tdev))
    if device.is_cuda:
        report.run("cuda_events", lambda: _cuda_events(tdev))
        if judge:  # a candidate's kernel that uses cuBLAS starts it in its correctness calls
            report.run("torch_matmul", lambda: _matmul(tdev))
        report.run("timing_protocol", lambda: _timing_protocol(tdev))
        report.run("profiler", lambda: _profiler(tdev))

    def describe_step() -> None:
        described.update(describe(device))

    report.run("describe_device", describe_step)
    return report, described


def _triton_driver() -> None:
    """Triton's driver for the GPU: its C utilities (a module the host's C compiler builds
    unless Triton's cache has it) and the device's target."""
    from triton.runtime import driver

    driver.active.get_current_target()


def _triton_kernel(device: torch.device) -> None:
    """The warm-up kernel compiled or loaded from Triton's cache without a launch
    (JITFunction.warmup), then its module loaded and its C launcher built or loaded
    (CompiledKernel._init_handles): what the first launch would do before launching."""
    from kforge_worker.process import warm_kernels

    args, grid = _warm_add_call(device)
    kernel = warm_kernels.warm_add.warmup(*args, BLOCK=warm_kernels.BLOCK, grid=grid)
    if hasattr(kernel, "result"):  # an asynchronous compile's future
        kernel = kernel.result()
    kernel._init_handles()


def _fused_compare(device: torch.device) -> None:
    """The fused comparison kernel for float32 outputs loaded from the zygote's cache and
    verified against the torch path (compare.fused_ready); other dtypes are verified at
    their first use in a job. Raises where the kernel disagreed (compare then uses torch)."""
    from kforge_worker.check.compare import FUSED_DISAGREEMENTS, fused_ready

    fused_ready(device, torch.float32, exact=False)
    if FUSED_DISAGREEMENTS:
        key, problem = next(iter(FUSED_DISAGREEMENTS.items()))
        raise RuntimeError(f"the fused comparison disagreed with torch's ({key}): {problem}")


def _cuda_context(device: torch.device) -> None:
    torch.cuda.set_device(device)
    torch.empty(1, device=device)
    torch.cuda.synchronize(device)


def _cuda_events(device: torch.device) -> None:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    buf = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    start.record()
    buf.fill_(1)
    end.record()
    torch.cuda.synchronize(device)
    start.elapsed_time(end)
    torch.cuda.current_stream(device).synchronize()


def _timing_protocol(device: torch.device) -> None:
    """The L2 flush buffer and the calibrated spin of timing.py, made once per process."""
    from kforge_worker.timing.timing import flusher_for, spinner_for

    flusher_for(device).flush()
    spinner_for(device)
    torch.cuda.synchronize(device)


def _profiler(device: torch.device) -> None:
    """One short torch.profiler pass with the activities of activity.profile_windows: the
    first pass of a process initialises Kineto and CUPTI, which took 6.1 s on an H200 (the
    next pass 12 ms); every job's kernel-activity pass would pay it otherwise. The pass ends
    before the job's first timed trial, as the job's own profiled pass does."""
    from kforge_worker.timing.activity import profiler_activities

    buf = torch.empty(1 << 10, device=device)
    with torch.profiler.profile(activities=profiler_activities()):
        with torch.profiler.record_function("kforge.warmup"):
            buf.fill_(1.0)
        torch.cuda.synchronize(device)


def _matmul(device: torch.device) -> None:
    """Creates the cuBLAS handle (a first matmul costs tens of ms otherwise)."""
    a = torch.randn(64, 64, device=device)
    (a @ a).sum().item()
    (a.half() @ a.half()).sum().item()
