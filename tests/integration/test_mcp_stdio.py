"""`kforge mcp` over raw stdio: one JSON message per line and nothing else on stdout, requests
served concurrently (a running tool never blocks the reader), cancellation, batches in
2025-03-26, errors for bad lines, exit at end of input, and what becomes of a killed
process's jobs."""

from __future__ import annotations

import json
import time
from pathlib import Path

from integration.kernels import FAST_TIMING, model_source
from integration.mcp_support import StdioPeer, call, sleepy_args


def test_stdio_protocol(tmp_path: Path) -> None:
    peer = StdioPeer(tmp_path / "data", "--max-message-mb", "1")
    try:
        peer.send({"jsonrpc": "2.0", "id": "early", "method": "tools/list"})
        early = peer.answer_to("early")
        assert early["error"]["code"] == -32600 and "initialize" in early["error"]["message"]
        assert peer.initialize()["result"]["protocolVersion"] == "2025-11-25"

        peer.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method":\n')
        assert peer.next_message()["error"]["code"] == -32700
        peer.send_raw(
            b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"p":"' + b"x" * (2 << 20) + b'"}}\n'
        )
        too_big = peer.next_message()
        assert (
            too_big["error"]["code"] == -32600
            and "exceeds the limit" in too_big["error"]["message"]
        )
        peer.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert peer.answer_to(3)["result"] == {}
        peer.send([{"jsonrpc": "2.0", "id": 4, "method": "ping"}])
        assert "only 2025-03-26" in peer.next_message()["error"]["message"]

        # A long tool call does not block the reader: ping is answered while it runs, and
        # notifications/cancelled reaches it.
        call(peer, 10, "evaluate_kernel", sleepy_args(), progressToken="p10")
        job_id, phase = None, ""
        while job_id is None or "correctness" not in phase:
            message = peer.next_message(120)
            assert message.get("id") != 10, message
            if message.get("method") == "notifications/progress":
                job_id = message["params"]["_meta"]["kforge/job_id"]
                phase = message["params"].get("message", "")
        peer.send({"jsonrpc": "2.0", "id": 11, "method": "ping"})
        assert peer.answer_to(11, timeout_s=5)["result"] == {}
        peer.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10}}
        )
        status = "running"
        for attempt in range(100):
            call(peer, 100 + attempt, "get_job_status", {"job_id": job_id})
            status = peer.answer_to(100 + attempt)["result"]["structuredContent"]["state"]
            if status not in ("queued", "running"):
                break
            time.sleep(0.1)
        assert status == "cancelled"
        assert peer.close_and_wait() == 0
        # The cancelled request got no response, and stdout held only JSON-RPC messages.
        messages = [json.loads(line) for line in peer.raw]
        assert all(m.get("jsonrpc") == "2.0" for m in messages)
        assert not any(m.get("id") == 10 for m in messages)
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()


def test_a_killed_processs_jobs_are_not_run_again(tmp_path: Path) -> None:
    """A `kforge mcp` killed while its calls' jobs were running or queued: the next one (same
    data directory) re-ran them for no one, holding the only device ahead of the new session's
    work. They end as cancelled, saying why, and the device takes the new work at once."""
    peer = StdioPeer(tmp_path / "data")
    try:
        peer.initialize()
        call(peer, 1, "evaluate_kernel", sleepy_args(), progressToken="p1")
        # The workbench's execution tools too (stateless form: no session state needed).
        sleepy_solve = "import time\n\n\ndef solve(x):\n    time.sleep(60)\n    return x\n"
        inputs = "args = [torch.ones(4, device=DEVICE)]\n"
        call(peer, 2, "run_triton_kernel", {"code": sleepy_solve, "test_input_code": inputs},
             progressToken="p2")  # fmt: skip
        jobs: dict[str, str] = {}
        running = False
        while len(jobs) < 2 or not running:
            message = peer.next_message(120)
            if message.get("method") == "notifications/progress":
                params = message["params"]
                jobs[params["progressToken"]] = params["_meta"]["kforge/job_id"]
                running = running or "correctness" in params.get("message", "")
        peer.proc.kill()  # SIGKILL: nothing of the process gets to clean up
        peer.proc.wait(timeout=30)
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()

    again = StdioPeer(tmp_path / "data")
    try:
        again.initialize()
        for n, job_id in enumerate(jobs.values()):
            call(again, 10 + n, "get_job_status", {"job_id": job_id})
            job = again.answer_to(10 + n)["result"]["structuredContent"]
            assert job["state"] == "cancelled", job
            assert "the kforge mcp process that submitted it ended" in job["error"], job
        quick = {**sleepy_args(), "kernel_source": model_source("return x * 2")}
        call(again, 20, "evaluate_kernel", {**quick, "num_trials": 3, "timing": FAST_TIMING})
        done = again.answer_to(20, timeout_s=120)["result"]
        assert done["structuredContent"]["state"] == "success", done
        assert again.close_and_wait() == 0
    finally:
        if again.proc.poll() is None:
            again.proc.kill()


def test_stdio_batches_in_2025_03_26(tmp_path: Path) -> None:
    peer = StdioPeer(tmp_path / "data")
    try:
        peer.initialize("2025-03-26")
        peer.send(
            [
                {"jsonrpc": "2.0", "id": "a", "method": "ping"},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": "b", "method": "tools/call",
                 "params": {"name": "get_server_stats", "arguments": {}}},
            ]
        )  # fmt: skip
        answers = peer.next_message()
        assert sorted(a["id"] for a in answers) == ["a", "b"]
        stats = next(a for a in answers if a["id"] == "b")["result"]
        assert "structuredContent" not in stats  # 2025-03-26 has no structured content
        started = time.monotonic()
        assert peer.close_and_wait() == 0
        assert time.monotonic() - started < 30
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()


def test_default_data_dirs_of_concurrent_processes(tmp_path: Path) -> None:
    """Without --data-dir, `kforge mcp` keeps its jobs in ~/.cache/kforge/mcp-data
    ($XDG_CACHE_HOME/kforge); a second process (another editor window) takes mcp-data-2."""
    peers = []
    try:
        for _ in range(2):
            peer = StdioPeer(None, env={"XDG_CACHE_HOME": str(tmp_path)})
            assert peer.initialize()["result"]["serverInfo"]["name"] == "kforge"
            peers.append(peer)
        root = tmp_path / "kforge"
        assert (root / "mcp-data" / "kforge.db").exists()
        assert (root / "mcp-data-2" / "kforge.db").exists()
        for peer in peers:
            assert peer.close_and_wait() == 0
    finally:
        for peer in peers:
            if peer.proc.poll() is None:
                peer.proc.kill()
