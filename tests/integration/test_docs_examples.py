"""The copy-paste examples in README.md and docs/ must work as written.

Each shell example is a fenced ```bash block right after a `<!-- example: NAME -->` marker. The
test runs it against the session's server (only the address is substituted) and checks the
JSON it prints.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from integration.kforge_server import REPO, KforgeServer

EXAMPLE = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\s*```bash\n(?P<code>.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    found = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for m in EXAMPLE.finditer(doc.read_text()):
            found.append((f"{doc.name}:{m['name']}", m["code"]))
    return found


def test_readme_has_the_curl_example() -> None:
    assert any(name == "README.md:compare" for name, _ in examples())


@pytest.mark.parametrize(("name", "code"), examples(), ids=[n for n, _ in examples()])
def test_example_runs(server: KforgeServer, name: str, code: str) -> None:
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
    if "kernel_exec_result" in out:
        res = out["kernel_exec_result"]
        assert res["compiled"] is True, res
        assert res["correctness"] is True, res
