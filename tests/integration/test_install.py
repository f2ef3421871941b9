"""`make install PREFIX=...`: the tree cmake --install makes, and a server started from it
alone (no checkout on its paths) serving a job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from integration.kernels import TORCH_ADD_REF, torch_kernel
from integration.kforge_server import REPO, KforgeServer, kforge_binary

BUILD = kforge_binary().parent.parent


@pytest.mark.skipif(
    not (BUILD / "cmake_install.cmake").exists(), reason="no CMake build tree (a packaged binary)"
)
def test_installed_tree_serves_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = tmp_path / "prefix"
    r = subprocess.run(
        ["cmake", "--install", str(BUILD), "--prefix", str(prefix)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    for part in (
        "bin/kforge",
        "lib/libkforge_cuda.so",
        "lib/libkforge_sandbox.so",
        "share/kforge/python/kforge_worker/__init__.py",
        "share/kforge/python/requirements.txt",
        "share/kforge/skills/kforge-workbench/SKILL.md",
    ):
        assert (prefix / part).is_file(), part
    assert not list(prefix.rglob("__pycache__"))
    version = subprocess.run(
        [str(prefix / "bin/kforge"), "--version"], capture_output=True, text=True, check=False
    )
    assert version.returncode == 0 and version.stdout.strip(), version

    # Nothing points the installed binary back at the checkout.
    for name in ("KFORGE_WORKER_PATH", "KFORGE_CUDA_ABI", "KFORGE_SANDBOX_LIB"):
        monkeypatch.delenv(name, raising=False)
    srv = KforgeServer(binary=prefix / "bin/kforge").start()
    try:
        srv.wait_ready()
        with srv.client() as c:
            sandbox = c.get("/health").json()["sandbox"]
            r2 = c.post(
                "/evaluate",
                json={"kernel": torch_kernel(TORCH_ADD_REF), "num_correct_trials": 1,
                      "measure_performance": False},
            )  # fmt: skip
        assert r2.status_code == 200, r2.text
        assert r2.json()["kernel_exec_result"]["correctness"] is True, r2.text
        if sandbox["jailing"]:  # the jail binds the installed worker package, not the checkout's
            root = json.dumps(sandbox["root"])
            assert str(prefix / "share/kforge/python/kforge_worker") in root, root
    finally:
        srv.stop()


@pytest.mark.skipif(
    not (BUILD / "cmake_install.cmake").exists(), reason="no CMake build tree (a packaged binary)"
)
def test_dist_makes_a_checked_tarball_and_a_client_wheel(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    r = subprocess.run(
        [str(REPO / "scripts/dist.sh"), str(BUILD), str(out), sys.executable],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    tarballs = list(out.glob("kforge-*-linux-*.tar.gz"))
    wheels = list(out.glob("kforge_client-*-py3-none-any.whl"))
    assert len(tarballs) == 1 and len(wheels) == 1, list(out.iterdir())
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True,
                           text=True, check=False)  # fmt: skip
    assert check.returncode == 0 and check.stdout.count(": OK") == 2, check.stdout + check.stderr
    name = tarballs[0].name.removesuffix(".tar.gz")
    with tarfile.open(tarballs[0]) as tar:
        members = set(tar.getnames())
    for part in ("bin/kforge", "lib/libkforge_cuda.so",
                 "share/kforge/python/kforge_worker/core/spec.py",
                 "share/doc/kforge/README.md"):  # fmt: skip
        assert f"{name}/{part}" in members, part
    # The wheel installs as a plain (not editable) package.
    site = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
         str(wheels[0])],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    where = subprocess.run(
        [sys.executable, "-c", "import kforge_client, kernel_eval_client; "
         "print(kforge_client.__file__); print(kernel_eval_client.__file__)"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout
