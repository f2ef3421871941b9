"""Issue #37 "outputs capped": a kernel raising an exception with a 100 MB message had it stored
and served whole (store 1.9 -> 203 MB, the server +160 MB). Every text of a result is now cut
to 64 KiB (head and tail around a marker) before it is stored or sent, the whole result to
8 MiB, and a job process's protocol frames to 32 MiB (refused from the length prefix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from hostile.conftest import alive
from integration.kernels import model_source
from integration.kforge_server import KforgeServer

MIB = 1 << 20
TEXT_CAP = 64 * 1024

# The candidate raises with a 100 MB message.
HUGE_EXCEPTION = model_source("raise RuntimeError('A' * (100 << 20))")

# A reference runs in the judge, the process that speaks the protocol: this one sends its own
# result frame (what reaches the server from a job process is untrusted) and waits to be
# killed. {payload} builds the frame's result; {raw} sends the frame's bytes as they are.
FORGER = """
import gc, json, struct, time
from kforge_worker.core.protocol import StreamChannel
for channel in [o for o in gc.get_objects() if isinstance(o, StreamChannel)]:
    body = json.dumps({{"type": "result", "result": {payload}}}).encode()
    channel.socket.sendall(struct.pack(">I", len(body)) + body)
time.sleep(60)
"""


def store_bytes(srv: KforgeServer) -> int:
    return sum(p.stat().st_size for p in srv.data_dir.glob("kforge.db*"))


def peak_rss(srv: KforgeServer) -> int:
    assert srv.proc is not None
    for line in Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def run(srv: KforgeServer, route: str, body: dict[str, Any]) -> tuple[httpx.Response, dict]:
    with srv.client() as c:
        r = c.post(route, json=body)
    assert r.status_code == 200, r.text[:2000]
    return r, r.json()["kernel_exec_result"]


def assert_next_job_passes(srv: KforgeServer) -> None:
    assert alive(srv)
    body = {"kernel": {"source_code": model_source("return x * 2"), "kernel_type": "torch"},
            "measure_performance": False}  # fmt: skip
    _, result = run(srv, "/evaluate", body)
    assert result["correctness"] is True, result


def assert_cut(text: str, head: str, filler: str) -> None:
    assert len(text.encode()) <= TEXT_CAP, len(text)
    assert text.startswith(head), text[:200]
    assert "[... kforge cut " in text and text.rstrip().endswith(filler * 100), text[-200:]


def test_a_100_mb_exception_message_is_cut(make_server) -> None:
    srv: KforgeServer = make_server(ready=True)
    store, rss = store_bytes(srv), peak_rss(srv)
    body = {"kernel": {"source_code": HUGE_EXCEPTION, "kernel_type": "torch"},
            "measure_performance": False}  # fmt: skip
    r, result = run(srv, "/evaluate", body)
    # The job fails as any kernel that raises, its message cut.
    assert result["correctness"] is False and result["error_kind"] == "runtime", result.keys()
    assert_cut(result["validation_error"], "the kernel raised", "A")
    with srv.client() as c:
        stored = c.get(f"/job/{r.json()['job_id']}")
    assert len(stored.content) < MIB
    assert_it_stayed_small(srv, (store, rss), r)


def forged_compare(payload: str) -> dict[str, Any]:
    """A compare whose reference sends the result frame FORGER builds from `payload`."""
    plain = model_source("return x")
    return {"ref_kernel": {"source_code": FORGER.format(payload=payload) + plain,
                           "kernel_type": "torch"},
            "custom_kernel": {"source_code": plain.replace("Model", "ModelNew"),
                              "kernel_type": "torch"},
            "measure_performance": False, "timeout": 60}  # fmt: skip


def assert_it_stayed_small(srv: KforgeServer, before: tuple[int, int], answer: httpx.Response,
                           rss_mib: int = 64) -> None:  # fmt: skip
    """The answer, the store's growth and the server's peak memory stayed small; it lives."""
    store, rss = before
    assert len(answer.content) < MIB
    assert store_bytes(srv) - store < 4 * MIB, (store, store_bytes(srv))
    assert peak_rss(srv) - rss < rss_mib * MIB, (rss, peak_rss(srv))
    assert_next_job_passes(srv)


def test_a_forged_result_with_huge_texts_is_cut_by_the_server(make_server) -> None:
    """The judge's own cap does not protect the server: a job process may write any frame."""
    srv: KforgeServer = make_server(ready=True)
    before = store_bytes(srv), peak_rss(srv)
    payload = ('{"compiled": True, "correctness": False, "validation_error": "B" * (20 << 20), '
               '"warnings": ["W" * (1 << 20)] * 4}')  # fmt: skip
    r, result = run(srv, "/compare", forged_compare(payload))
    assert_cut(result["validation_error"], "BBBB", "B")
    assert all(len(w.encode()) <= TEXT_CAP for w in result["warnings"]), len(result["warnings"])
    assert_it_stayed_small(srv, before, r, rss_mib=160)  # the 20 MiB frame itself is read


def test_a_frame_over_the_limit_is_refused_from_its_length(make_server) -> None:
    srv: KforgeServer = make_server(ready=True)
    before = store_bytes(srv), peak_rss(srv)
    payload = '{"compiled": True, "correctness": True, "validation_error": "C" * (100 << 20)}'
    r, result = run(srv, "/compare", forged_compare(payload))
    assert result["correctness"] is False and result["error_kind"] == "worker", result
    assert "over the limit of 33554432" in result["runtime_error"], result["runtime_error"]
    assert_it_stayed_small(srv, before, r)
