"""Shared pieces of the MCP integration tests: tool arguments, `kforge mcp` command lines, the
locally installed Node tooling (conformance suite, TypeScript SDK) and a raw MCP HTTP client."""

from __future__ import annotations

import copy
import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from integration.kernels import FAST_TIMING, TORCH_ADD_REF, model_source, triton_add
from integration.kforge_server import REPO, device_under_test, kforge_binary

NODE_DIR = REPO / "tests" / "mcp-node"
NODE_BIN = NODE_DIR / "node_modules" / ".bin"
CONFORMANCE_VERSION = "0.2.0-alpha.12"
PROTOCOL = "2025-11-25"

# A torch kernel that sleeps in every call: a job that stays running until it is cancelled.
SLEEPY_SOURCE = model_source("import time\ntime.sleep(60)\nreturn x * 2")


def node_tools() -> Path:
    """tests/mcp-node/node_modules/.bin, installed by scripts/setup.sh (npm ci)."""
    if not (NODE_BIN / "node").exists() or not (NODE_BIN / "conformance").exists():
        raise RuntimeError("the MCP Node tooling is not installed: run scripts/setup.sh")
    return NODE_BIN


def node_env() -> dict[str, str]:
    """The environment for npx/node: the pinned Node 22 of tests/mcp-node first on PATH."""
    return {**os.environ, "PATH": f"{node_tools()}:{os.environ['PATH']}"}


def worker_env() -> dict[str, str]:
    """What a `kforge mcp` child needs to find its worker package and interpreter."""
    env = {"KFORGE_WORKER_PATH": str(REPO / "python")}
    if python := os.environ.get("KFORGE_PYTHON"):
        env["KFORGE_PYTHON"] = python
    return env


def stdio_command(data_dir: Path, *extra: str) -> tuple[str, list[str]]:
    """`kforge mcp` with an embedded engine on the device under test."""
    args = ["mcp", "--devices", device_under_test(), "--data-dir", str(data_dir), *extra]
    return str(kforge_binary()), args


def compare_args(**overrides: Any) -> dict[str, Any]:
    """compare_kernels: the Triton vector add (interpreter on cpu) against torch's x + y."""
    kernel = triton_add()
    args = {
        "ref_kernel_source": TORCH_ADD_REF,
        "ref_kernel_type": "torch",
        "custom_kernel_source": kernel["source_code"],
        "custom_kernel_type": "triton",
        "custom_kernel_io": kernel["io"],
        "custom_kernel_metadata": kernel["metadata"],
        "num_trials": 5,
        "timing": FAST_TIMING,
        "device": device_under_test(),
    }
    return {**args, **overrides}


def evaluate_args(**overrides: Any) -> dict[str, Any]:
    """evaluate_kernel of the Triton vector add with a torch reference."""
    kernel = triton_add()
    args = {
        "kernel_source": kernel["source_code"],
        "kernel_type": "triton",
        "io_contract": kernel["io"],
        "metadata": kernel["metadata"],
        "reference_kernel_source": TORCH_ADD_REF,
        "reference_kernel_type": "torch",
        "num_trials": 5,
        "timing": FAST_TIMING,
        "device": device_under_test(),
    }
    return {**args, **overrides}


def sleepy_args() -> dict[str, Any]:
    return {
        "kernel_source": SLEEPY_SOURCE,
        "kernel_type": "torch",
        "device": device_under_test(),
        "timeout": 300,
    }


def invalid_args() -> dict[str, Any]:
    """evaluate_kernel arguments with a bad tensor shape in io_contract.args[2]."""
    args = copy.deepcopy(evaluate_args())
    out = args["io_contract"]["args"][2]
    out["tensor_spec"] = {**out["tensor_spec"], "shape": ["many"]}
    return args


def job_id_of(progress_message: str | None) -> str | None:
    """The job id that kforge's progress messages start with ("job <id> ...")."""
    words = (progress_message or "").split()
    return words[1].rstrip(":") if len(words) > 1 and words[0] == "job" else None


class RawMcp:
    """Minimal Streamable HTTP client for protocol-level tests: one session, raw responses."""

    def __init__(self, base_url: str, version: str = PROTOCOL) -> None:
        self.url = base_url + "/mcp"
        self.http = httpx.Client(timeout=60)
        self.version = version
        self.session_id: str | None = None
        self._next_id = 0

    def post(self, body: Any, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        h.update(headers or {})
        if isinstance(body, (bytes, str)):
            return self.http.post(self.url, content=body, headers=h, **kw)
        return self.http.post(self.url, json=body, headers=h, **kw)

    def request(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        self._next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            msg["params"] = params
        return self.post(msg, **kw)

    def initialize(self, version: str | None = None) -> httpx.Response:
        r = self.request(
            "initialize",
            {
                "protocolVersion": version or self.version,
                "capabilities": {},
                "clientInfo": {"name": "kforge-raw-test", "version": "1"},
            },
        )
        assert r.status_code == 200, r.text
        self.session_id = r.headers["mcp-session-id"]
        n = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert n.status_code == 202, n.text
        return r

    def close(self) -> None:
        self.http.close()


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body (`event: message` events)."""
    import json

    out = []
    for block in text.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln and not ln.startswith(":")]
        data = "\n".join(ln[len("data:") :].strip() for ln in lines if ln.startswith("data:"))
        events = [ln[len("event:") :].strip() for ln in lines if ln.startswith("event:")]
        if data:
            assert events == ["message"], block
            out.append(json.loads(data))
    return out


def call_result(response: Any) -> dict[str, Any]:
    """The `result` of a tools/call answered over HTTP, as JSON or as an SSE stream."""
    is_stream = "event-stream" in response.headers["content-type"]
    messages = sse_messages(response.text) if is_stream else [response.json()]
    return messages[-1]["result"]


class StdioPeer:
    """A `kforge mcp` child with a reader thread collecting every stdout line."""

    def __init__(
        self, data_dir: Path | None, *extra: str, env: dict[str, str] | None = None
    ) -> None:
        """`kforge mcp --data-dir DATA_DIR EXTRA...`; with no data_dir, the default one."""
        if data_dir is not None:
            command, args = stdio_command(data_dir, *extra)
        else:
            command, args = str(kforge_binary()), ["mcp", "--devices", device_under_test(), *extra]
        self.proc = subprocess.Popen(
            [command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **worker_env(), **(env or {})},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.raw: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.raw.append(line)
            self.lines.put(line)

    def _drain_stderr(self) -> None:
        assert self.proc.stderr
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def next_message(self, timeout_s: float = 60) -> Any:
        return json.loads(self.lines.get(timeout=timeout_s))

    def answer_to(self, request_id: Any, timeout_s: float = 60) -> dict[str, Any]:
        """The response to `request_id`, skipping notifications."""
        deadline = time.monotonic() + timeout_s
        while True:
            m = self.next_message(max(0.1, deadline - time.monotonic()))
            if isinstance(m, dict) and m.get("id") == request_id and "method" not in m:
                return m

    def initialize(self, version: str = "2025-11-25") -> dict[str, Any]:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        answer = self.answer_to(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def close_and_wait(self, timeout_s: float = 60) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait(timeout=timeout_s)


def call(peer: StdioPeer, request_id: Any, name: str, args: dict[str, Any], **meta: Any) -> None:
    params: dict[str, Any] = {"name": name, "arguments": args}
    if meta:
        params["_meta"] = meta
    peer.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
