"""Decoding helpers: option validation, stop-string hold-back, sampling filters."""

from __future__ import annotations

import math

import pytest
import torch

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.generation import (
    DecodingOptions,
    _clip_pieces,
    _longest_stop_prefix,
    _warp,
)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens must be >= 1, got 0"),
        ({"max_new_tokens": 4, "min_new_tokens": 5}, "min_new_tokens must be in"),
        ({"temperature": -1.0}, "temperature must be >= 0"),
        ({"top_k": 0}, "top_k must be >= 1"),
        ({"top_p": 0.0}, "top_p must be in"),
        ({"stop": ("",)}, "stop strings must be non-empty"),
        ({"top_logprobs": 21}, "top_logprobs must be in"),
    ],
)
def test_decoding_options_reject_bad_values(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=message):
        DecodingOptions(**kwargs)  # type: ignore[arg-type]


def test_sampling_needs_do_sample_and_positive_temperature() -> None:
    assert not DecodingOptions().sampling
    assert DecodingOptions(do_sample=True).sampling
    assert not DecodingOptions(do_sample=True, temperature=0.0).sampling


def test_longest_stop_prefix() -> None:
    assert _longest_stop_prefix("So the ans", ["the answer is"]) == 7  # "the ans"
    assert _longest_stop_prefix("hello\n", ["\n\n"]) == 1
    assert _longest_stop_prefix("hello", ["\n\n"]) == 0
    assert _longest_stop_prefix("ab", ["abc", "bcd"]) == 2


def test_clip_pieces() -> None:
    assert _clip_pieces(["ab", "cd", "ef"], 3) == ["ab", "c", ""]
    assert _clip_pieces(["ab", "", "cd"], 4) == ["ab", "", "cd"]


def test_top_k_keeps_k_most_likely() -> None:
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0]])
    warped = _warp(logits, DecodingOptions(do_sample=True, top_k=2))
    assert torch.isinf(warped[0, [0, 3]]).all()
    assert warped[0, 1].item() == 3.0 and warped[0, 2].item() == 2.0


def test_top_p_keeps_smallest_set_reaching_p() -> None:
    # p = (0.5, 0.3, 0.2): top_p 0.7 keeps the first two (0.5 < 0.7 <= 0.8).
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    warped = _warp(logits, DecodingOptions(do_sample=True, top_p=0.7))
    kept = torch.isfinite(warped[0]).tolist()
    assert kept == [True, True, False]


def test_temperature_scales_logits() -> None:
    logits = torch.tensor([[2.0, 4.0]])
    warped = _warp(logits, DecodingOptions(do_sample=True, temperature=2.0))
    assert warped.tolist() == [[1.0, 2.0]]
    assert torch.softmax(warped, -1)[0, 1].item() == pytest.approx(1 / (1 + math.exp(-1)), abs=1e-6)
