"""Token-level views of a :class:`RunRecord`: HTML for notebooks, matplotlib figures.

- :func:`tokens_html`: every draft token as a span coloured by a signal, with a colour
  scale, a tooltip of all its values, the trigger outlined, the threshold stated, the
  query words highlighted in the question, the answer so far and the passages, and the
  passages listed with the re-rank order marked.
- :func:`tokens_figure`: the same tokens as wrapped coloured text, with a bar per token
  and the threshold line where the signal is the one the method thresholds.
- :func:`timeline_figure`: the need score of every round against the threshold, with
  the rounds that retrieved marked.
"""

from __future__ import annotations

import html
import re

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from langchain_adaptive_rag.graphs import AVAILABLE_METHODS, policy_class
from langchain_adaptive_rag.visualize._style import (
    SPECS,
    Direction,
    Scale,
    Signal,
    check_signal,
    default_signal,
    derived_round_score,
    printable,
    query_words,
    scale_for,
    text_colour,
    thresholded_signal,
    token_value,
    trigger_tokens,
    word_key,
)
from langchain_adaptive_rag.visualize.record import Round, RunRecord, TokenRecord

__all__ = ["Signal", "default_signal", "timeline_figure", "tokens_figure", "tokens_html"]

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

_ROUTES = {
    "retrieve": "retrieved",
    "continue": "continued without retrieval",
    "draft": "accepted; next draft",
    "finalize": "accepted; finalize",
}


def _esc(text: str, *, quote: bool = True) -> str:
    """HTML-escape ``text`` after writing its control characters visibly."""
    return html.escape(printable(text), quote=quote)


def _symbol(record: RunRecord) -> str:
    """The threshold's symbol of the record's method (its policy's ``threshold_symbol``)."""
    if record.method in AVAILABLE_METHODS:
        return policy_class(record.method).threshold_symbol
    return "θ"


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# -- HTML -----------------------------------------------------------------------------------


def _mark(text: str, keys: set[str]) -> str:
    """Escape ``text`` and wrap the words whose key is in ``keys`` in ``<mark>``."""
    parts: list[str] = []
    for piece in re.split(r"(\s+)", text):
        if piece and not piece.isspace() and word_key(piece) in keys:
            parts.append(f'<mark class="arag-q">{_esc(piece)}</mark>')
        else:
            parts.append(_esc(piece))
    return "".join(parts)


def _tooltip(index: int, token: TokenRecord, round_: Round) -> str:
    lines = [f"token #{index} {token.text!r}"]
    for signal in ("probability", "entropy", "rind", "attention", "uncertainty"):
        lines.append(f"{SPECS[signal].short} = {_fmt(getattr(token, signal))}")
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


def _draft_html(round_: Round, scale: Scale, keys: set[str]) -> str:
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
        title = _tooltip(index, token, round_)
        core = token.text.lstrip()
        lead = token.text[: len(token.text) - len(core)]
        opens = index in trigger and index - 1 not in trigger
        if opens and lead:  # the outline starts at the word, after its leading space
            spans.append(f'<span class="arag-tok" style="{style}">{_esc(lead)}</span>')
            lead = ""
        if opens:
            spans.append('<span class="arag-trigger">')
        marked = keys and word_key(token.text) in keys
        inner = f'<span class="arag-inq">{_esc(core)}</span>' if marked and core else _esc(core)
        spans.append(
            f'<span class="arag-tok" style="{style}" title="{title}">{_esc(lead)}{inner}</span>'
        )
        if index in trigger and index + 1 not in trigger:
            spans.append("</span>")
    return f'<div class="arag-draft">{"".join(spans)}</div>'


def _decision_html(record: RunRecord, round_: Round) -> str:
    decision = round_.decision
    symbol = _symbol(record)
    found = thresholded_signal(record)
    if decision is None:
        return '<div class="arag-decision arag-muted">No decision recorded.</div>'
    if decision.retrieves:
        if decision.score is not None and decision.threshold is not None:
            relation = "&gt;" if decision.score > decision.threshold else "&lt;"
            label = SPECS[found[0]].label if found is not None else "score"
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
                f'<div class="arag-decision">{what} {_esc(SPECS[signal].label)} = '
                f"{derived:.3f} {relation} threshold {symbol} = {threshold:g} → "
                f"{_esc(_ROUTES.get(decision.route, decision.route))} "
                '<span class="arag-muted">(score recomputed from the draft)</span></div>'
            )
    return f'<div class="arag-decision">→ {_esc(_ROUTES.get(decision.route, decision.route))}</div>'


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
        items.append(
            f'<li class="{css}"><code>{_esc(doc_id)}</code> {_mark(text, keys)} '
            f'<span class="arag-badge {tone}">{badge}</span></li>'
        )
    note = (
        f'<div class="arag-muted">Retriever: {_esc(retrieval.note)}</div>' if retrieval.note else ""
    )
    listing = f'<ol class="arag-docs" start="0">{"".join(items)}</ol>' if items else ""
    return (
        f"<div>Query: <code>{_esc(retrieval.query)}</code></div>{note}"
        f'<div class="arag-muted">Passages (retriever rank from 0):</div>{listing}'
    )


def _round_html(record: RunRecord, round_: Round, scale: Scale) -> str:
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
        parts.append(_draft_html(round_, scale, keys))
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


def _legend_html(record: RunRecord, scale: Scale) -> str:
    stops = ", ".join(
        f"{scale.colour(scale.lo + (scale.hi - scale.lo) * i / 8)} {i * 12.5:.1f}%"
        for i in range(9)
    )
    tick = ""
    threshold_text = ""
    if scale.threshold is not None:
        position = scale.fraction(scale.threshold) * 100
        tick = f'<div class="arag-tick" style="left:{position:.1f}%"></div>'
        threshold_text = f"<span>threshold {_symbol(record)} = {scale.threshold:g} (dashed)</span>"
    return (
        '<div class="arag-legend"><div class="arag-scale">'
        f"<b>{_esc(SPECS[scale.signal].label)}</b> <span>{scale.lo:.3g}</span>"
        f'<div class="arag-bar" style="background:linear-gradient(to right, {stops})">{tick}'
        f"</div><span>{scale.hi:.3g}</span></div>{threshold_text}"
        '<span><span class="arag-trigger">trigger</span>&nbsp; outlined</span>'
        '<span><span class="arag-inq">query word</span> underlined, '
        '<mark class="arag-q">highlighted</mark> in the text</span>'
        '<span><span class="arag-cut">✂</span> accepted text ends</span>'
        '<span><span class="arag-swatch" style="background:#e6e6e6"></span> not measured</span>'
        "</div>"
    )


def tokens_html(record: RunRecord, signal: Signal = "entropy") -> str:
    """A self-contained HTML snippet of the run, tokens coloured by ``signal``.

    Args:
        record: The run (from :func:`record_run`).
        signal: ``entropy``, ``probability``, ``rind``, ``attention`` or ``uncertainty``.

    Returns:
        HTML (a ``<style>`` block scoped to ``.arag-run`` and one ``<div>``).

    Raises:
        AdaptiveRAGError: ``signal`` is unknown or ``record`` is not a RunRecord.
    """
    _check_record(record, "tokens_html")
    scale = scale_for(record, check_signal(signal))
    counts = ", ".join(f"{k} {v}" for k, v in record.counts.items())
    head = (
        f'<div class="arag-head"><b>{_esc(record.method)}</b> · '
        f"{_esc(record.question)}<br>Answer: <b>{_esc(record.answer)}</b> "
        f'<span class="arag-muted">({_esc(counts)})</span></div>'
    )
    rounds = "".join(_round_html(record, r, scale) for r in record.rounds)
    return (
        f"<style>{CSS}</style>"
        f'<div class="arag-run">{head}{_legend_html(record, scale)}{rounds}</div>'
    )


def _check_record(record: object, caller: str) -> None:
    if not isinstance(record, RunRecord):
        from langchain_adaptive_rag.errors import AdaptiveRAGError

        msg = (
            f"{caller} received {type(record).__name__}. Expected a RunRecord. Fix: "
            "record = record_run(graph, question), or RunRecord.from_json(text)."
        )
        raise AdaptiveRAGError(msg)


# -- figures --------------------------------------------------------------------------------

_FIG_W = 11.0
_SIDE = 0.45
_FONT = 9.0
_CHAR_W = 0.65 * _FONT / 72
"""Box width per character: a little more than the font's 0.6 em advance, which Agg rounds
to whole pixels (up to 0.08 in at 100 dpi)."""
_LINE_H = 0.27


def _figure_text(text: str) -> str:
    """Token text for a monospace figure: visible newlines and controls, no wide glyphs."""
    return printable(text.replace("\n", "⏎").replace("\t", " ")).replace("\ufffd", "?")


def _wrap(tokens: list[TokenRecord], width: float) -> list[tuple[int, float, str]]:
    """``(line, x, shown text)`` of each token, wrapped to ``width`` inches."""
    placed: list[tuple[int, float, str]] = []
    line, x = 0, 0.0
    for token in tokens:
        shown = _figure_text(token.text) or " "  # an empty piece (part of a character)
        size = len(shown) * _CHAR_W
        if x > 0 and x + size > width:
            line, x = line + 1, 0.0
            shown = shown.lstrip() or shown
            size = len(shown) * _CHAR_W
        placed.append((line, x, shown))
        x += size
    return placed


def tokens_figure(record: RunRecord, signal: Signal = "entropy") -> Figure:
    """The draft tokens of every round as wrapped coloured text with a bar per token.

    The trigger is outlined; where ``signal`` is the one the method thresholds, the bars
    carry the threshold line.

    Args:
        record: The run.
        signal: The signal to colour by.

    Returns:
        A matplotlib figure (no pyplot state involved).
    """
    _check_record(record, "tokens_figure")
    scale = scale_for(record, check_signal(signal))
    rounds = [r for r in record.rounds if r.tokens]
    text_w = _FIG_W - 2 * _SIDE
    wraps = [_wrap(r.tokens, text_w) for r in rounds]
    blocks = []  # (title_h, text_h, bar_h)
    for round_, placed in zip(rounds, wraps, strict=True):
        lines = (placed[-1][0] + 1) if placed else 1
        has_values = signal != "uncertainty" and any(
            token_value(t, signal) is not None for t in round_.tokens
        )  # U is one value per step: its title states it
        blocks.append((0.32, lines * _LINE_H + 0.1, 1.9 if has_values else 0.0))
    header = 1.05
    total = header + sum(sum(b) + 0.3 for b in blocks) + (0.5 if not rounds else 0.1)
    fig = Figure(figsize=(_FIG_W, total))
    top = total  # inches from the bottom

    def axes_at(y_top: float, height: float, width: float = text_w) -> Axes:
        box = (_SIDE / _FIG_W, (y_top - height) / total, width / _FIG_W, height / total)
        return fig.add_axes(box)

    fig.text(
        _SIDE / _FIG_W,
        (top - 0.25) / total,
        printable(f"{record.method}: {record.question}"),
        fontsize=11,
        fontweight="bold",
        va="center",
    )
    cax = axes_at(top - 0.55, 0.14, width=3.2)
    bar = fig.colorbar(ScalarMappable(scale.norm, scale.cmap), cax=cax, orientation="horizontal")
    bar.set_label(SPECS[signal].label, fontsize=8, labelpad=1)
    bar.ax.tick_params(labelsize=7)
    if scale.threshold is not None:
        cax.axvline(scale.threshold, color="#c0001a", linestyle="--", linewidth=1.5)
    handles: list[Artist] = [
        Patch(facecolor="white", edgecolor="#111111", linewidth=2, label="trigger"),
        Patch(facecolor="#e6e6e6", label="not measured"),
    ]
    if scale.threshold is not None:
        handles.insert(1, Line2D([], [], color="#c0001a", linestyle="--", label="threshold"))
    fig.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(4.2 / _FIG_W, (top - 0.42) / total),
        ncols=3,
        fontsize=8,
        frameon=False,
    )
    y = top - header
    if not rounds:
        fig.text(0.5, (y - 0.2) / total, "No round drafted any tokens.", ha="center", fontsize=9)
    for round_, placed, (title_h, text_h, bar_h) in zip(rounds, wraps, blocks, strict=True):
        fig.text(
            _SIDE / _FIG_W,
            (y - title_h / 2) / total,
            _round_title(record, round_),
            fontsize=9.5,
            fontweight="bold",
            va="center",
        )
        y -= title_h
        _draw_text_panel(axes_at(y, text_h), round_, placed, scale, text_h)
        y -= text_h
        if bar_h:
            _draw_bars(axes_at(y - 0.05, bar_h - 0.75, width=text_w - 0.6), record, round_, scale)
        y -= bar_h + 0.3
    return fig


def _round_title(record: RunRecord, round_: Round) -> str:
    decision = round_.decision
    symbol = _symbol(record)
    if decision is not None and decision.retrieves:
        score = ""
        if decision.score is not None and decision.threshold is not None:
            relation = ">" if decision.score > decision.threshold else "<"
            score = f" ({decision.score:.3g} {relation} {symbol} = {decision.threshold:g})"
        retrieval = round_.retrieval
        query = f', query "{retrieval.query}"' if retrieval is not None else ""
        text = f"Round {round_.index + 1}: retrieval{score}{query}"
    else:
        route = _ROUTES.get(decision.route, decision.route) if decision is not None else ""
        text = f"Round {round_.index + 1}: no retrieval ({route})"
        if round_.uncertainty is not None and record.threshold is not None:
            text += f"; U = {round_.uncertainty:.3g}, {symbol} = {record.threshold:g}"
    text = printable(text)
    return text if len(text) <= 130 else text[:129] + "…"


def _draw_text_panel(
    ax: Axes, round_: Round, placed: list[tuple[int, float, str]], scale: Scale, height: float
) -> None:
    ax.set_xlim(0, _FIG_W - 2 * _SIDE)
    ax.set_ylim(-height, 0)
    ax.set_axis_off()
    trigger = trigger_tokens(round_)
    runs: dict[int, list[float]] = {}  # line -> [x_start, x_end] of the trigger on it
    for index, (token, (line, x, shown)) in enumerate(zip(round_.tokens, placed, strict=True)):
        colour = scale.colour(token_value(token, scale.signal))
        y = -(line + 1) * _LINE_H
        width = len(shown) * _CHAR_W
        ax.add_patch(
            Rectangle(
                (x, y + 0.03),
                width,
                _LINE_H - 0.06,
                facecolor=colour,
                edgecolor="white",
                linewidth=0.6,
                zorder=2,
            )
        )
        ax.text(
            x + width / 2,
            y + _LINE_H / 2,
            shown,
            family="monospace",
            fontsize=_FONT,
            va="center",
            ha="center",
            color=text_colour(colour),
            zorder=4,
        )
        if index in trigger:
            span = runs.setdefault(line, [x, x + width])
            span[1] = x + width
    for line, (start, end) in runs.items():  # one outline around the trigger per line
        ax.add_patch(
            Rectangle(
                (start, -(line + 1) * _LINE_H + 0.02),
                end - start,
                _LINE_H - 0.04,
                facecolor="none",
                edgecolor="#111111",
                linewidth=2.0,
                zorder=5,
            )
        )


def _draw_bars(ax: Axes, record: RunRecord, round_: Round, scale: Scale) -> None:
    values = [token_value(t, scale.signal) for t in round_.tokens]
    positions = np.arange(len(values))
    heights = [v if v is not None else 0.0 for v in values]
    trigger = trigger_tokens(round_)
    ax.bar(
        positions,
        heights,
        width=0.8,
        color=[scale.colour(v) for v in values],
        edgecolor=["#111111" if i in trigger else "#888888" for i in range(len(values))],
        linewidth=[1.8 if i in trigger else 0.4 for i in range(len(values))],
    )
    if scale.threshold is not None:
        ax.axhline(scale.threshold, color="#c0001a", linestyle="--", linewidth=1.2)
        ax.text(
            1.0,
            scale.threshold,
            f" {_symbol(record)} = {scale.threshold:g}",
            transform=ax.get_yaxis_transform(),
            color="#c0001a",
            fontsize=8,
            va="center",
            ha="left",
        )
    ax.set_xlim(-0.6, max(len(values), 16) - 0.4)  # the same bar width for short drafts
    low = min(0.0, scale.lo)
    ax.set_ylim(low, scale.hi * 1.05 if scale.hi > 0 else scale.hi + 0.05 * (scale.hi - low))
    step = max(1, int(np.ceil(len(values) / 70)))
    ax.set_xticks(positions[::step])
    ax.set_xticklabels(
        [_figure_text(round_.tokens[i].text.strip()) for i in positions[::step]],
        rotation=90,
        fontsize=7,
        family="monospace",
    )
    ax.tick_params(axis="y", labelsize=7)
    ax.set_ylabel(SPECS[scale.signal].short, fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _round_scores(
    record: RunRecord,
) -> tuple[list[float | None], list[bool], tuple[Signal, Direction] | None]:
    """Each round's need score and whether the policy reported it (else recomputed)."""
    found = thresholded_signal(record)
    scores: list[float | None] = []
    reported: list[bool] = []
    for round_ in record.rounds:
        decision = round_.decision
        if decision is not None and decision.score is not None:
            scores.append(decision.score)
            reported.append(True)
        elif found is not None:
            scores.append(derived_round_score(round_, *found))
            reported.append(False)
        else:
            scores.append(None)
            reported.append(False)
    return scores, reported, found


def timeline_figure(record: RunRecord) -> Figure:
    """Rounds on x, the need score against the threshold, retrievals marked.

    Scores the policy reported with its decision are filled; scores recomputed from the
    draft (rounds that did not retrieve report none) are hollow.

    Args:
        record: The run.

    Returns:
        A matplotlib figure.
    """
    _check_record(record, "timeline_figure")
    scores, reported, found = _round_scores(record)
    count = len(record.rounds)
    fig = Figure(figsize=(max(6.5, min(11.0, 3.0 + 0.6 * count)), 3.6))
    ax = fig.add_axes((0.11, 0.3, 0.84, 0.6))
    rounds = np.arange(1, count + 1)
    for index, round_ in enumerate(record.rounds):
        if round_.decision is not None and round_.decision.retrieves:
            ax.axvspan(index + 0.6, index + 1.4, color="#ffe1cc", zorder=0)
    known = [
        (r, s, rep) for r, s, rep in zip(rounds, scores, reported, strict=True) if s is not None
    ]
    if known:
        ax.plot(
            [k[0] for k in known], [k[1] for k in known], color="#555555", linewidth=1, zorder=2
        )
    for r, s, rep in known:
        ax.plot(
            r,
            s,
            marker="o",
            markersize=8,
            markerfacecolor="#3b3486" if rep else "white",
            markeredgecolor="#3b3486",
            markeredgewidth=1.5,
            linestyle="none",
            zorder=3,
        )
    thresholds = [
        r.decision.threshold
        for r in record.rounds
        if r.decision and r.decision.threshold is not None
    ]
    if record.threshold is not None:
        ax.axhline(record.threshold, color="#c0001a", linestyle="--", linewidth=1.3, zorder=1)
    elif thresholds:
        points = [
            (i + 1, r.decision.threshold)
            for i, r in enumerate(record.rounds)
            if r.decision is not None and r.decision.threshold is not None
        ]
        ax.plot(*zip(*points, strict=True), color="#c0001a", marker="_", markersize=20, ls="none")
    if not known:
        ax.text(
            0.5,
            0.5,
            "this method reports no need score" if found is None else "no score recorded",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#666666",
            fontsize=9,
        )
    ax.set_xlim(0.4, count + 0.6 if count else 1.6)
    ax.set_xticks(rounds)
    ax.set_xlabel("round", fontsize=9)
    label = SPECS[found[0]].label if found is not None else "need score"
    if found is not None and found[0] in ("rind", "probability"):
        label = ("max " if found[1] == "above" else "min ") + label
    ax.set_ylabel(label, fontsize=9)
    ax.tick_params(labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    direction = f" (retrieve when {found[1]})" if found is not None else ""
    ax.set_title(f"{record.method}: need score per round{direction}", fontsize=10, loc="left")
    fig.legend(
        handles=[
            Line2D(
                [],
                [],
                marker="o",
                color="#3b3486",
                markerfacecolor="#3b3486",
                ls="none",
                label="reported by score_need",
            ),
            Line2D(
                [],
                [],
                marker="o",
                color="#3b3486",
                markerfacecolor="white",
                ls="none",
                label="recomputed from the draft",
            ),
            Line2D([], [], color="#c0001a", linestyle="--", label=f"threshold {_symbol(record)}"),
            Patch(facecolor="#ffe1cc", label="round retrieved"),
        ],
        loc="lower center",
        bbox_to_anchor=(0.5, -0.01),
        ncols=2,
        fontsize=8,
        frameon=False,
    )
    return fig
