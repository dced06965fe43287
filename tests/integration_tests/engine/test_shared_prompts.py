"""A call's samples read one shared copy of its prompt and decode what copies decode."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.engine import runner
from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.engine.request import DecodeRequest
from langchain_adaptive_rag.engine.runner import decode_together
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions
from tests.helpers.engine_calls import PROMPTS, assert_same

SAMPLING = DecodingOptions(max_new_tokens=10, do_sample=True, top_k=20, top_p=0.9, seed=3)
REQUESTS: list[dict[str, Any]] = [  # (prompt, samples, greedy first, options)
    {"prompt": PROMPTS[1], "n": 4, "include_greedy": True, "decoding": SAMPLING},
    {"prompt": PROMPTS[0], "n": 1, "decoding": DecodingOptions(max_new_tokens=7, stop=(" the",))},
    {"prompt": PROMPTS[3], "n": 3, "decoding": replace(SAMPLING, seed=9, min_new_tokens=3)},
    {"prompt": PROMPTS[5], "n": 2, "include_greedy": True, "decoding": SAMPLING},
]


def decoders(chat: ChatTransformers, capture: CaptureOptions) -> list[DecodeRequest]:
    return [
        DecodeRequest(
            chat.hf_model,
            chat.hf_tokenizer,
            chat.encode(r["prompt"]),
            n=r["n"],
            include_greedy=r.get("include_greedy", False),
            decoding=r["decoding"],
            capture=capture,
        )
        for r in REQUESTS
    ]


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2", "gemma"])
@pytest.mark.parametrize("kernel", ["eager", "sdpa"])
def test_samples_reading_one_prompt_decode_what_their_own_copies_decode(
    tiny_model_dirs: dict[str, Path], arch: str, kernel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = ChatTransformers(model=str(tiny_model_dirs[arch]), attn_implementation=kernel)
    capture = CaptureOptions(hidden=True, hidden_at="eos")
    copies = decoders(chat, capture)
    list(decode_together(chat.hf_model, copies, capture=capture, share_prompts=False))
    widths: list[tuple[int, int]] = []  # (own columns, prompt columns) of each step
    step = runner.BatchRunner._step

    def watched(loop: Any, tokens: list[int]) -> None:
        step(loop, tokens)
        widths.append((loop.mask.shape[1], loop.prompts.mask.shape[1]))

    monkeypatch.setattr(runner.BatchRunner, "_step", watched)
    shared = decoders(chat, capture)
    list(decode_together(chat.hf_model, shared, capture=capture))
    for got, want in zip(shared, copies, strict=True):
        assert_same(got.traces, want.traces)
    prompt = max(len(chat.encode(r["prompt"])) for r in REQUESTS)
    assert widths[0][1] == prompt  # the prompts are held once, apart
    longest = max(r["decoding"].max_new_tokens for r in REQUESTS) + 1  # + an EOS read
    single = len(chat.encode(REQUESTS[1]["prompt"]))  # the single-sample call keeps its own
    assert max(own for own, _ in widths) <= single + longest


def test_sliding_window_models_and_attention_captures_keep_a_copy_per_sample(
    tiny_model_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mistral = ChatTransformers(model=str(tiny_model_dirs["mistral"]))
    assert not ModelCapabilities.of(mistral.hf_model).shares_prompts  # windowed layers
    chat = ChatTransformers(model=str(tiny_model_dirs["llama"]), attn_implementation="sdpa")
    assert ModelCapabilities.of(chat.hf_model).shares_prompts
    capture = CaptureOptions(attention=True, hidden=True)
    copies = decoders(chat, capture)
    list(decode_together(chat.hf_model, copies, capture=capture, share_prompts=False))
    arranged: list[int] = []
    arrange = runner.SharedPrompts.arrange

    def watched(prompts: Any, requests: list[int]) -> Any:
        arranged.append(len(prompts.owners))
        return arrange(prompts, requests)

    monkeypatch.setattr(runner.SharedPrompts, "arrange", watched)
    loop = decoders(chat, capture)
    list(decode_together(chat.hf_model, loop, capture=capture))
    for got, want in zip(loop, copies, strict=True):
        assert_same(got.traces, want.traces)  # attention rows over every key, as before
    assert not any(arranged)


def test_calls_joining_a_loop_that_reads_shared_prompts_decode_as_alone(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), attn_implementation="sdpa")
    capture = CaptureOptions(hidden=True, hidden_at="eos")
    alone = decoders(chat, capture)
    for d in alone:
        list(decode_together(chat.hf_model, [d], capture=capture, share_prompts=False))
    running, *late = decoders(chat, capture)  # sampling call first, then three more
    steps = {"n": 0}

    def admit(rows: int, longest: int | None) -> list[DecodeRequest]:
        steps["n"] += 1
        if steps["n"] == 3:
            return late[:1]  # a single-sample call joins the shared prompt's rows
        return late[1:] if steps["n"] == 5 else []  # then two multi-sample calls

    list(decode_together(chat.hf_model, [running], capture=capture, admit=admit))
    for got, want in zip([running, *late], alone, strict=True):
        assert_same(got.traces, want.traces)
