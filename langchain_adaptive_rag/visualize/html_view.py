"""The HTML view of a [`RecordedRun`][].

[`tokens_html`][]: every draft token as a span coloured by a signal, with a colour scale,
a tooltip of all its values, the trigger outlined, the threshold stated, the query words
highlighted in the question, the answer so far and the passages, and the passages listed
with the re-rank order marked.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from langchain_adaptive_rag.signals import folded_word
from langchain_adaptive_rag.visualize._style import (
    ROUTES,
    SPECS,
    Scale,
    Signal,
    check_record,
    check_signal,
    decision_rule,
    default_signal,
    derived_round_score,
    method_title,
    printable,
    query_words,
    scale_for,
    signal_spec,
    text_colour,
    threshold_symbol,
    thresholded_signal,
    token_value,
    trigger_tokens,
)
from langchain_adaptive_rag.visualize.record import RecordedRun, Round, TokenRecord

__all__ = ["CSS", "Signal", "default_signal", "tokens_html"]

CSS = """
.arag-run{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:14px;
  line-height:1.5;color:#1d1d1f;max-width:1100px}
.arag-run .arag-head{margin:4px 0 8px}
.arag-run .arag-head b{font-weight:600}
.arag-run .arag-legend{display:flex;flex-wrap:wrap;gap:6px 18px;align-items:center;
  font-size:12px;color:#444;margin:6px 0 10px}
.arag-run .arag-bar{position:relative;width:240px;height:12px;border:1px solid #999;
  border-radius:2px}
.arag-run .arag-tick{position:absolute;top:-4px;width:0;height:20px;
  border-left:2px dashed #111}
.arag-run .arag-scale{display:flex;align-items:center;gap:6px}
.arag-run .arag-round{border:1px solid #d8d8e0;border-radius:6px;padding:8px 12px;
  margin:10px 0;background:#fff}
.arag-run .arag-rtitle{font-weight:600;margin-bottom:4px}
.arag-run .arag-badge{display:inline-block;font-size:11px;font-weight:600;
  padding:1px 7px;border-radius:9px;margin-left:8px;vertical-align:1px}
.arag-run .arag-yes{background:#ffe1cc;color:#8a3b00}
.arag-run .arag-no{background:#e3f2e3;color:#1d5e20}
.arag-run .arag-grey{background:#ececf0;color:#555}
.arag-run .arag-muted{color:#666;font-size:13px}
.arag-run .arag-cite{color:#555;font-size:12px;font-style:italic}
.arag-run .arag-draft{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,monospace;
  font-size:13px;white-space:pre-wrap;line-height:2.1;margin:6px 0}
.arag-run .arag-tok{padding:3px 0;border-radius:2px}
.arag-run .arag-trigger{outline:2px solid #111;outline-offset:2px;border-radius:2px}
.arag-run .arag-inq{text-decoration:underline 2px #1f6feb;text-underline-offset:4px}
.arag-run .arag-cut{color:#c0001a;font-weight:700;padding:0 2px}
.arag-run mark.arag-q{background:#cfe3ff;color:inherit;padding:0 2px;border-radius:2px}
.arag-run .arag-decision{margin:4px 0}
.arag-run code{background:#f3f3f6;padding:0 4px;border-radius:3px;font-size:12.5px}
.arag-run ol.arag-docs{margin:4px 0 4px 0;padding-left:22px}
.arag-run ol.arag-docs li{margin:2px 0}
.arag-run .arag-kept{font-weight:600}
.arag-run .arag-dropped{color:#777}
.arag-run .arag-swatch{display:inline-block;width:14px;height:12px;vertical-align:-2px;
  border-radius:2px}
"""
"""Style sheet of the HTML views (every rule is scoped under ``.arag-run``)."""


def _esc(text: str, *, quote: bool = True) -> str:
    """HTML-escape ``text`` after writing its control characters visibly."""
    return html.escape(printable(text), quote=quote)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# -- HTML -----------------------------------------------------------------------------------


def _mark(text: str, keys: set[str]) -> str:
    """Escape ``text`` and wrap the words whose key is in ``keys`` in ``<mark>``."""
    parts: list[str] = []
    for piece in re.split(r"(\s+)", text):
        if piece and not piece.isspace() and folded_word(piece) in keys:
            parts.append(f'<mark class="arag-q">{_esc(piece)}</mark>')
        else:
            parts.append(_esc(piece))
    return "".join(parts)


def _tooltip(index: int, token: TokenRecord, round_: Round, word_score: str) -> str:
    lines = [f"token #{index} {token.text!r}"]
    for signal in ("probability", "entropy", "rind", "attention", "uncertainty"):
        short = word_score if signal == "rind" else SPECS[signal].short
        lines.append(f"{short} = {_fmt(getattr(token, signal))}")
    if token.word is not None and token.word < len(round_.words):
        lines.append(f"word {round_.words[token.word].text!r}")
    return _esc("\n".join(lines), quote=True)


def _cut_position(round_: Round) -> int | None:
    """Character offset in the draft where the accepted text ends, when a part was dropped."""
    decision = round_.decision
    if decision is None or not decision.retrieves or not round_.draft:
        return None
    if round_.draft.startswith(round_.accepted) and len(round_.accepted) < len(round_.draft):
        return len(round_.accepted)
    return None


def _draft_html(round_: Round, scale: Scale, keys: set[str], word_score: str) -> str:
    """The draft's token spans; the trigger's tokens share one outline."""
    trigger = trigger_tokens(round_)
    cut = _cut_position(round_)
    spans: list[str] = []
    offset = 0
    for index, token in enumerate(round_.tokens):
        if cut is not None and offset >= cut:
            spans.append('<span class="arag-cut" title="accepted text ends here">✂</span>')
            cut = None
        offset += len(token.text)
        background = scale.colour(token_value(token, scale.signal))
        style = f"background:{background};color:{text_colour(background)}"
        title = _tooltip(index, token, round_, word_score)
        core = token.text.lstrip()
        lead = token.text[: len(token.text) - len(core)]
        opens = index in trigger and index - 1 not in trigger
        if opens and lead:  # the outline starts at the word, after its leading space
            spans.append(f'<span class="arag-tok" style="{style}">{_esc(lead)}</span>')
            lead = ""
        if opens:
            spans.append('<span class="arag-trigger">')
        marked = keys and folded_word(token.text) in keys
        inner = f'<span class="arag-inq">{_esc(core)}</span>' if marked and core else _esc(core)
        spans.append(
            f'<span class="arag-tok" style="{style}" title="{title}">{_esc(lead)}{inner}</span>'
        )
        if index in trigger and index + 1 not in trigger:
            spans.append("</span>")
    return f'<div class="arag-draft">{"".join(spans)}</div>'


def _decision_html(record: RecordedRun, round_: Round) -> str:
    decision = round_.decision
    symbol = threshold_symbol(record)
    found = thresholded_signal(record)
    if decision is None:
        return '<div class="arag-decision arag-muted">No decision recorded.</div>'
    if decision.retrieves:
        if decision.score is not None and decision.threshold is not None:
            relation = "&gt;" if decision.score > decision.threshold else "&lt;"
            label = signal_spec(record, found[0]).label if found is not None else "score"
            where = (
                f"token #{decision.trigger_position} "
                f"<code>{_esc(decision.trigger_word or '')}</code>"
                if decision.trigger_position is not None
                else f"<code>{_esc(decision.trigger_word or '')}</code>"
            )
            text = (
                f"Trigger: {where}; {_esc(label)} = {decision.score:.3f} {relation} "
                f"threshold {symbol} = {decision.threshold:g} → <b>retrieve</b>"
            )
        elif decision.trigger_word:
            text = (
                f"Decision <code>{_esc(decision.trigger_word)}</code> → "
                "<b>retrieve</b> (no score or threshold)"
            )
        else:
            text = "Fixed schedule → <b>retrieve</b> (no score or threshold)"
        note = f' <span class="arag-muted">({_esc(decision.note)})</span>'
        return f'<div class="arag-decision">{text}{note if decision.note else ""}</div>'
    threshold = record.threshold
    if found is not None:
        signal, direction = found
        derived = derived_round_score(round_, signal, direction)
        if derived is not None and threshold is not None:
            what = {"above": "max", "below": "min"}[direction] if signal != "uncertainty" else ""
            relation = "≤" if direction == "above" else "≥"
            return (
                f'<div class="arag-decision">{what} {_esc(signal_spec(record, signal).label)} = '
                f"{derived:.3f} {relation} threshold {symbol} = {threshold:g} → "
                f"{_esc(ROUTES.get(decision.route, decision.route))} "
                '<span class="arag-muted">(score recomputed from the draft)</span></div>'
            )
    return f'<div class="arag-decision">→ {_esc(ROUTES.get(decision.route, decision.route))}</div>'


_CITED = ("title", "source", "url")
"""Metadata a passage's citation shows, when the retriever gave it."""


def _citation(metadata: Mapping[str, Any]) -> str:
    """A passage's title, source and URL (a link when it is one), or nothing."""
    parts = []
    for key in _CITED:
        value = metadata.get(key)
        if value in (None, ""):
            continue
        text = str(value)
        if key == "url" and text.startswith(("http://", "https://")):
            parts.append(f'<a href="{_esc(text)}" rel="noopener">{_esc(text)}</a>')
        else:
            parts.append(_esc(text))
    return f' <span class="arag-cite">{" · ".join(parts)}</span>' if parts else ""


def _docs_html(round_: Round, keys: set[str]) -> str:
    retrieval = round_.retrieval
    if retrieval is None:
        return ""
    items: list[str] = []
    order = retrieval.rerank_order
    for rank, (doc_id, text) in enumerate(
        zip(retrieval.doc_ids, retrieval.doc_texts, strict=False)
    ):
        if order is None:
            badge, css, tone = "used (retriever order)", "", "arag-grey"
        elif rank in order:
            badge, css, tone = f"kept, re-rank #{order.index(rank) + 1}", "arag-kept", "arag-no"
        else:
            badge, css, tone = "dropped by the re-ranker", "arag-dropped", "arag-grey"
        metadata = retrieval.doc_metadata[rank] if rank < len(retrieval.doc_metadata) else {}
        items.append(
            f'<li class="{css}"><code>{_esc(doc_id)}</code>{_citation(metadata)} '
            f'{_mark(text, keys)} <span class="arag-badge {tone}">{badge}</span></li>'
        )
    note = (
        f'<div class="arag-muted">Retriever: {_esc(retrieval.note)}</div>' if retrieval.note else ""
    )
    listing = f'<ol class="arag-docs" start="0">{"".join(items)}</ol>' if items else ""
    return (
        f"<div>Query: <code>{_esc(retrieval.query)}</code></div>{note}"
        f'<div class="arag-muted">Passages (retriever rank from 0):</div>{listing}'
    )


def _round_html(record: RecordedRun, round_: Round, scale: Scale) -> str:
    retrieval = round_.retrieval
    keys = query_words(retrieval.query) if retrieval is not None else set()
    retrieved = round_.decision is not None and round_.decision.retrieves
    badge = (
        '<span class="arag-badge arag-yes">retrieval</span>'
        if retrieved
        else '<span class="arag-badge arag-no">no retrieval</span>'
    )
    parts = [f'<div class="arag-rtitle">Round {round_.index + 1}{badge}</div>']
    if keys:
        parts.append(f'<div class="arag-muted">Question: {_mark(record.question, keys)}</div>')
    context = round_.context + (round_.accepted if retrieved else "")
    if context.strip():
        shown = context if len(context) <= 400 else "…" + context[-400:]
        parts.append(f'<div class="arag-muted">Answer so far: {_mark(shown, keys)}</div>')
    if round_.tokens:
        parts.append(_draft_html(round_, scale, keys, signal_spec(record, "rind").short))
    elif round_.draft:
        parts.append(f'<div class="arag-draft">{_esc(round_.draft)}</div>')
    parts.append(_decision_html(record, round_))
    parts.append(_docs_html(round_, keys))
    if round_.continuation:
        parts.append(
            '<div class="arag-muted">Generated with the passages: '
            f"{_esc(round_.continuation)}</div>"
        )
    return f'<div class="arag-round">{"".join(parts)}</div>'


def _legend_html(record: RecordedRun, scale: Scale) -> str:
    stops = ", ".join(
        f"{scale.colour(scale.lo + (scale.hi - scale.lo) * i / 8)} {i * 12.5:.1f}%"
        for i in range(9)
    )
    tick = ""
    threshold_text = ""
    if scale.threshold is not None:
        position = scale.fraction(scale.threshold) * 100
        tick = f'<div class="arag-tick" style="left:{position:.1f}%"></div>'
        threshold_text = (
            f"<span>threshold {threshold_symbol(record)} = {scale.threshold:g} (dashed)</span>"
        )
    rule = decision_rule(record)
    rule_html = f'<span class="arag-muted">{_esc(rule)}</span>' if rule else ""
    return (
        '<div class="arag-legend"><div class="arag-scale">'
        f"<b>{_esc(scale.spec.label)}</b> <span>{scale.lo:.3g}</span>"
        f'<div class="arag-bar" style="background:linear-gradient(to right, {stops})">{tick}'
        f"</div><span>{scale.hi:.3g}</span></div>{threshold_text}"
        '<span><span class="arag-trigger">what crossed the threshold</span>&nbsp; outlined</span>'
        f"{rule_html}"
        '<span><span class="arag-inq">query word</span> underlined, '
        '<mark class="arag-q">highlighted</mark> in the text</span>'
        '<span><span class="arag-cut">✂</span> accepted text ends</span>'
        '<span><span class="arag-swatch" style="background:#e6e6e6"></span> not measured</span>'
        "</div>"
    )


def tokens_html(record: RecordedRun, signal: Signal = "entropy") -> str:
    """A self-contained HTML snippet of the run, tokens coloured by ``signal``.

    Args:
        record: The run (from [`record_run`][]).
        signal: ``entropy``, ``probability``, ``rind``, ``attention`` or ``uncertainty``.

    Returns:
        HTML (a ``<style>`` block scoped to ``.arag-run`` and one ``<div>``).

    Raises:
        AdaptiveRAGError: ``signal`` is unknown or ``record`` is not a RecordedRun.
    """
    check_record(record, "tokens_html")
    scale = scale_for(record, check_signal(signal))
    counts = ", ".join(f"{k} {v}" for k, v in record.counts.items())
    head = (
        f'<div class="arag-head"><b>{_esc(method_title(record))}</b> · '
        f"{_esc(record.question)}<br>Answer: <b>{_esc(record.answer)}</b> "
        f'<span class="arag-muted">({_esc(counts)})</span></div>'
    )
    rounds = "".join(_round_html(record, r, scale) for r in record.rounds)
    return (
        f"<style>{CSS}</style>"
        f'<div class="arag-run">{head}{_legend_html(record, scale)}{rounds}</div>'
    )
