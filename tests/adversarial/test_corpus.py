"""The adversarial corpus in CI: every must-catch caught, every control clean (corpus.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adversarial.corpus import CASES, Case, verdict
from integration.kforge_server import KforgeServer, device_under_test

DEVICE = device_under_test()
RUNNABLE = [c for c in CASES if c.device in ("any", "cpu" if DEVICE == "cpu" else "gpu")]


@pytest.fixture(scope="module")
def server() -> Iterator[KforgeServer]:
    srv = KforgeServer(devices=DEVICE).start()
    try:
        srv.wait_ready(DEVICE)
        yield srv
    finally:
        srv.stop()


@pytest.mark.parametrize("case", RUNNABLE, ids=lambda c: c.name)
def test_case(server: KforgeServer, case: Case) -> None:
    with server.client() as c:
        r = c.post("/compare", json=case.body)
    assert r.status_code == 200, r.text
    ok, why = verdict(case, r.json()["kernel_exec_result"])
    assert ok, f"{case.name} ({case.what}): {why}"
