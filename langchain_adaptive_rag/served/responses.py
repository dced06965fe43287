"""A served model's response as a [`GenerationTrace`][].

Servers return text, a finish reason and, when asked, each generated token with its
log-probability and its top-k alternatives, in one of two OpenAI shapes: the chat one
(``response_metadata["logprobs"]["content"]``: ``{"token", "logprob", "top_logprobs":
[{"token", "logprob"}]}`` per token; Ollama gives the list itself) and the completions
one (``generation_info["logprobs"]``: ``tokens``, [`token_logprobs`][], ``top_logprobs`` as
``{token: logprob}`` per token). Token ids are not returned: they are ``-1``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from langchain_adaptive_rag.options import FinishReason, GenerationTrace
from langchain_adaptive_rag.signals import top_k_entropy

__all__ = ["TokenLogprob", "read_logprobs", "trace_from_response", "word_pieces"]

_WORD_PIECE = re.compile(r"\s*\S+|\s+")


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token as a server reports it."""

    token: str
    logprob: float
    top: tuple[float, ...]
    """Log-probabilities of the top-k alternatives (may include the token itself)."""
    top_tokens: tuple[str, ...] = ()
    """The alternatives' text, in the order of ``top``."""


def read_logprobs(raw: object) -> list[TokenLogprob] | None:
    """The tokens of a chat or completions ``logprobs`` payload (``None``: none given).

    Args:
        raw: ``{"content": [...]}`` or a list of token entries (chat), or
            ``{"tokens", "token_logprobs", "top_logprobs"}`` (completions).

    Returns:
        One entry per generated token, or ``None`` when ``raw`` holds no tokens.
    """
    if isinstance(raw, Mapping) and "content" in raw:
        raw = raw["content"]
    if isinstance(raw, Mapping) and "tokens" in raw:
        tops = raw.get("top_logprobs") or [None] * len(raw["tokens"])
        return [
            TokenLogprob(
                token=str(token),
                logprob=float(logprob) if logprob is not None else float("nan"),
                top=tuple(float(v) for v in (top or {}).values()),
                top_tokens=tuple(str(k) for k in (top or {})),
            )
            for token, logprob, top in zip(raw["tokens"], raw["token_logprobs"], tops, strict=False)
        ]
    if isinstance(raw, Sequence) and not isinstance(raw, str) and raw:
        return [
            TokenLogprob(
                token=str(_field(entry, "token")),
                logprob=float(_field(entry, "logprob")),
                top=tuple(
                    float(_field(alt, "logprob")) for alt in _field(entry, "top_logprobs") or ()
                ),
                top_tokens=tuple(
                    str(_field(alt, "token")) for alt in _field(entry, "top_logprobs") or ()
                ),
            )
            for entry in raw
        ]
    return None


def _field(entry: object, name: str) -> Any:
    """``entry[name]`` of a dict, or the attribute of a response object."""
    if isinstance(entry, Mapping):
        return entry.get(name)
    return getattr(entry, name, None)


def word_pieces(text: str) -> list[str]:
    """``text`` cut into words, each with the whitespace before it (they join to it)."""
    return _WORD_PIECE.findall(text)


def trace_from_response(
    text: str,
    finish_reason: FinishReason,
    logprobs: Sequence[TokenLogprob] | None,
    *,
    stop_string: str | None,
    max_new_tokens: int,
    generated_tokens: int | None = None,
    prompt_tokens: int | None = None,
) -> GenerationTrace:
    """The trace of one served generation.

    The tokens are the server's and are cut to those that spell ``text`` (a server may
    list the tokens of the stop string it cut, or a token that holds the text's end and
    more); past ``max_new_tokens`` they are cut to the budget (a server that ignores
    ``max_tokens``), which ends the trace with ``"length"``. Without log-probabilities
    the text's words stand in for tokens, with ``nan`` log-probabilities and entropies.

    Args:
        text: The generated text (stop string cut).
        finish_reason: ``"stop"`` or ``"length"``.
        logprobs: The server's tokens, or ``None``.
        stop_string: The stop string that ended it (``None``: unknown or none).
        max_new_tokens: The token budget asked for.
        generated_tokens: The server's count of generated tokens (its usage), which
            includes the tokens of a stop string it cut: ``token_ids`` has that many
            entries, as [`ChatTransformers`][] keeps a stop string's tokens there.
        prompt_tokens: The server's count of the prompt's tokens (its usage):
            ``prompt_ids`` has that many entries, all ``-1`` (the ids are the server's);
            ``None``: not reported, none.

    Returns:
        The trace; its entropies are top-k lower bounds (``entropy_outside_mass``).
    """
    entries = list(logprobs) if logprobs is not None else None
    if entries is None:
        pieces = word_pieces(text)
        values = [float("nan")] * len(pieces)
        tops: list[tuple[float, ...]] = [()] * len(pieces)
        named: list[tuple[str, ...]] = [()] * len(pieces)
    else:
        pieces, values, tops, named = _pieces_spelling(text, entries)
    if len(pieces) > max_new_tokens:
        budget = max_new_tokens
        pieces, values = pieces[:budget], values[:budget]
        tops, named = tops[:budget], named[:budget]
        text, finish_reason, stop_string = "".join(pieces), "length", None
    entropies, outside = [], []
    for value, top in zip(values, tops, strict=True):
        if np.isnan(value):
            entropies.append(float("nan"))
            outside.append(float("nan"))
            continue
        estimate, mass = top_k_entropy(top, value)
        entropies.append(estimate)
        outside.append(mass)
    count = len(pieces)
    if generated_tokens is not None and finish_reason == "stop":
        count = max(count, min(generated_tokens, max_new_tokens))
    width = max((len(top) for top in tops), default=0)
    ranked = [_ranked(top, names) for top, names in zip(tops, named, strict=True)]
    return GenerationTrace(
        prompt_ids=np.full(max(prompt_tokens or 0, 0), -1, dtype=np.int64),
        token_ids=np.full(count, -1, dtype=np.int64),
        tokens=pieces,
        text=text,
        logprobs=np.asarray(values, dtype=np.float64),
        entropies=np.asarray(entropies, dtype=np.float64),
        finish_reason=finish_reason,
        stop_string=stop_string if finish_reason == "stop" else None,
        top_logprobs=_padded([values for values, _ in ranked], width) if width else None,
        top_tokens=[names for _, names in ranked] if any(named) else None,
        entropy_outside_mass=np.asarray(outside, dtype=np.float64),
    )


def _pieces_spelling(
    text: str, entries: Sequence[TokenLogprob]
) -> tuple[list[str], list[float], list[tuple[float, ...]], list[tuple[str, ...]]]:
    """The leading tokens whose pieces spell ``text``, the last one cut to its end.

    Text the tokens do not reach (a server that lists fewer tokens than it wrote) is one
    more piece without a log-probability.
    """
    pieces: list[str] = []
    values: list[float] = []
    tops: list[tuple[float, ...]] = []
    named: list[tuple[str, ...]] = []
    used = 0
    for entry in entries:
        if used >= len(text):
            break
        piece = entry.token[: len(text) - used]
        if not piece:  # a token that spells nothing (a special token)
            continue
        if not text.startswith(piece, used):
            break
        pieces.append(piece)
        values.append(entry.logprob)
        tops.append(entry.top)
        named.append(entry.top_tokens)
        used += len(piece)
    if used < len(text):
        pieces.append(text[used:])
        values.append(float("nan"))
        tops.append(())
        named.append(())
    return pieces, values, tops, named


def _ranked(
    top: tuple[float, ...], names: tuple[str, ...]
) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """The alternatives most likely first, their text kept beside their log-probability."""
    if len(names) != len(top):  # no text for them: the values alone, ranked
        return tuple(sorted(top, reverse=True)), ()
    pairs = sorted(zip(top, names, strict=True), key=lambda pair: -pair[0])
    return tuple(v for v, _ in pairs), tuple(n for _, n in pairs)


def _padded(tops: Sequence[tuple[float, ...]], width: int) -> np.ndarray:
    """``(T, width)`` log-probabilities (each row ranked already), ``-inf`` past a row's."""
    out = np.full((len(tops), width), -np.inf, dtype=np.float64)
    for row, top in enumerate(tops):
        out[row, : len(top)] = top
    return out
