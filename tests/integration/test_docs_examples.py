"""The copy-paste examples in README.md and docs/ must work as written.

Each shell example is a fenced ```bash block right after a `<!-- example: NAME -->` marker. The
test runs it against the session's server (only the address is substituted) and checks the
JSON it prints: a kernel result must have compiled and be correct, unless the marker says
otherwise with `expect=compile-error` (it must not compile, with a compiler log) or
`expect=gpu` (correct on a GPU; on the cpu device it compiled and was answered "no CUDA device
on this server"), or `expect=cancelled` (it prints a job that ended `cancelled`).
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest

from integration.kforge_server import REPO, KforgeServer

EXAMPLE = re.compile(
    r"<!-- example: (?P<name>[\w-]+)(?: expect=(?P<expect>[\w-]+))? -->"
    r"\s*```bash\n(?P<code>.*?)```",
    re.S,
)
EXPECTATIONS = ("pass", "compile-error", "gpu", "cancelled")


def examples() -> list[tuple[str, str]]:
    return [(name, code) for name, code, _ in annotated_examples()]


def annotated_examples() -> list[tuple[str, str, str]]:
    found = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for m in EXAMPLE.finditer(doc.read_text()):
            expect = m["expect"] or "pass"
            assert expect in EXPECTATIONS, f"{doc.name}:{m['name']}: unknown expect={expect}"
            found.append((f"{doc.name}:{m['name']}", m["code"], expect))
    return found


def check_kernel_result(res: dict[str, Any], expect: str, device: str) -> None:
    if expect == "compile-error":
        assert res["compiled"] is False, res
        assert res["error_kind"] == "compile", res
        assert res["compilation_error"], res
    elif expect == "gpu" and device == "cpu":
        assert res["compiled"] is True, res
        assert res["correctness"] is False, res
        assert "no CUDA device on this server" in res["runtime_error"], res
    else:
        assert res["compiled"] is True, res
        assert res["correctness"] is True, res


def test_readme_has_the_curl_example() -> None:
    assert any(name == "README.md:compare" for name, _ in examples())


@pytest.mark.parametrize(
    ("name", "code", "expect"), annotated_examples(), ids=[n for n, _, _ in annotated_examples()]
)
def test_example_runs(server: KforgeServer, name: str, code: str, expect: str) -> None:
    code = code.replace("http://127.0.0.1:8000", server.url)
    r = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, f"{name} failed:\n{r.stdout}\n{r.stderr}"
    out = json.loads(r.stdout)
    if expect == "cancelled":
        assert out["state"] == "cancelled", out
        return
    if "kernel_exec_result" in out:
        check_kernel_result(out["kernel_exec_result"], expect, server.devices)
