"""Shared pieces of the token views: signal names, colour scales, thresholds, query words."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import AVAILABLE_METHODS, display_name, policy_class
from langchain_adaptive_rag.signals import (
    bare_word,
    folded_word,
    is_content_word,
    token_sentences,
)
from langchain_adaptive_rag.visualize._colours import colormap_hex
from langchain_adaptive_rag.visualize.record import RecordedRun, Round, TokenRecord, WordRecord

__all__ = [
    "ROUTES",
    "Direction",
    "Scale",
    "Signal",
    "SignalSpec",
    "check_record",
    "check_signal",
    "decision_rule",
    "default_signal",
    "derived_round_score",
    "printable",
    "query_words",
    "scale_for",
    "signal_spec",
    "text_colour",
    "threshold_symbol",
    "thresholded_signal",
    "token_value",
    "trigger_tokens",
]

Signal = Literal["entropy", "probability", "rind", "attention", "uncertainty"]
"""Token signals a view can colour by."""

Direction = Literal["above", "below"]
"""Whether a score retrieves when it is above or below its threshold."""


@dataclass(frozen=True)
class SignalSpec:
    """How a signal is named and coloured."""

    label: str
    """Axis and legend label."""
    short: str
    """Symbol used in tooltips."""
    cmap: str
    """Colour map: a matplotlib name that [`colormap_hex`][] samples; its dark end is the
    uncertain end."""
    unit_range: bool
    """The signal lies in ``[0, 1]``."""


SPECS: dict[str, SignalSpec] = {
    "entropy": SignalSpec("entropy H (nats)", "H", "YlOrRd", False),
    "probability": SignalSpec("probability p", "p", "YlOrRd_r", True),
    "rind": SignalSpec("RIND s(w)", "RIND", "YlOrRd", False),
    "attention": SignalSpec("attention received a(i)", "a", "PuBu", False),
    "uncertainty": SignalSpec("step uncertainty U", "U", "YlOrRd", False),
}


def signal_spec(record: RecordedRun, signal: Signal) -> SignalSpec:
    """How ``signal`` is named in ``record``: under its method's own name, if it has one.

    The ``"rind"`` channel holds each draft word's score, RIND for DRAGIN and another
    method's word score otherwise (``MethodFacts.signal_names``).
    """
    spec = SPECS[signal]
    if record.method in AVAILABLE_METHODS:
        named = policy_class(record.method).signal_names.get(signal)
        if named is not None:
            return SignalSpec(named[0], named[1], spec.cmap, spec.unit_range)
    return spec


def check_signal(signal: str) -> Signal:
    """Validate a signal name.

    Raises:
        AdaptiveRAGError: ``signal`` is not one of [`Signal`][].
    """
    if signal not in SPECS:
        msg = (
            f"Unknown signal {signal!r}. Expected one of {', '.join(get_args(Signal))}. "
            'Fix: tokens_html(record, signal="entropy").'
        )
        raise AdaptiveRAGError(msg)
    return signal  # type: ignore[return-value]


def token_value(token: TokenRecord, signal: Signal) -> float | None:
    """The token's value of ``signal`` (``None`` when not measured or not finite)."""
    value: float | None = getattr(token, signal)
    return value if value is not None and math.isfinite(value) else None


def thresholded_signal(record: RecordedRun) -> tuple[Signal, Direction] | None:
    """Which token signal the run's threshold applies to, and in which direction.

    As the method's policy declares it: each decision with a threshold carries its
    ``signal`` and ``direction`` (``Policy.threshold_reading``); a record saved before
    decisions said so takes its method's ``threshold_signal``. ``None``: no threshold,
    or one on a score of no single token (FLARE's ``mean`` rule).
    """
    for round_ in record.rounds:
        decision = round_.decision
        if decision is None or decision.threshold is None or decision.direction is None:
            continue
        if decision.signal not in SPECS:
            return None
        return decision.signal, "below" if decision.direction == "below" else "above"  # type: ignore[return-value]
    if record.method not in AVAILABLE_METHODS:
        return None
    facts = policy_class(record.method)
    if facts.threshold_signal not in SPECS:
        return None
    return facts.threshold_signal, facts.threshold_direction  # type: ignore[return-value]


def default_signal(record: RecordedRun) -> Signal:
    """The signal that best shows the run's decisions."""
    found = thresholded_signal(record)
    if found is not None:
        return found[0]
    tokens = [t for r in record.rounds for t in r.tokens]
    for signal in ("entropy", "probability"):
        if any(getattr(t, signal) is not None for t in tokens):
            return signal
    return "entropy"


def derived_round_score(round_: Round, signal: Signal, direction: Direction) -> float | None:
    """A round's need score recomputed from its draft when the policy reported none."""
    if signal == "uncertainty":
        return round_.uncertainty if round_.uncertainty is not None else None
    values = [v for t in round_.tokens if (v := token_value(t, signal)) is not None]
    if not values:
        return None
    return max(values) if direction == "above" else min(values)


@dataclass(frozen=True)
class Scale:
    """A colour scale for one signal over one record."""

    signal: Signal
    lo: float
    hi: float
    threshold: float | None
    cmap: str
    """Colour map name (the figures' colour bars draw matplotlib's map of that name)."""
    spec: SignalSpec
    """The signal's name in the record (see [`signal_spec`][])."""

    def colour(self, value: float | None) -> str:
        """Hex colour of ``value`` (light grey when not measured)."""
        if value is None:
            return "#e6e6e6"
        return colormap_hex(self.cmap, (value - self.lo) / (self.hi - self.lo))

    def fraction(self, value: float) -> float:
        """Position of ``value`` on the scale, in ``[0, 1]``."""
        return min(1.0, max(0.0, (value - self.lo) / (self.hi - self.lo)))


def scale_for(record: RecordedRun, signal: Signal) -> Scale:
    """The colour scale of ``signal`` over every token of ``record``."""
    spec = signal_spec(record, signal)
    values = [
        v for r in record.rounds for t in r.tokens if (v := token_value(t, signal)) is not None
    ]
    found = thresholded_signal(record)
    threshold = record.threshold if found is not None and found[0] == signal else None
    if spec.unit_range:
        lo, hi = 0.0, 1.0
    else:
        lo = min([0.0, *values]) if signal != "uncertainty" else min(values, default=0.0)
        hi = max(values, default=1.0)
        if threshold is not None:
            lo, hi = min(lo, threshold), max(hi, threshold * 1.25 if threshold > 0 else threshold)
    if hi - lo < 1e-9:
        hi = lo + 1.0
    return Scale(signal, lo, hi, threshold, spec.cmap, spec)


def text_colour(background: str) -> str:
    """Black or white, whichever reads better on ``background``."""
    red, green, blue = (int(background[i : i + 2], 16) / 255 for i in (1, 3, 5))
    luminance = 0.2126 * red + 0.7152 * green + 0.0722 * blue
    return "#000000" if luminance > 0.45 else "#ffffff"


def query_words(query: str) -> set[str]:
    """Content words of a query, as [`folded_word`][] keys (case and punctuation dropped)."""
    return {
        folded_word(w) for w in re.findall(r"\S+", query) if folded_word(w) and is_content_word(w)
    }


def trigger_tokens(round_: Round) -> set[int]:
    """Indexes of the draft tokens that crossed the threshold (word, token or whole step).

    For a method that scores words (DRAGIN), every word of the triggering sentence that
    the decision lists in ``trigger_words``: exactly what crossed the threshold. For one
    whose threshold applies to a token signal (FLARE's probability), every token of the
    triggering sentence whose value crossed it in the decision's direction. Else the
    trigger's own word, token or step.
    """
    decision = round_.decision
    if decision is None or decision.trigger_position is None or not round_.tokens:
        return set()
    position = decision.trigger_position
    if not 0 <= position < len(round_.tokens):
        return set()
    crossed = _triggering_words(round_, position, decision.trigger_words)
    if crossed:
        return {i for w in crossed for i in range(w.start, min(w.end, len(round_.tokens)))}
    over = _tokens_crossing(round_, position)
    if over:
        return over
    offsets = [0]
    for token in round_.tokens:
        offsets.append(offsets[-1] + len(token.text))
    start = offsets[position]
    end = offsets[position + 1]
    word = (decision.trigger_word or "").strip()
    if word:
        found = round_.draft.find(word, start)
        if found >= 0:
            start, end = found, found + len(word)
    return {i for i in range(len(round_.tokens)) if offsets[i] < end and offsets[i + 1] > start}


_TOKEN_SIGNALS = ("probability", "entropy")
"""Signals with a value per token that a threshold may apply to (RIND's are per word,
SeaKR's ``U`` per step)."""


def _tokens_crossing(round_: Round, position: int) -> set[int]:
    """Tokens of the sentence holding ``position`` whose signal crossed the threshold."""
    decision = round_.decision
    if decision is None or decision.threshold is None or decision.signal not in _TOKEN_SIGNALS:
        return set()
    texts = [t.text for t in round_.tokens]
    start, end = next(
        ((a, b) for a, b in token_sentences(texts) if a <= position < b), (position, position + 1)
    )
    below = decision.direction == "below"
    crossed = set()
    for index in range(start, end):
        value = getattr(round_.tokens[index], decision.signal)
        if value is not None and (
            value < decision.threshold if below else value > decision.threshold
        ):
            crossed.add(index)
    return crossed


def _triggering_words(round_: Round, position: int, listed: Sequence[str]) -> list[WordRecord]:
    """The words of the sentence holding token ``position`` that the decision listed."""
    if not listed or not round_.words:
        return []
    index = next((i for i, w in enumerate(round_.words) if w.start <= position < w.end), None)
    if index is None:
        return []
    start, end = next(((a, b) for a, b in round_.sentences if a <= index < b), (index, index + 1))
    wanted = set(listed)
    return [w for w in round_.words[start:end] if bare_word(w.text) in wanted]


def printable(text: str) -> str:
    """``text`` with control characters (other than newline and tab) as hex escapes.

    Random or byte-level models emit such pieces; fonts have no glyph for them.
    """
    return "".join(
        f"\\x{ord(ch):02x}" if unicodedata.category(ch) == "Cc" and ch not in "\n\t" else ch
        for ch in text
    )


ROUTES: dict[str, str] = {
    "formulate_query": "retrieved",
    "continue_generation": "continued without retrieval",
    "draft": "accepted; next draft",
    "finalize": "accepted; finalize",
    "retrieve": "retrieved",  # records saved by earlier versions
    "continue": "continued without retrieval",
}
"""How each route of a decision reads in the views."""


def method_title(record: RecordedRun) -> str:
    """The papers' name of the record's method (``SR-RAG``), for headings and titles."""
    return display_name(record.method)


def decision_rule(record: RecordedRun) -> str:
    """The record's method's retrieval rule in words (``""`` for an unknown method)."""
    if record.method in AVAILABLE_METHODS:
        return policy_class(record.method).decision_rule
    return ""


def threshold_symbol(record: RecordedRun) -> str:
    """The threshold's symbol of the record's method (its policy's ``threshold_symbol``)."""
    if record.method in AVAILABLE_METHODS:
        return policy_class(record.method).threshold_symbol
    return "θ"


def check_record(record: object, caller: str) -> None:
    """Fail with a clear error unless ``record`` is a [`RecordedRun`][]."""
    if not isinstance(record, RecordedRun):
        msg = (
            f"{caller} received {type(record).__name__}. Expected a RunRecord. Fix: "
            "record = record_run(graph, question), or RunRecord.from_json(text)."
        )
        raise AdaptiveRAGError(msg)
