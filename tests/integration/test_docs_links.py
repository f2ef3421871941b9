"""The repository's documentation stands alone: every reference points inside the repository.

- No tracked file sends the reader to the design notes kept outside the repository (their
  content is in docs/: evaluation-protocol.md, compatibility.md, contributing.md,
  architecture.md).
- Every relative Markdown link resolves to a file, and a `#anchor` to one of its headings.
- Every `docs/<name>.md` a source or document names exists, and a section named after it
  (`docs/security.md "The token"`) is one of its headings.

No server, no build: it reads the files git tracks or would track (`git ls-files -co
--exclude-standard`: not the build trees), about 5 MB.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from integration.kforge_server import REPO

# Built from parts so that this file does not match what it looks for.
OUTSIDE_DOCS = [name + ".md" for name in ("DESIGN", "REFERENCE", "STYLE", "STACK")]
OUTSIDE_DIR = ".." + "/shared"
# A path the workbench writes into a session's workspace, not a file of this repository.
NOT_REPO_FILES = {"docs/summarization.md"}

MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.M)
DOC_PATH = re.compile(r"(?<![\w./-])docs/([\w-]+\.md)")
# A page, then a quoted section name (after a comma or not; quotes escaped in a JSON string).
DOC_SECTION = re.compile(r'(?<![\w./-])docs/([\w-]+\.md),?\s+\\?"([^"\\]+)\\?"')
# A file of the Python worker named by its path (python/kforge_worker/judge/judged.py).
WORKER_FILE = re.compile(r"(?<![\w.-])(?:python/)?kforge_worker/((?:[\w]+/)*[\w]+\.py)\b")


@cache
def tracked() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [f for f in out.splitlines() if (REPO / f).is_file()]


@cache
def text_of(path: str) -> str | None:
    try:
        return (REPO / path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # binary


def plain(title: str) -> str:
    """A heading or a cited section name, compared without case, code marks or comment leaders
    (a name wrapped over lines of a comment: `"The\\n// token"`)."""
    title = re.sub(r"\s*(?://|#)\s+", " ", title) if "\n" in title else title
    return " ".join(title.replace("`", "").split()).lower()


def slug(title: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


@cache
def headings(path: Path) -> list[str]:
    return HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8")))


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def test_nothing_points_to_design_notes_outside_the_repository() -> None:
    found = []
    for path in tracked():
        text = text_of(path)
        if text is None:
            continue
        for needle in [*OUTSIDE_DOCS, OUTSIDE_DIR]:
            pos = text.find(needle)
            if pos >= 0:
                found.append(f"{path}:{line_of(text, pos)}: {needle}")
    assert not found, (
        "these point to documents that are not in the repository; cite the page and section "
        "of docs/ that holds the content:\n" + "\n".join(found)
    )


def test_relative_markdown_links_resolve() -> None:
    broken = []
    for path in tracked():
        if not path.endswith(".md"):
            continue
        source = REPO / path
        text = FENCE.sub("", text_of(path) or "")
        for m in MD_LINK.finditer(text):
            target = m[1]
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file, _, anchor = target.partition("#")
            dest = (source.parent / file).resolve() if file else source
            if not dest.exists():
                broken.append(f"{path}: {target} (no such file)")
            elif (
                anchor and dest.suffix == ".md" and anchor not in {slug(h) for h in headings(dest)}
            ):
                broken.append(f"{path}: {target} (no heading with that anchor)")
    assert not broken, "\n".join(broken)


def test_cited_docs_and_sections_exist() -> None:
    missing = []
    for path in tracked():
        text = text_of(path)
        if text is None:
            continue
        for m in DOC_PATH.finditer(text):
            if f"docs/{m[1]}" not in NOT_REPO_FILES and not (REPO / "docs" / m[1]).is_file():
                missing.append(f"{path}:{line_of(text, m.start())}: docs/{m[1]} does not exist")
        for m in DOC_SECTION.finditer(text):
            doc = REPO / "docs" / m[1]
            if not doc.is_file():
                continue  # reported above
            name = plain(m[2])
            titles = [plain(h) for h in headings(doc)]
            if not any(t == name or t.startswith(name + " (") for t in titles):
                missing.append(
                    f'{path}:{line_of(text, m.start())}: docs/{m[1]} has no section "{m[2]}"'
                )
    assert not missing, "\n".join(missing)


def test_named_worker_files_exist() -> None:
    """A path into python/kforge_worker names a file of it (its modules live in rooms)."""
    missing = []
    for path in tracked():
        text = text_of(path)
        if text is None:
            continue
        for m in WORKER_FILE.finditer(text):
            if not (REPO / "python" / "kforge_worker" / m[1]).is_file():
                missing.append(
                    f"{path}:{line_of(text, m.start())}: kforge_worker/{m[1]} does not exist"
                )
    assert not missing, "\n".join(missing)


def test_the_checks_see_what_they_must() -> None:
    """The patterns find what they are for (a check that matches nothing passes vacuously)."""
    assert DOC_SECTION.search('see docs/security.md "The\n// token" for') is not None
    assert plain("The\n// token") == "the token"
    assert slug("Compatibility with the kernel evaluation server's tools") == (
        "compatibility-with-the-kernel-evaluation-servers-tools"
    )
    assert slug("3. The multi-op kernel pipeline (skill)") == "3-the-multi-op-kernel-pipeline-skill"
    assert DOC_PATH.search("kernel/docs/x.md") is None
    assert WORKER_FILE.search("(python/kforge_worker/judge/judged.py)")[1] == "judge/judged.py"
    assert WORKER_FILE.search("share/kforge/python/kforge_worker/core/spec.py") is not None
    assert any(path.endswith(".md") for path in tracked())
