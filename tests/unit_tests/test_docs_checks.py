"""The docs build's page checks: raw roles, directives and unrendered links are reported."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

HOOK = Path(__file__).resolve().parents[2] / "docs_hooks" / "rendered_text.py"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rendered_text", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(html: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    page: Any = SimpleNamespace(file=SimpleNamespace(src_uri="api/graphs.md"))
    with caplog.at_level(logging.WARNING):
        assert _hook().on_page_content(html, page, None, None) == html
    return [record.getMessage() for record in caplog.records]


def test_a_raw_role_is_reported_with_its_page(caplog: pytest.LogCaptureFixture) -> None:
    found = _check("<p>Built by :func:<code>create_graph</code>.</p>", caplog)
    assert found == [
        "api/graphs.md: a raw Sphinx role is rendered as text: :func:<code>create_graph</code>"
    ]


def test_a_rest_directive_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    found = _check("<p>.. code-block:: python</p><pre>llm.invoke()</pre>", caplog)
    assert found == ["api/graphs.md: a reST directive is rendered as text: .. code-block:: python"]


def test_an_unrendered_cross_reference_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    found = _check("<p>See [<code>Policy</code>][langchain_adaptive_rag.Policy].</p>", caplog)
    assert len(found) == 1 and "cross-reference was not rendered" in found[0]


def test_rendered_links_and_code_pass(caplog: pytest.LogCaptureFixture) -> None:
    html = (
        '<p><a class="autorefs autorefs-internal" href="#x"><code>Policy</code></a> and '
        "<code>theta: 1.5</code>; a time 12:30.</p>"
    )
    assert _check(html, caplog) == []


def test_the_docs_build_fails_on_a_warning() -> None:
    # mkdocs' --quiet drops warnings before --strict counts them: the build must not be quiet
    makefile = (HOOK.parents[1] / "Makefile").read_text(encoding="utf-8")
    builds = [line for line in makefile.splitlines() if "mkdocs build" in line]
    assert builds and all("--strict" in line and "--quiet" not in line for line in builds)
