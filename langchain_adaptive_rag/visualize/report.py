"""A self-contained HTML report of several runs (inline CSS, pictures as base64 PNG).

The report's pictures are drawn with matplotlib (the ``plots`` extra).
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.visualize._matplotlib import require_matplotlib
from langchain_adaptive_rag.visualize._style import default_signal, method_title
from langchain_adaptive_rag.visualize.figures import timeline_figure, tokens_figure
from langchain_adaptive_rag.visualize.graph import DrawableGraph, graph_figure
from langchain_adaptive_rag.visualize.html_view import tokens_html
from langchain_adaptive_rag.visualize.record import RecordedRun

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["figure_png_base64", "markdown_table_html", "report_html"]

_PAGE_CSS = """
body{margin:0;background:#f6f6f9;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;
  color:#1d1d1f}
main{max-width:1140px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:26px;margin:4px 0 16px}
h2{font-size:19px;margin:34px 0 8px;padding-top:8px;border-top:2px solid #dcdbe8}
h3{font-size:15px;margin:16px 0 6px;color:#333}
nav ol{margin:4px 0 12px;padding-left:22px}
nav a{color:#3b3486}
table.arag-summary{border-collapse:collapse;margin:8px 0 12px;font-size:13px;background:#fff}
table.arag-summary th,table.arag-summary td{border:1px solid #d4d4de;padding:4px 10px;
  text-align:left}
table.arag-summary th{background:#eeedf7}
table.arag-summary td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:10px 0;background:#fff;border:1px solid #e1e1ea;border-radius:6px;padding:8px}
figure img{max-width:100%;height:auto;display:block;margin:0 auto}
figcaption{font-size:12px;color:#555;margin-top:4px}
.arag-graphs{display:flex;flex-wrap:wrap;gap:12px}
.arag-graphs figure{flex:0 1 420px}
"""


def figure_png_base64(fig: Figure, *, dpi: int = 100) -> str:
    """A figure as a ``data:image/png;base64,...`` URI.

    Args:
        fig: The figure.
        dpi: Resolution.

    Returns:
        The data URI.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, facecolor="white")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _inline(text: str) -> str:
    """Escape markdown inline text, keeping ``code`` and **bold**."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", escaped)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def markdown_table_html(markdown: str) -> str:
    """Render markdown pipe tables as HTML tables; other lines become paragraphs.

    Args:
        markdown: Text with pipe tables (``| a | b |`` rows, a ``|---|---|`` rule).

    Returns:
        HTML.
    """
    out: list[str] = []
    lines = markdown.strip().splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        is_table = (
            line.strip().startswith("|")
            and index + 1 < len(lines)
            and re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", lines[index + 1]) is not None
        )
        if not is_table:
            if line.strip():
                out.append(f"<p>{_inline(line.strip())}</p>")
            index += 1
            continue
        header = _cells(line)
        rows: list[list[str]] = []
        index += 2
        while index < len(lines) and lines[index].strip().startswith("|"):
            rows.append(_cells(lines[index]))
            index += 1
        head = "".join(f"<th>{_inline(c)}</th>" for c in header)
        body = "".join(
            "<tr>"
            + "".join(
                f'<td class="num">{_inline(c)}</td>'
                if re.fullmatch(r"[-+]?[\d.,%]+", c)
                else f"<td>{_inline(c)}</td>"
                for c in row
            )
            + "</tr>"
            for row in rows
        )
        out.append(f'<table class="arag-summary"><tr>{head}</tr>{body}</table>')
    return "\n".join(out)


def _followup_line(record: RecordedRun) -> str:
    """The line saying how a follow-up's retrievals read it (``""``: as asked)."""
    if not record.standalone_question or record.standalone_question == record.question:
        return ""
    return (
        '<p class="arag-followup">A follow-up; its retrievals read it as: '
        f"<q>{html.escape(record.standalone_question)}</q></p>"
    )


def _run_section(index: int, record: RecordedRun) -> str:
    signal = default_signal(record)
    timeline = figure_png_base64(timeline_figure(record))
    tokens = figure_png_base64(tokens_figure(record, signal))
    return (
        f'<section id="run-{index}"><h2>{index + 1}. {html.escape(method_title(record))}: '
        f"{html.escape(record.question)}</h2>"
        f"{_followup_line(record)}"
        f"{tokens_html(record, signal)}"
        f'<figure><img alt="need score per round" src="{timeline}">'
        "<figcaption>Need score per round against the threshold; shaded rounds retrieved."
        "</figcaption></figure>"
        f'<figure><img alt="draft tokens coloured by {signal}" src="{tokens}">'
        f"<figcaption>Draft tokens coloured by {html.escape(signal)}; the trigger is "
        "outlined.</figcaption></figure></section>"
    )


def report_html(
    records: Sequence[RecordedRun],
    *,
    title: str,
    summary_table_markdown: str | None = None,
    graphs: Mapping[str, DrawableGraph] | None = None,
) -> str:
    """A full HTML page showing several runs, self-contained (no network, no files).

    Args:
        records: The runs (from [`record_run`][]).
        title: Page title.
        summary_table_markdown: Optional markdown (pipe tables) shown under the title, e.g.
            a comparison of methods.
        graphs: Optional graphs to draw, by name (e.g. ``{"dragin": graph}``).

    Returns:
        The page.

    Raises:
        AdaptiveRAGError: ``records`` holds something other than RunRecords.
        ImportError: matplotlib is not installed (the ``plots`` extra).
    """
    if isinstance(records, (str, RecordedRun)) or not isinstance(records, Sequence):
        bad = [type(records).__name__]
        received = type(records).__name__
    else:
        bad = [type(r).__name__ for r in records if not isinstance(r, RecordedRun)]
        received = f"items of type {', '.join(bad)}"
    if bad:
        msg = (
            f"report_html received {received}. Expected a list of RunRecords. Fix: "
            "report_html([record_run(graph, question), ...], title=...)."
        )
        raise AdaptiveRAGError(msg)
    if records or graphs:
        require_matplotlib("report_html")  # its pictures
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if summary_table_markdown:
        parts.append(f"<h3>Summary</h3>{markdown_table_html(summary_table_markdown)}")
    if graphs:
        pictures = "".join(
            f'<figure><img alt="{html.escape(name)} graph" '
            f'src="{figure_png_base64(graph_figure(graph, title=name), dpi=110)}">'
            f"<figcaption>{html.escape(name)}</figcaption></figure>"
            for name, graph in graphs.items()
        )
        parts.append(f'<h3>Graphs</h3><div class="arag-graphs">{pictures}</div>')
    if records:
        links = "".join(
            f'<li><a href="#run-{i}">{html.escape(method_title(r))}: {html.escape(r.question)}</a> '
            f"→ {html.escape(r.answer)}</li>"
            for i, r in enumerate(records)
        )
        parts.append(f"<nav><h3>Runs</h3><ol>{links}</ol></nav>")
    parts.extend(_run_section(i, r) for i, r in enumerate(records))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_PAGE_CSS}</style></head>"
        f"<body><main>{''.join(parts)}</main></body></html>\n"
    )
