"""Prefills that start from stored prompt prefixes give what full prefills give."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.engine.prefix_cache import PrefixCache
from langchain_adaptive_rag.engine.request import DecodeRequest
from langchain_adaptive_rag.engine.runner import decode_alone, decode_together
from langchain_adaptive_rag.evaluation import load_chat_model
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions
from tests.helpers.engine_calls import assert_same, run_together
from tests.helpers.families import WINDOWED_FAMILIES

EXEMPLARS = (
    "Question: When was Anna Berg born?\nAnswer: Anna Berg was born in 1931. So the answer "
    "is 1931.\nQuestion: Who was born first, Carl Lind or Maria Holm?\nAnswer: Carl Lind "
    "was born in 1902. Maria Holm was born in 1899. So the answer is Maria Holm.\n"
)
PROMPTS = [
    EXEMPLARS + "Question: Where was Carl Lind born?\nAnswer:",
    EXEMPLARS + "Context:\n[1] Carl Lind was born in Oslo.\nQuestion: Where was Carl Lind born?"
    "\nAnswer: Carl",
    "Maria Holm",  # shares nothing: a full prefill in the same batch
    EXEMPLARS + "Question: Where was Carl Lind born?\nAnswer: He was",
]
REQUESTS: list[dict[str, Any]] = [
    {"decoding": DecodingOptions(max_new_tokens=8), "capture": CaptureOptions(attention=True)},
    {"decoding": DecodingOptions(max_new_tokens=6), "capture": CaptureOptions(hidden=True)},
    {"decoding": DecodingOptions(max_new_tokens=5, top_logprobs=2)},
    {
        "decoding": DecodingOptions(max_new_tokens=6, do_sample=True, seed=5),
        "n": 3,
        "include_greedy": True,
        "capture": CaptureOptions(attention=True, hidden=True, hidden_at="eos"),
    },
]
CAPTURE = CaptureOptions(attention=True, hidden=True, hidden_at="eos")


def _decoders(model: Any, tokenizer: Any) -> list[DecodeRequest]:
    return [
        DecodeRequest(model, tokenizer, tokenizer(p)["input_ids"], **options)
        for p, options in zip(PROMPTS, REQUESTS, strict=True)
    ]


def _decode(model: Any, decoders: list[DecodeRequest], cache: PrefixCache | None) -> None:
    list(decode_together(model, decoders, capture=CAPTURE, prefix_cache=cache))


@pytest.mark.parametrize("architecture", ["llama", "qwen2", "gpt2", "gemma", "mistral"])
def test_prefills_from_stored_prefixes_equal_full_prefills(
    tiny_model_dirs: dict[str, Path], architecture: str
) -> None:
    path = tiny_model_dirs[architecture]
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa").eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    own = replace(ModelCapabilities.of(model), window=0, window_masks=None)
    full = _decoders(model, tokenizer)  # each alone on the model's own cache
    for decoder in full:
        list(decode_together(model, [decoder], capture=CAPTURE, capabilities=own))
    cache = PrefixCache(2**26, min_tokens=8)
    alone = _decoders(model, tokenizer)
    for decoder in alone:  # each after the others: later prompts find earlier ones
        _decode(model, [decoder], cache)
    together = _decoders(model, tokenizer)
    _decode(model, together, cache)  # mixed: long and short stored prefixes, and none
    for got in (alone, together):
        for a, b in zip(got, full, strict=True):
            assert_same(a.traces, b.traces)
    # Mistral too: its prompts pass its 16-position window, and the loop masks it
    assert cache.stats.hits == 2 + 3  # alone: prompts 2 and 4; together: all but one
    assert cache.stats.reused_share > 0.5


def test_prompts_needing_very_different_prefills_run_in_separate_passes(
    tiny_model_dirs: dict[str, Path],
) -> None:
    path = tiny_model_dirs["llama"]
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    prompts = [EXEMPLARS * 4 + "Question: Where?\nAnswer:", "Carl", EXEMPLARS * 3]

    def decoders() -> list[DecodeRequest]:
        options = DecodingOptions(max_new_tokens=4)
        return [
            DecodeRequest(model, tokenizer, tokenizer(p)["input_ids"], decoding=options)
            for p in prompts
        ]

    alone = decoders()
    for decoder in alone:
        decode_alone(decoder)
    shapes: list[tuple[int, ...]] = []
    hook = model.register_forward_pre_hook(
        lambda _module, _args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    try:
        together = decoders()
        list(decode_together(model, together))
    finally:
        hook.remove()
    lengths = [len(tokenizer(p)["input_ids"]) for p in prompts]
    assert shapes[:2] == [(2, lengths[0]), (1, lengths[1])]  # the short one is not padded
    assert all(shape[1] == 1 for shape in shapes[2:])  # then one decoding step at a time
    for a, b in zip(together, alone, strict=True):
        assert_same(a.traces, b.traces)


def test_chat_model_keeps_prompts_within_its_budget(llama_dir: Path) -> None:
    off = ChatTransformers(model=str(llama_dir), prefix_cache_mib=0)
    assert off.prefix_cache is None
    assert load_chat_model(str(llama_dir), prefix_cache_mib=0).prefix_cache is None
    chat = ChatTransformers(model=str(llama_dir), max_new_tokens=6)
    cache = chat.prefix_cache
    assert cache is not None and cache.max_bytes == 512 * 2**20
    first = chat.generate_trace(PROMPTS[0])
    again = chat.generate_trace(PROMPTS[0])
    assert_same(again, first)
    assert cache.stats.hits == 1 and len(cache) == 1
    chat.clear_prefix_cache()
    assert len(cache) == 0 and cache.nbytes == 0


def test_concurrent_calls_reuse_prefixes_and_get_what_a_call_alone_gets(
    llama_dir: Path,
) -> None:
    plain = ChatTransformers(model=str(llama_dir), prefix_cache_mib=0)
    six = DecodingOptions(max_new_tokens=6)
    wanted = [plain.generate_trace(p, decoding=six) for p in PROMPTS]
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True)
    chat.generate_trace(EXEMPLARS, decoding=DecodingOptions(max_new_tokens=1))
    calls = [lambda p=p: chat.generate_trace(p, decoding=six) for p in PROMPTS]
    got = run_together(chat, calls)
    for a, b in zip(got, wanted, strict=True):
        assert_same(a, b)
    cache = chat.prefix_cache
    assert cache is not None and cache.stats.hits >= 3  # every prompt but "Maria Holm"
    assert chat.scheduler is not None
    chat.scheduler.close()


@pytest.mark.parametrize("family", WINDOWED_FAMILIES)
def test_a_windowed_model_reuses_prefixes_past_its_window(
    windowed_dirs: dict[str, Path], family: str
) -> None:
    """Prompts past a tiny model's 16-position window are stored and reused, and give what
    the model's own (windowed) cache gives: Mistral, Gemma 2, Gemma 3 and GPT-OSS shapes."""
    path = windowed_dirs[family]
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    own = replace(ModelCapabilities.of(model), window=0, window_masks=None)

    def decoder(prompt: str, budget: int) -> DecodeRequest:
        ids = tokenizer(prompt)["input_ids"]
        return DecodeRequest(model, tokenizer, ids, decoding=DecodingOptions(max_new_tokens=budget))

    long = EXEMPLARS + "Question: Where was Carl Lind born?\nAnswer:"
    plan = [(long, 6), (long + " He", 5), (EXEMPLARS, 4)]
    assert len(tokenizer(long)["input_ids"]) > 16
    want = [decode_alone(decoder(p, n), capabilities=own) for p, n in plan]
    cache = PrefixCache(2**26, min_tokens=2)
    got = [decoder(p, n) for p, n in plan]
    for d in got:  # later prompts start with earlier ones
        _decode(model, [d], cache)
    assert cache.stats.hits == 2 and cache.stats.reused_share > 0.5
    for d, w in zip(got, want, strict=True):
        assert_same(d.traces, w)
    # together: stored prefixes of different lengths leave padding inside rows, and the
    # windowed layers' masks count each row's own positions past that gap
    together = [decoder(p, n) for p, n in plan]
    _decode(model, together, cache)
    assert cache.stats.hits == 5
    for d, w in zip(together, want, strict=True):
        assert_same(d.traces, w)
