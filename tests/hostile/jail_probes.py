"""Hostile kernels for the jail tests: a torch kernel whose forward (the candidate process) or
whose reference (the judge) runs a probe, and the checks every jail test shares.

A probe is a function body that appends what escaped to `found`; the kernel raises with that
list, so a contained attack answers `correctness: true` and an escape fails the test with the
evidence.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from integration.kforge_server import KforgeServer

PROBE_TEMPLATE = """
import ctypes, errno, os, signal, socket, subprocess, sys, time, torch

def probe():
    found = []
{body}
    return found

class Model(torch.nn.Module):
    def forward(self, x):
        found = probe()
        if found:
            raise RuntimeError("NOT CONTAINED: " + " | ".join(found))
        return x * 2

def get_inputs():
    return [torch.randn(16)]

def get_init_inputs():
    return []
"""


@contextmanager
def jailed_server() -> Iterator[KforgeServer]:
    """A warm `--sandbox required` server on the cpu device (a module's `server` fixture)."""
    srv = KforgeServer(devices="cpu", extra_args=["--sandbox", "required"]).start()
    try:
        srv.wait_ready("cpu")
        yield srv
    finally:
        srv.stop()


def probe_kernel(body: str) -> dict[str, Any]:
    """A torch kernel whose forward runs `body` (which appends escapes to `found`)."""
    source = PROBE_TEMPLATE.format(body=textwrap.indent(textwrap.dedent(body), "    "))
    return {"source_code": source, "kernel_type": "torch"}


def evaluate(server: KforgeServer, kernel: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Runs `kernel` as the candidate (its forward runs in the candidate process)."""
    body = {"kernel": kernel, "num_correct_trials": 1, "measure_performance": False, **extra}
    with server.client() as c:
        r = c.post("/evaluate", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def compare(
    server: KforgeServer, ref: dict[str, Any], custom: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """Runs `ref` as the reference (in the judge) and `custom` as the candidate."""
    body = {
        "ref_kernel": ref,
        "custom_kernel": custom,
        "num_correct_trials": 1,
        "measure_performance": False,
        **extra,
    }
    with server.client() as c:
        r = c.post("/compare", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def health_sandbox(srv: KforgeServer) -> dict[str, Any]:
    with srv.client() as c:
        sandbox: dict[str, Any] = c.get("/health").json()["sandbox"]
    return sandbox


def assert_contained(out: dict[str, Any]) -> dict[str, Any]:
    res = out["kernel_exec_result"]
    assert res["correctness"] is True, (
        res.get("runtime_error") or res.get("validation_error") or res
    )
    return res


def probe_both(server: KforgeServer, body: str) -> None:
    """Runs the probe in the candidate process and in the judge (as the reference)."""
    assert_contained(evaluate(server, probe_kernel(body)))
    assert_contained(compare(server, probe_kernel(body), probe_kernel("pass")))


def host_processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds `marker`."""
    hits = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                hits.append(int(pid))
        except OSError:
            continue
    return hits
