"""A batched decoding loop with weight-first linear layers gives transformers' results.

The tiny model is far below the size at which the loop routes its layers, so the size
is lowered for it; the reference is each prompt alone through ``model.generate``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from langchain_adaptive_rag.engine import weight_major
from langchain_adaptive_rag.engine.request import DecodeRequest
from langchain_adaptive_rag.engine.runner import decode_together
from langchain_adaptive_rag.options import DecodingOptions

PROMPTS = (
    "Question: When was Anna Berg born?\nAnswer:",
    "Context: Blue Harbour is a 1962 film directed by Anna Berg.\nQuestion: Who directed it?",
    "Carl Lind was born in Oslo in",
)
BUDGET = 8


def test_rows_decoded_weight_first_equal_generate(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(weight_major, "MIN_MODEL_BYTES", 0)
    rows_seen: list[int] = []
    original = weight_major.weight_major_linear

    def counted(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        rows_seen.append(x.numel() // x.shape[-1])
        return original(layer, x)

    monkeypatch.setattr(weight_major, "weight_major_linear", counted)
    model = transformers.AutoModelForCausalLM.from_pretrained(llama_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(llama_dir)
    decoding = DecodingOptions(max_new_tokens=BUDGET, min_new_tokens=BUDGET)
    requests = [
        DecodeRequest(model, tokenizer, tokenizer(p)["input_ids"], decoding=decoding)
        for p in PROMPTS
    ]
    list(decode_together(model, requests))
    assert len(PROMPTS) in rows_seen  # the steps of three rows ran weight-first
    assert all(vars(m).get("forward") is None for m in model.modules())  # restored

    for prompt, request in zip(PROMPTS, requests, strict=True):
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=BUDGET,
                min_new_tokens=BUDGET,
                pad_token_id=3,
                output_logits=True,
                return_dict_in_generate=True,
            )
        tokens = out.sequences[0, ids.shape[1] :].tolist()
        logprobs = [
            torch.log_softmax(score[0].float(), dim=-1)[t].item()
            for score, t in zip(out.logits, tokens, strict=True)
        ]
        (trace,) = request.traces
        assert trace.token_ids.tolist() == tokens
        np.testing.assert_allclose(trace.logprobs, logprobs, atol=1e-5)
