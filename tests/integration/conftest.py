from __future__ import annotations

from collections.abc import Iterator

import pytest

from integration.kforge_server import KforgeServer


@pytest.fixture(scope="session")
def server() -> Iterator[KforgeServer]:
    """One warm server for the whole session (jobs are isolated from each other anyway)."""
    srv = KforgeServer().start()
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()
        print(srv.log()[-5000:])
