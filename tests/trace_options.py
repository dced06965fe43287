"""Test helper: one ``generate_trace`` call's options written as keywords."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions

_DECODING = {f.name for f in fields(DecodingOptions)}
_CAPTURE = {f.name for f in fields(CaptureOptions)}
_CALL = {"n", "include_greedy", "on_token"}


def trace_options(model: Any, **options: Any) -> dict[str, Any]:
    """``generate_trace`` arguments: ``model.decoding`` with the decoding keywords
    replaced, a ``CaptureOptions`` of the capture keywords, and ``n`` / ``include_greedy``
    / ``on_token`` as they are."""
    unknown = set(options) - _DECODING - _CAPTURE - _CALL
    assert not unknown, f"unknown generate_trace options {sorted(unknown)}"
    decoding = {k: v for k, v in options.items() if k in _DECODING}
    if "stop" in decoding:
        decoding["stop"] = tuple(decoding["stop"])
    base: DecodingOptions = model.decoding
    if "max_new_tokens" in decoding and "min_new_tokens" not in decoding:
        decoding["min_new_tokens"] = min(base.min_new_tokens, decoding["max_new_tokens"])
    call = {k: v for k, v in options.items() if k in _CALL}
    return {
        "decoding": replace(base, **decoding),
        "capture": CaptureOptions(**{k: v for k, v in options.items() if k in _CAPTURE}),
        **call,
    }
