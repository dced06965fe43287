"""The engine against transformers' own ``generate`` on every model family it serves.

For each tiny family (attention, sliding window, latent attention, state-space, hybrid,
mixture of experts): greedy tokens, an end-of-sequence token, ``min_new_tokens`` holding
it back, and a stop string, each as ``model.generate(do_sample=False)`` gives them, on a
short prompt and on one longer than Mistral's 16-token window. The real Gemma 3 270M
(sliding-window and global layers, a prompt past its 512-token window) is checked the
same way in test_real_model.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.options import DecodingOptions
from tests.helpers.families import FAMILIES

PROMPTS = (
    "Question: When was Anna Berg born?\nAnswer:",
    "Context: Blue Harbour is a 1962 film directed by Anna Berg. Anna Berg (born 1931) is "
    "a Swedish film director. Carl Lind was born in Oslo in 1902.\nQuestion: When was the "
    "director of Blue Harbour born?\nAnswer:",  # longer than Mistral's 16-token window
)
BUDGET = 12


def _load(path: Path) -> tuple[Any, Any]:
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    return model.eval(), transformers.AutoTokenizer.from_pretrained(path)


def _generate(model: Any, encoder: Any, prompt: str, **options: Any) -> list[int]:
    """transformers' greedy tokens, up to and without the first end-of-sequence token."""
    ids = encoder(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=BUDGET,
            pad_token_id=3,
            **options,
        )
    tokens = out[0, ids.shape[1] :].tolist()
    eos = model.generation_config.eos_token_id
    ends = {eos} if isinstance(eos, int) else set(eos)
    return tokens[: next((i for i, t in enumerate(tokens) if t in ends), len(tokens))]


def _engine(model: Any, tokenizer: Any, prompt: str, **options: Any) -> Any:
    chat = ChatTransformers(model=model, tokenizer=tokenizer)
    decoding = DecodingOptions(max_new_tokens=BUDGET, **options)
    return chat.generate_trace(prompt, decoding=decoding)[0]


@pytest.mark.parametrize("prompt", PROMPTS, ids=["short", "past-window"])
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_tokens_equal_generate(
    family_dirs: dict[str, Path], family: str, prompt: str
) -> None:
    model, tokenizer = _load(family_dirs[family])
    reference = _generate(model, tokenizer, prompt)
    trace = _engine(model, tokenizer, prompt)
    assert trace.token_ids.tolist() == reference
    assert trace.finish_reason == ("length" if len(reference) == BUDGET else "stop")


@pytest.mark.parametrize("family", FAMILIES)
def test_an_end_token_and_min_new_tokens_as_generate(
    family_dirs: dict[str, Path], family: str
) -> None:
    model, tokenizer = _load(family_dirs[family])
    prompt = PROMPTS[1]
    free = _generate(model, tokenizer, prompt)
    end = free[3]  # the fourth token becomes an end-of-sequence token
    model.generation_config.eos_token_id = [2, end]
    stopped = _generate(model, tokenizer, prompt)
    assert stopped == free[: free.index(end)]
    trace = _engine(model, tokenizer, prompt)
    assert trace.token_ids.tolist() == stopped and trace.finish_reason == "stop"
    held = _generate(model, tokenizer, prompt, min_new_tokens=6)  # the end is held back
    assert len(held) >= 6
    trace = _engine(model, tokenizer, prompt, min_new_tokens=6)
    assert trace.token_ids.tolist() == held


def _stop_string(tokenizer: Any, tokens: list[int]) -> tuple[str, int] | None:
    """A printable token text of the generation, and how many of its tokens it takes
    until that text first appears (``None``: no token text is printable)."""
    for k in range(2, len(tokens)):
        piece = tokenizer.decode(tokens[k : k + 1], skip_special_tokens=True)
        if piece.strip() and piece.isprintable() and "\ufffd" not in piece:
            count = next(
                c
                for c in range(1, len(tokens) + 1)
                if piece in tokenizer.decode(tokens[:c], skip_special_tokens=True)
            )
            return piece, count
    return None


@pytest.mark.parametrize("family", FAMILIES)
def test_a_stop_string_as_generate(family_dirs: dict[str, Path], family: str) -> None:
    """A stop string in the generation ``generate`` gives: the tokens up to the one that
    completes it kept, its text cut, decoding over. (transformers' ``stop_strings`` reads
    a byte-level vocabulary it did not train, so the cut is taken from its greedy tokens.)"""
    model, tokenizer = _load(family_dirs[family])
    for prompt in PROMPTS:
        free = _generate(model, tokenizer, prompt)
        chosen = _stop_string(tokenizer, free)
        if chosen is not None:
            break
    assert chosen is not None, f"no printable token text in {tokenizer.decode(free)!r}"
    stop, count = chosen
    trace = _engine(model, tokenizer, prompt, stop=(stop,))
    assert trace.token_ids.tolist() == free[:count]  # the stop string's tokens are kept
    assert trace.text == tokenizer.decode(free[:count], skip_special_tokens=True).split(stop)[0]
    assert trace.stop_string == stop and trace.finish_reason == "stop"
