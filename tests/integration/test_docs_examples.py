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


# A sample answer shown after an example: a ```json block right after `<!-- answer: NAME
# device=DEVICE -->`, the answer the example NAME of the same document gives on DEVICE,
# abridged with `…`: `, …` elides the rest of an object, a string ending in `…` stands for
# any string it begins (`"…"` for any string: an id).
ANSWER = re.compile(
    r"<!-- answer: (?P<name>[\w-]+) device=(?P<device>[\w:]+) -->\s*```json\n(?P<json>.*?)```",
    re.S,
)
# Numbers that are measurements: the sample's and the real one must agree within this factor
# (the same order of magnitude: a sample that says 1.8 where the reader gets 0.0013 is wrong).
MEASURED_FACTOR = 20.0


def sample_answers() -> list[tuple[str, str, str]]:
    """(doc:name, device, sample) of every sample answer in README.md and docs/."""
    found = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for m in ANSWER.finditer(doc.read_text()):
            found.append((f"{doc.name}:{m['name']}", m["device"], m["json"]))
    return found


def parse_sample(text: str) -> Any:
    """The sample as JSON: `, …` (the elided rest of an object) dropped; strings ending in `…`
    stay (assert_sample_matches reads them as prefixes)."""
    text = re.sub(r",\s*…", "", text)
    return json.loads(text)


def assert_sample_matches(sample: Any, real: Any, path: str = "answer") -> None:
    """Every field the sample shows is in the real answer: strings, booleans and nulls
    equal (a `…`-ended string as a prefix), counts of correctness trials equal, other numbers
    within MEASURED_FACTOR of each other."""
    if isinstance(sample, dict):
        assert isinstance(real, dict), f"{path}: the sample shows an object, the answer {real!r}"
        for key, value in sample.items():
            assert key in real, f"{path}.{key}: shown in the sample, not in the answer"
            assert_sample_matches(value, real[key], f"{path}.{key}")
    elif isinstance(sample, list):
        assert isinstance(real, list) and len(real) == len(sample), (path, sample, real)
        for i, (s, r) in enumerate(zip(sample, real, strict=True)):
            assert_sample_matches(s, r, f"{path}[{i}]")
    elif isinstance(sample, str) and sample.endswith("…"):
        assert isinstance(real, str) and real.startswith(sample[:-1]), (path, sample, real)
    elif (
        isinstance(sample, (bool, str))
        or sample is None
        or (isinstance(sample, int) and ".correctness_details." in path)
    ):
        assert real == sample, f"{path}: the sample says {sample!r}, the answer {real!r}"
    else:
        assert isinstance(real, (int, float)) and not isinstance(real, bool), (path, real)
        if sample == 0 or real == 0:
            assert sample == real, f"{path}: the sample says {sample!r}, the answer {real!r}"
        else:
            ratio = real / sample
            assert 1 / MEASURED_FACTOR <= ratio <= MEASURED_FACTOR, (
                f"{path}: the sample says {sample!r}, the answer {real!r}"
            )


def test_every_sample_answer_follows_its_example() -> None:
    names = {name for name, _ in examples()}
    answers = sample_answers()
    assert any(name == "README.md:compare" for name, _, _ in answers)
    for name, _, _ in answers:
        assert name in names, f"{name}: a sample answer with no example of that name"


@pytest.mark.parametrize(
    ("name", "device", "sample"), sample_answers(), ids=[n for n, _, _ in sample_answers()]
)
def test_sample_answer_is_what_the_reader_gets(
    server: KforgeServer, name: str, device: str, sample: str
) -> None:
    if device != server.devices.split(",")[0]:
        pytest.skip(f"a sample answer on {device}; this server serves {server.devices}")
    code = dict(examples())[name].replace("http://127.0.0.1:8000", server.url)
    r = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, f"{name} failed:\n{r.stdout}\n{r.stderr}"
    assert_sample_matches(parse_sample(sample), json.loads(r.stdout))
