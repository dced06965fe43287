"""Docs-build checks on each rendered page: no raw Sphinx roles or directives, no unrendered links.

Registered under ``hooks:`` in ``mkdocs.yml``; a finding is a warning, which the strict
build (``make docs``) turns into a failure naming the page and the text.
"""

from __future__ import annotations

import logging
import re

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

__all__ = ["on_page_content"]

_log = logging.getLogger("mkdocs.plugins.rendered_text")

_RAW_ROLE = re.compile(
    r":(?:class|func|meth|attr|data|const|mod|obj|exc|ref|doc|term):(?:`[^`]*`|<code>[^<]*</code>)"
)
_RST_DIRECTIVE = re.compile(r">\s*(\.\. [a-z-]+::[^<]*)")
_UNRENDERED_LINK = re.compile(r"\[<code>[^<]*</code>\]\[[\w.]*\]")


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Warn about raw roles, reST directives and cross-references left as text.

    Args:
        html: The page's rendered body.
        page: The page.
        config: The site's configuration (unused).
        files: The site's files (unused).

    Returns:
        ``html`` unchanged.
    """
    for found in sorted(set(_RAW_ROLE.findall(html))):
        _log.warning("%s: a raw Sphinx role is rendered as text: %s", page.file.src_uri, found)
    for found in sorted(set(_RST_DIRECTIVE.findall(html))):
        _log.warning("%s: a reST directive is rendered as text: %s", page.file.src_uri, found)
    for found in sorted(set(_UNRENDERED_LINK.findall(html))):
        _log.warning("%s: a cross-reference was not rendered: %s", page.file.src_uri, found)
    return html
