"""Matplotlib figures of a [`RecordedRun`][].

- [`tokens_figure`][]: the draft tokens as wrapped coloured text, with a bar per token
  and the threshold line where the signal is the one the method thresholds.
- [`timeline_figure`][]: the need score of every round against the threshold, with the
  rounds that retrieved marked.

matplotlib is imported when a figure is drawn (the ``plots`` extra); without it, drawing
raises an ``ImportError`` that says how to install it.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import numpy as np

from langchain_adaptive_rag.visualize._matplotlib import require_matplotlib
from langchain_adaptive_rag.visualize._style import (
    ROUTES,
    Direction,
    Scale,
    Signal,
    check_record,
    check_signal,
    decision_rule,
    derived_round_score,
    method_title,
    printable,
    scale_for,
    signal_spec,
    text_colour,
    threshold_symbol,
    thresholded_signal,
    token_value,
    trigger_tokens,
)
from langchain_adaptive_rag.visualize.record import RecordedRun, Round, TokenRecord

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["timeline_figure", "tokens_figure"]

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


def tokens_figure(record: RecordedRun, signal: Signal = "entropy") -> Figure:
    """The draft tokens of every round as wrapped coloured text with a bar per token.

    The trigger is outlined; where ``signal`` is the one the method thresholds, the bars
    carry the threshold line.

    Args:
        record: The run.
        signal: The signal to colour by.

    Returns:
        A matplotlib figure (no pyplot state involved).

    Raises:
        ImportError: matplotlib is not installed (the ``plots`` extra).
    """
    check_record(record, "tokens_figure")
    scale = scale_for(record, check_signal(signal))
    require_matplotlib("tokens_figure")
    import matplotlib as mpl
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

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
    rule = decision_rule(record)
    header = 1.05 + (0.3 if rule else 0.0)
    total = header + sum(sum(b) + 0.3 for b in blocks) + (0.5 if not rounds else 0.1)
    fig = Figure(figsize=(_FIG_W, total))
    top = total  # inches from the bottom

    def axes_at(y_top: float, height: float, width: float = text_w) -> Axes:
        box = (_SIDE / _FIG_W, (y_top - height) / total, width / _FIG_W, height / total)
        return fig.add_axes(box)

    fig.text(
        _SIDE / _FIG_W,
        (top - 0.25) / total,
        printable(f"{method_title(record)}: {record.question}"),
        fontsize=11,
        fontweight="bold",
        va="center",
    )
    cax = axes_at(top - 0.55, 0.14, width=3.2)
    mappable = ScalarMappable(Normalize(scale.lo, scale.hi), mpl.colormaps[scale.cmap])
    bar = fig.colorbar(mappable, cax=cax, orientation="horizontal")
    bar.set_label(signal_spec(record, signal).label, fontsize=8, labelpad=1)
    bar.ax.tick_params(labelsize=7)
    if scale.threshold is not None:
        cax.axvline(scale.threshold, color="#c0001a", linestyle="--", linewidth=1.5)
    if rule:  # how the method decides, in words
        fig.text(
            _SIDE / _FIG_W,
            (top - 0.95) / total,
            printable(textwrap.shorten(f"Rule: {rule}.", 190, placeholder="…")),
            fontsize=8,
            style="italic",
            color="#444444",
            va="center",
        )
    handles: list[Artist] = [
        Patch(facecolor="white", edgecolor="#111111", linewidth=2, label="crossed the threshold"),
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


def _round_title(record: RecordedRun, round_: Round) -> str:
    decision = round_.decision
    symbol = threshold_symbol(record)
    if decision is not None and decision.retrieves:
        score = ""
        if decision.score is not None and decision.threshold is not None:
            relation = ">" if decision.score > decision.threshold else "<"
            score = f" ({decision.score:.3g} {relation} {symbol} = {decision.threshold:g})"
        retrieval = round_.retrieval
        query = f', query "{retrieval.query}"' if retrieval is not None else ""
        text = f"Round {round_.index + 1}: retrieval{score}{query}"
    else:
        route = ROUTES.get(decision.route, decision.route) if decision is not None else ""
        text = f"Round {round_.index + 1}: no retrieval ({route})"
        if round_.uncertainty is not None and record.threshold is not None:
            text += f"; U = {round_.uncertainty:.3g}, {symbol} = {record.threshold:g}"
    text = printable(text)
    return text if len(text) <= 130 else text[:129] + "…"


def _draw_text_panel(
    ax: Axes, round_: Round, placed: list[tuple[int, float, str]], scale: Scale, height: float
) -> None:
    from matplotlib.patches import Rectangle

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


def _draw_bars(ax: Axes, record: RecordedRun, round_: Round, scale: Scale) -> None:
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
            f" {threshold_symbol(record)} = {scale.threshold:g}",
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
    ax.set_ylabel(scale.spec.short, fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _round_scores(
    record: RecordedRun,
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


def timeline_figure(record: RecordedRun) -> Figure:
    """Rounds on x, the need score against the threshold, retrievals marked.

    Scores the policy reported with its decision are filled; scores recomputed from the
    draft (rounds that did not retrieve report none) are hollow.

    Args:
        record: The run.

    Returns:
        A matplotlib figure.

    Raises:
        ImportError: matplotlib is not installed (the ``plots`` extra).
    """
    check_record(record, "timeline_figure")
    require_matplotlib("timeline_figure")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

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
    label = signal_spec(record, found[0]).label if found is not None else "need score"
    if found is not None and found[0] in ("rind", "probability"):
        label = ("max " if found[1] == "above" else "min ") + label
    ax.set_ylabel(label, fontsize=9)
    ax.tick_params(labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    direction = f" (retrieve when {found[1]})" if found is not None else ""
    ax.set_title(
        f"{method_title(record)}: need score per round{direction}", fontsize=10, loc="left"
    )
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
            Line2D(
                [],
                [],
                color="#c0001a",
                linestyle="--",
                label=f"threshold {threshold_symbol(record)}",
            ),
            Patch(facecolor="#ffe1cc", label="round retrieved"),
        ],
        loc="lower center",
        bbox_to_anchor=(0.5, -0.01),
        ncols=2,
        fontsize=8,
        frameon=False,
    )
    return fig
