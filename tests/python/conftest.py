"""Shared test setup for the Python worker's tests.

Tests run on the cpu device: torch on the CPU, Triton through its interpreter. The
interpreter must be chosen before triton is imported, hence the first lines. Helpers live
in worker_jobs.py, worker_kernels.py and fake_supervisor.py.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch
from fake_supervisor import FakeSupervisor

HERE = Path(__file__).resolve().parent

# Tests start candidate processes by fork() from this process (start_local_candidate). A
# child forked after the parent ran an OpenMP parallel region hangs in its own first one
# (libgomp's pool does not survive fork), so this process never starts that pool: torch
# runs its CPU ops on one thread here. The worker forks its candidates before the judge does
# any such work (jailer.py).
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory):
    """A real cpu zygote under a FakeSupervisor, one per test module."""
    sup = FakeSupervisor("cpu", tmp_path_factory.mktemp("zygote"))
    yield sup
    assert sup.close() == 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips this directory's `gpu` tests where torch sees no CUDA device."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and Path(str(item.path)).resolve().is_relative_to(HERE):
            item.add_marker(skip)
