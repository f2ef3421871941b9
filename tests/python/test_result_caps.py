"""Issue #37: every text of a result is cut to MAX_TEXT_BYTES before it leaves the judge, its
head and tail kept around a marker (the server applies the same cap: result_caps.cc)."""

from __future__ import annotations

from kforge_worker.judge.results import MAX_TEXT_BYTES, JobResult, cap_text


def test_short_texts_are_unchanged():
    assert cap_text("hello") == "hello"
    assert cap_text("é" * 100) == "é" * 100


def test_a_long_text_keeps_its_head_and_tail_and_says_what_was_cut():
    text = "HEAD" + "x" * 1_000_000 + "TAIL"
    capped = cap_text(text)
    data = capped.encode()
    assert len(data) <= MAX_TEXT_BYTES
    assert capped.startswith("HEAD") and capped.endswith("TAIL")
    marker = capped[capped.index("[... kforge cut ") :]
    cut = int(marker.split()[3])
    assert f"of {len(text)} bytes here" in marker
    kept = len(text) - cut
    assert 0 < len(data) - kept < 80  # what remains besides the marker was kept


def test_multibyte_characters_are_never_split():
    capped = cap_text("€" * 100_000, 1001)
    assert len(capped.encode()) <= 1001
    capped.encode("utf-8", "strict")  # valid UTF-8


def test_to_dict_caps_every_text_but_nsight_computes():
    r = JobResult()
    r.fail("runtime", "boom " * 100_000)
    r.warn("w" * 200_000)
    r.add_check("inputs_unchanged", False, "m" * 200_000)
    r.device_metrics_raw = {"candidate": {"csv": "c" * 200_000}}
    out = r.to_dict()
    assert len(out["runtime_error"].encode()) <= MAX_TEXT_BYTES
    assert len(out["warnings"][0].encode()) <= MAX_TEXT_BYTES
    assert len(out["checks"][0]["message"].encode()) <= MAX_TEXT_BYTES
    assert len(out["honesty"][0]["message"].encode()) <= MAX_TEXT_BYTES
    assert len(out["device_metrics_raw"]["candidate"]["csv"]) == 200_000  # the server parses it
    assert r.runtime_error is not None and len(r.runtime_error) == 500_000  # the object is kept
