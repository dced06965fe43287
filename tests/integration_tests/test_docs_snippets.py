"""The docs' Python snippets that run on the toy world run as written, printing what they show.

A snippet qualifies when it imports ``langchain_adaptive_rag.toyworld``; the ``# ...``
comment lines right after a ``print(...)`` are what that print shows.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _toy_snippets() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        if page.name == "index.md":  # the README, with its links made relative
            continue
        for number, match in enumerate(re.finditer(r"```python\n(.*?)```", page.read_text(), re.S)):
            if "langchain_adaptive_rag.toyworld" in match.group(1):
                found.append((f"{page.relative_to(ROOT)}#{number}", match.group(1)))
    return found


def _shown(code: str) -> list[str]:
    """The outputs the snippet shows: the comment lines after each ``print(...)``."""
    shown: list[str] = []
    after_print = False
    for line in code.splitlines():
        if after_print and (line.startswith("# ") or line == "#"):  # "#": a blank line
            shown.append(line[2:])
            continue
        after_print = line.startswith("print(")
    return shown


SNIPPETS = _toy_snippets()


def test_the_toy_world_page_has_its_python_example() -> None:
    assert any(name.startswith("docs/toy-world.md") for name, _ in SNIPPETS)


@pytest.mark.parametrize(("name", "code"), SNIPPETS, ids=[name for name, _ in SNIPPETS])
def test_a_toy_world_snippet_runs_as_written(name: str, code: str) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, name, "exec"), {"__name__": "__snippet__"})
    shown = _shown(code)
    assert shown, f"{name}: no output shown after a print"
    assert printed.getvalue().splitlines() == shown, name
