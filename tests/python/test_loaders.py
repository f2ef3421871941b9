"""Loading kernels from source: kernel types, entry points, error classes."""

from __future__ import annotations

import pytest
import torch
import worker_kernels as K
from worker_jobs import make_job, run

from kforge_worker.candidate.loaders import (
    LoadError,
    entry_runnable,
    import_source,
    load_module,
    model_class,
)
from kforge_worker.candidate.tracebacks import is_build_failure
from kforge_worker.core.spec import parse_kernel
from kforge_worker.judge.correctness import report_exception
from kforge_worker.judge.results import JobResult


def kernel(d):
    return parse_kernel(d, "kernel")


def test_torch_candidate_prefers_model_new(tmp_path):
    both = K.KB_REFERENCE + K.KB_CANDIDATE
    module = load_module(kernel(K.torch_kernel(both)), "candidate", str(tmp_path), "")
    assert model_class(module, prefer_new=True).__name__ == "ModelNew"
    assert model_class(module, prefer_new=False).__name__ == "Model"
    with pytest.raises(LoadError, match="no class"):
        model_class(import_source("x = 1\n", "empty", str(tmp_path)), prefer_new=True)


def test_triton_jit_entry_launches_with_grid(tmp_path):
    spec = kernel(K.triton_vadd())
    module = load_module(spec, "candidate", str(tmp_path), "")
    runnable = entry_runnable(spec, module)
    assert runnable.name == "add_kernel" and runnable.passes_outputs
    x, y, out = torch.randn(1000), torch.randn(1000), torch.zeros(1000)
    runnable([x, y, out, 1000], {"BLOCK": 256})
    assert torch.equal(out, x + y)
    assert (tmp_path / "candidate.py").read_text() == K.VADD


def test_triton_wrapper_returns_its_output(tmp_path):
    spec = kernel(K.triton_wrapper())
    runnable = entry_runnable(spec, load_module(spec, "candidate", str(tmp_path), ""))
    x, y = torch.randn(300), torch.randn(300)
    out = runnable([x, y], {"alpha": 2.0})
    assert torch.allclose(out, x + 2.0 * y)


def test_multi_kernel_entry_point(tmp_path):
    spec = kernel(K.multi_kernel())
    runnable = entry_runnable(spec, load_module(spec, "candidate", str(tmp_path), ""))
    x, y, out = torch.randn(700), torch.randn(700), torch.zeros(700)
    runnable([x, y, out, 3.0], {})
    assert torch.allclose(out, (x + y) * 3.0)


def test_entry_point_errors(tmp_path):
    jit_twice = K.VADD + K.VADD.replace("def add_kernel", "def other_kernel")
    two = kernel({**K.triton_vadd(), "source_code": jit_twice})
    with pytest.raises(LoadError, match=r"several @triton\.jit"):
        entry_runnable(two, load_module(two, "candidate", str(tmp_path), ""))
    missing = kernel(K.triton_vadd(entry_point="nope"))
    with pytest.raises(LoadError, match=r"Entry point 'nope' not found .*\(it defines: add_kernel"):
        entry_runnable(missing, load_module(missing, "candidate", str(tmp_path), ""))
    no_grid = K.triton_vadd()
    del no_grid["io"]["launch"]
    no_grid_spec = kernel(no_grid)
    with pytest.raises(LoadError, match=r"io.launch.grid is required"):
        entry_runnable(no_grid_spec, load_module(no_grid_spec, "candidate", str(tmp_path), ""))


def test_a_missing_multi_kernel_entry_point_is_named_as_the_old_server_named_it(tmp_path):
    # The kernel evaluation server's own test looks for "Entry point 'run' not found" in
    # compilation_error.
    source = "import torch\n\ndef wrong_name(x, y):\n    return x + y\n"
    cand = {**K.multi_kernel(), "source_code": source, "metadata": {"entry_point": "run"}}
    result = run(make_job(cand, tmp_path=tmp_path))
    assert result["compiled"] is False and result["error_kind"] == "compile"
    assert "Entry point 'run' not found" in result["compilation_error"]
    assert "wrong_name" in result["compilation_error"]  # what the source does define


def test_cuda_source_is_compiled_not_imported(tmp_path):
    # CUDA C++ is compiled by cuda_runnable (NVRTC through the C ABI), never run as Python.
    spec = kernel({"source_code": "__global__ void k() {}\nimport os", "kernel_type": "cuda"})
    module = load_module(spec, "candidate", str(tmp_path), "")
    assert module.__name__ == "kforge_cuda_candidate"
    assert "os" not in vars(module) and "k" not in vars(module)


def test_syntax_error_is_a_compile_error(tmp_path):
    result = run(make_job(K.triton_vadd(K.VADD_SYNTAX_ERROR), tmp_path=tmp_path))
    assert result["compiled"] is False and result["correctness"] is False
    assert result["error_kind"] == "compile"
    text = result["compilation_error"]
    assert "SyntaxError" in text and "candidate.py" in text
    assert "kforge_worker" not in text  # the worker's own frames are hidden


def test_import_time_exception_is_a_compile_error(tmp_path):
    result = run(make_job(K.triton_vadd(K.VADD_IMPORT_ERROR), tmp_path=tmp_path))
    assert result["compiled"] is False and result["error_kind"] == "compile"
    text = result["compilation_error"]
    assert "ValueError: boom at import" in text
    line = K.VADD_IMPORT_ERROR.splitlines().index("raise ValueError('boom at import')") + 1
    assert f'candidate.py", line {line}' in text


def test_runtime_exception_is_a_runtime_error(tmp_path):
    result = run(make_job(K.triton_wrapper(K.RUNTIME_ERROR_WRAPPER), tmp_path=tmp_path))
    assert result["compiled"] is True and result["correctness"] is False
    assert result["error_kind"] == "runtime"
    text = result["runtime_error"]
    assert "ValueError: bad things in the kernel" in text
    assert 'candidate.py", line 3, in triton_add' in text
    assert "compilation_error" not in result


def test_reference_compile_error_is_labelled(tmp_path):
    ref = K.torch_kernel("def broken(:\n")
    result = run(make_job(K.triton_vadd(), ref, tmp_path=tmp_path))
    assert result["error_kind"] == "compile" and result["compiled"] is True
    assert result["compilation_error"].startswith("reference kernel")


def test_model_constructor_failure_is_a_runtime_error(tmp_path):
    source = (
        "import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n"
        "        raise RuntimeError('no weights')\n\ndef get_inputs():\n    return [1]\n"
    )
    result = run(make_job(K.torch_kernel(source), tmp_path=tmp_path))
    assert result["compiled"] is True and result["error_kind"] == "runtime"
    assert "no weights" in result["runtime_error"]


def _compilation_error(tmp_path):
    """A real Triton CompilationError: compile a broken kernel for a CUDA target (no GPU)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    module = import_source(
        "import triton.language as tl\n\ndef broken(x_ptr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n    tl.store(x_ptr + offs, tl.no_such_function(offs))\n",
        "broken",
        str(tmp_path),
    )
    src = ASTSource(
        JITFunction(module.broken),
        {"x_ptr": "*fp32", "BLOCK": "constexpr"},
        constexprs={"BLOCK": 16},
    )
    import triton

    try:
        triton.compile(src, target=GPUTarget("cuda", 90, 32))
    except Exception as e:
        return e
    raise AssertionError("the broken kernel compiled")


def test_triton_compilation_error_at_launch_is_a_compile_error(tmp_path):
    error = _compilation_error(tmp_path)
    assert is_build_failure(error)
    assert not is_build_failure(ValueError("x"))
    assert is_build_failure(RuntimeError("Error building extension 'ext': nvcc failed"))
    result = JobResult(compiled=True)
    report_exception(result, error, "trial 1/1")
    assert result.compiled is False and result.error_kind == "compile"
    assert "no_such_function" in result.compilation_error
    # Where the kernel evaluation server reported it (found while validating), too.
    assert "failed to compile at its first launch, in trial 1/1" in result.validation_error


# Compiles `SOURCE`'s function for an H100 in a fresh interpreter (this process runs Triton's
# interpreter, whose patches of triton.language a compile must not meet) and prints what
# report_exception makes of the error.
_COMPILE_AND_REPORT = """
import json
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction
from kforge_worker.judge.correctness import report_exception
from kforge_worker.candidate.loaders import import_source
from kforge_worker.judge.results import JobResult

module = import_source(SOURCE, "kernel", SCRATCH)
src = ASTSource(JITFunction(module.kernel), SIGNATURE, constexprs=CONSTEXPRS)
try:
    triton.compile(src, target=GPUTarget("cuda", 90, 32))
except Exception as e:
    result = JobResult(compiled=True)
    report_exception(result, e, "trial 1/5")
    print(json.dumps(result.to_dict()))
"""


def _compile_for_a_gpu(source: str, signature: dict, constexprs: dict, tmp_path) -> dict:
    import json

    from worker_jobs import run_python_compiled

    code = (
        f"SOURCE = {source!r}\nSCRATCH = {str(tmp_path)!r}\n"
        f"SIGNATURE = {signature!r}\nCONSTEXPRS = {constexprs!r}\n{_COMPILE_AND_REPORT}"
    )
    done = run_python_compiled(code)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# The kernel evaluation server's test_triton_constraint_error_reporting multiplies 8x8 tiles,
# which Triton's compiler refuses (tl.dot needs K >= 16 on NVIDIA GPUs).
SMALL_DOT = """
import triton.language as tl


def kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    tile = rows[:, None] * BLOCK + rows[None, :]
    tl.store(c_ptr + tile, tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile)))
"""


def test_a_violated_triton_constraint_is_named_in_validation_error(tmp_path):
    signature = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "BLOCK": "constexpr"}
    result = _compile_for_a_gpu(SMALL_DOT, signature, {"BLOCK": 8}, tmp_path)
    assert result["compiled"] is False and result["error_kind"] == "compile"
    # The rule the kernel broke, on the first line of validation_error (and of the compile
    # error's text after its heading), as the old server's clients read it.
    constraint = "Input shapes should have M >= 1, N >= 1 and K >= 16"
    first = result["validation_error"].splitlines()[0]
    assert constraint in first and "failed" in first, result["validation_error"]
    assert "at 4:" in first  # the tl.store line, counted from the def of the function
    assert constraint in result["compilation_error"].splitlines()[1]


TRITON_TYPO = K.VADD.replace("x = tl.load(", "x = tl.lod(")


def test_an_undefined_triton_attribute_is_a_compile_error_on_the_interpreter(tmp_path):
    # On a GPU Triton's compiler refuses tl.lod (a CompilationError at the first launch); the
    # interpreter (the cpu device) raises it while the kernel runs. Both are compile errors.
    result = run(make_job(K.triton_vadd(TRITON_TYPO), tmp_path=tmp_path))
    assert result["compiled"] is False and result["error_kind"] == "compile", result
    first = result["compilation_error"].splitlines()[1]
    assert "AttributeError" in first and "'lod'" in first and "tl.lod(" in first, first
    assert "'lod'" in result["validation_error"]
    assert "runtime_error" not in result


ASSERTS = """
import triton
import triton.language as tl


@triton.jit
def device_assert(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.device_assert(x < 0, "x must be negative")


@triton.jit
def static_assert(x_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 64, "BLOCK must be at least 64")
"""


def test_the_interpreters_asserts_are_told_apart(tmp_path, monkeypatch):
    # A failed tl.device_assert is the kernel failing at run time (a device-side assert on a
    # GPU); a failed tl.static_assert is Triton's compiler refusing it.
    import dataclasses

    from triton.runtime import interpreter

    from kforge_worker.candidate.tracebacks import describe_call_failure

    builder = interpreter.interpreter_builder
    monkeypatch.setattr(builder, "options", dataclasses.replace(builder.options, debug=True))
    module = import_source(ASSERTS, "asserts", str(tmp_path))
    kinds = {}
    for name in ("device_assert", "static_assert"):
        with pytest.raises(Exception) as caught:
            getattr(module, name)[(1,)](torch.ones(16), BLOCK=16)
        kinds[name], text = describe_call_failure(caught.value)
    assert kinds == {"device_assert": "runtime", "static_assert": "compile"}
    assert text.startswith("AssertionError: BLOCK must be at least 64 (line 14 of the source")


def test_interpreter_errors_that_are_not_the_compilers_stay_runtime_errors(tmp_path):
    # tl.inline_asm_elementwise compiles on a GPU; the interpreter cannot run it. A kernel's
    # own Python wrapper raising is a runtime error as before.
    asm = K.VADD.replace(
        "tl.store(out_ptr + offsets, x + y, mask=mask)",
        "z = tl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [x], dtype=tl.float32, "
        "is_pure=True, pack=1)\n    tl.store(out_ptr + offsets, z + y, mask=mask)",
    )
    result = run(make_job(K.triton_vadd(asm), tmp_path=tmp_path))
    assert result["compiled"] is True and result["error_kind"] == "runtime", result
    assert "NotImplementedError" in result["runtime_error"]
    result = run(make_job(K.triton_wrapper(K.RUNTIME_ERROR_WRAPPER), tmp_path=tmp_path))
    assert result["compiled"] is True and result["error_kind"] == "runtime", result
    assert "bad things in the kernel" in result["runtime_error"]


TORCH_CUDA_BROKEN = """
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="kforge_test_broken_ext", cpp_sources="int twice(int x) { return x * ; }",
                  functions=["twice"])


class ModelNew:
    pass
"""


@pytest.mark.slow
def test_torch_cuda_build_failure_is_a_compile_error_with_the_compiler_log(tmp_path):
    import hashlib
    import shutil

    if shutil.which("c++") is None or shutil.which("ninja") is None:
        pytest.skip("needs a C++ compiler and ninja")
    ref = K.torch_kernel(K.KB_REFERENCE)
    cand = {"source_code": TORCH_CUDA_BROKEN, "kernel_type": "torch_cuda", "metadata": {}}
    result = run(make_job(cand, ref, tmp_path=tmp_path))
    assert result["compiled"] is False and result["error_kind"] == "compile"
    text = result["compilation_error"]
    assert "Error building extension 'kforge_test_broken_ext'" in text
    assert "error:" in text  # the compiler's own message
    digest = hashlib.sha256(TORCH_CUDA_BROKEN.encode()).hexdigest()[:16]
    build_dir = tmp_path / "cache" / "torch_extensions" / digest / "kforge_test_broken_ext"
    assert build_dir.is_dir()


def test_a_model_is_built_under_the_device_and_one_that_needs_the_cpu_says_so(tmp_path):
    # torch's meta device stands in for a GPU here: a constructor run "on the device" makes
    # meta tensors; one that needs the cpu (.numpy()) raises ModelOnDeviceError there, and
    # builds on the cpu path (kernels.py).
    from kforge_worker.candidate.build import ModelOnDeviceError, SetupError, build_runnable

    meta = torch.device("meta")
    init = "        super().__init__()\n"
    on_device_only = K.KB_REFERENCE.replace(init, init + "        assert torch.empty(1).is_meta\n")
    needs_cpu = K.KB_REFERENCE.replace(init, init + "        torch.zeros(2).numpy()\n")

    def build(source: str, on_device: bool):
        spec = kernel(K.torch_kernel(source))
        module = load_module(spec, "reference", str(tmp_path), "")
        return build_runnable(
            spec,
            module,
            [32, 16],
            7,
            prefer_new=False,
            device=meta,
            cache_dir="",
            model_on_device=on_device,
        )

    build(on_device_only, True)
    with pytest.raises(SetupError) as cpu_path:
        build(on_device_only, False)
    assert not isinstance(cpu_path.value, ModelOnDeviceError)
    with pytest.raises(ModelOnDeviceError, match=r"with meta as torch's default device"):
        build(needs_cpu, True)
    build(needs_cpu, False)
