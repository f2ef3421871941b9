"""A warm child's warm-up (warmup.warm_child) on the cpu device."""

from __future__ import annotations

from kforge_worker.core.devinfo import parse_device
from kforge_worker.process.warmup import warm_child


def test_a_warm_child_runs_the_judges_checks_once_without_errors() -> None:
    report, described = warm_child(parse_device("cpu"))
    assert report.errors == {}
    assert {"triton_launch", "torch_ops", "harness_checks"} <= set(report.steps_ms)
    assert described["kind"] == "cpu"


def test_a_candidate_process_skips_what_only_the_judge_runs() -> None:
    report, _ = warm_child(parse_device("cpu"), role="candidate")
    assert report.errors == {}
    assert "candidate_checks" in report.steps_ms and "harness_checks" not in report.steps_ms
    assert "fused_compare" not in report.steps_ms


def test_a_host_module_built_in_the_zygote_is_what_triton_loads_later(tmp_path, monkeypatch):
    # The zygote builds Triton's C modules into its cache without loading them; a child's
    # compile_module_from_src must then find that entry and run no compiler.
    import pytest
    from triton.backends.nvidia import driver as nvidia
    from triton.runtime import build

    from kforge_worker.process import warmup

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(nvidia, "library_dirs", lambda: [])  # no libcuda on a CPU host
    built: list[str] = []

    def fake_build(name, src_path, tmpdir, *_args):  # type: ignore[no-untyped-def]
        built.append(name)
        so = tmp_path / f"{name}.so"
        so.write_bytes(b"not really a module")
        return str(so)

    monkeypatch.setattr(build, "_build", fake_build)
    warmup._build_host_module("int kforge_test;", "kforge_test_mod")
    warmup._build_host_module("int kforge_test;", "kforge_test_mod")  # cached: no second build
    assert built == ["kforge_test_mod"]

    def no_build(*_args):  # type: ignore[no-untyped-def]
        raise AssertionError("Triton compiled the module again")

    loaded: list[str] = []
    monkeypatch.setattr(build, "_build", no_build)
    monkeypatch.setattr(build, "_load_module_from_path", lambda name, path: loaded.append(path))
    build.compile_module_from_src("int kforge_test;", "kforge_test_mod")
    assert len(loaded) == 1 and loaded[0].startswith(str(tmp_path / "cache"))
    with pytest.raises(AssertionError):  # another source is another module
        build.compile_module_from_src("int kforge_other;", "kforge_test_mod")
