"""Captured signals equal an independent full forward pass over the final sequence."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from langchain_adaptive_rag import (
    ChatTransformers,
    GenerationTrace,
    HiddenLayerError,
    PromptTooLongError,
)
from langchain_adaptive_rag.engine.layers import decoder_layers
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions
from tests.conftest import boundary_stop

PROMPT = "Question: When was the director of film Blue Harbour born?\nAnswer:"
ATOL = 1e-5


def _load(directory: Path) -> ChatTransformers:
    model = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager")
    tokenizer = PreTrainedTokenizerFast.from_pretrained(directory)
    return ChatTransformers(model=model, tokenizer=tokenizer, max_new_tokens=24)


@pytest.fixture(scope="module", params=["llama", "qwen2", "gpt2"])
def chat(request: pytest.FixtureRequest, tiny_model_dirs: dict[str, Path]) -> ChatTransformers:
    return _load(tiny_model_dirs[request.param])


def _reference(chat: ChatTransformers, trace: GenerationTrace, extra: list[int] | None = None):
    """Full forward pass over prompt + generated (+ extra) tokens with every output on."""
    ids = [*trace.prompt_ids.tolist(), *trace.token_ids.tolist(), *(extra or [])]
    mlp_outputs: list[torch.Tensor] = []
    layer = decoder_layers(chat.hf_model)[0]
    handle = layer.mlp.register_forward_hook(lambda _m, _a, out: mlp_outputs.append(out))
    try:
        with torch.no_grad():
            out = chat.hf_model(
                input_ids=torch.tensor([ids]), output_attentions=True, output_hidden_states=True
            )
    finally:
        handle.remove()
    return out, mlp_outputs[0][0]


def test_signals_equal_full_forward(chat: ChatTransformers) -> None:
    trace = chat.generate_trace(
        PROMPT,
        decoding=replace(chat.decoding, min_new_tokens=24),
        capture=CaptureOptions(
            attention=True, attention_head_max=True, hidden=True, hidden_layer=0
        ),
    )[0]
    n_prompt, n_new = trace.num_prompt_tokens, trace.num_tokens
    assert n_new == 24 and trace.finish_reason == "length"
    out, _ = _reference(chat, trace)
    logp = torch.log_softmax(out.logits[0].float(), dim=-1)[n_prompt - 1 : n_prompt - 1 + n_new]
    chosen = logp.gather(-1, torch.tensor(trace.token_ids)[:, None])[:, 0].numpy()
    entropy = (-(logp.exp() * logp).sum(-1)).numpy()
    np.testing.assert_allclose(trace.logprobs, chosen, atol=ATOL)
    raw = out.logits[0].float()[n_prompt - 1 : n_prompt - 1 + n_new]
    np.testing.assert_allclose(trace.logsumexp, torch.logsumexp(raw, dim=-1).numpy(), atol=ATOL)
    np.testing.assert_allclose(trace.entropies, entropy, atol=ATOL)
    heads = out.attentions[-1][0]  # (heads, S, S)
    np.testing.assert_allclose(
        trace.attention,
        heads.mean(0)[n_prompt : n_prompt + n_new, : n_prompt + n_new].numpy(),
        atol=ATOL,
    )
    np.testing.assert_allclose(
        trace.attention_head_max,
        heads.amax(0)[n_prompt : n_prompt + n_new, : n_prompt + n_new].numpy(),
        atol=ATOL,
    )
    # each row is a distribution over positions 0 .. n_prompt + t and zero after
    np.testing.assert_allclose(trace.attention.sum(axis=1), np.ones(n_new), atol=1e-5)
    assert trace.attention[0, n_prompt + 1 :].sum() == 0.0
    np.testing.assert_allclose(
        trace.hidden, out.hidden_states[1][0, n_prompt + n_new - 1].numpy(), atol=ATOL
    )


def test_mlp_site_and_middle_layer(chat: ChatTransformers) -> None:
    trace = chat.generate_trace(
        PROMPT,
        decoding=DecodingOptions(max_new_tokens=8, min_new_tokens=8),
        capture=CaptureOptions(hidden=True, hidden_layer=0, hidden_site="mlp"),
    )[0]
    _, mlp = _reference(chat, trace)
    np.testing.assert_allclose(trace.hidden, mlp[-1].numpy(), atol=ATOL)


def test_hidden_at_appended_eos_after_length_finish(chat: ChatTransformers) -> None:
    trace = chat.generate_trace(
        PROMPT,
        decoding=DecodingOptions(max_new_tokens=6, min_new_tokens=6),
        capture=CaptureOptions(hidden=True, hidden_layer=-1, hidden_at="eos"),
    )[0]
    assert trace.finish_reason == "length"
    eos = chat.hf_tokenizer.eos_token_id
    out, _ = _reference(chat, trace, extra=[eos])
    layers = len(decoder_layers(chat.hf_model))
    hidden_states = out.hidden_states
    # hidden_states[-1] is after the final norm in some models: use the layer output hook index
    np.testing.assert_allclose(
        trace.hidden, _layer_output(chat, trace, [eos], layers - 1), atol=ATOL
    )
    assert hidden_states is not None


def test_hidden_at_eos_replacing_last_after_length_finish(chat: ChatTransformers) -> None:
    """SeaKR's code: the last token of a length ending is replaced by EOS, not followed."""
    trace = chat.generate_trace(
        PROMPT,
        decoding=DecodingOptions(max_new_tokens=6, min_new_tokens=6),
        capture=CaptureOptions(hidden=True, hidden_layer=-1, hidden_at="eos_replacing_last"),
    )[0]
    assert trace.finish_reason == "length" and trace.num_tokens == 6
    eos = chat.hf_tokenizer.eos_token_id
    shortened = GenerationTrace(
        prompt_ids=trace.prompt_ids,
        token_ids=trace.token_ids[:-1],
        tokens=trace.tokens[:-1],
        text="",
        logprobs=trace.logprobs[:-1],
        entropies=trace.entropies[:-1],
        finish_reason="length",
    )
    layers = len(decoder_layers(chat.hf_model))
    expected = _layer_output(chat, shortened, [eos], layers - 1)
    np.testing.assert_allclose(trace.hidden, expected, atol=ATOL)
    appended = _layer_output(chat, trace, [eos], layers - 1)
    assert not np.allclose(trace.hidden, appended, atol=ATOL)  # not the "eos" reading


def _layer_output(chat: ChatTransformers, trace: GenerationTrace, extra: list[int], index: int):
    ids = [*trace.prompt_ids.tolist(), *trace.token_ids.tolist(), *extra]
    captured: list[torch.Tensor] = []
    layer = decoder_layers(chat.hf_model)[index]
    handle = layer.register_forward_hook(
        lambda _m, _a, out: captured.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        with torch.no_grad():
            chat.hf_model(input_ids=torch.tensor([ids]))
    finally:
        handle.remove()
    return captured[0][0, -1].numpy()


def test_hidden_at_eos_replaces_a_stop_string_token(chat: ChatTransformers) -> None:
    free = chat.generate_trace(
        PROMPT, decoding=DecodingOptions(max_new_tokens=12, min_new_tokens=12)
    )[0]
    stop = _boundary_stop(free)
    trace = chat.generate_trace(
        PROMPT,
        decoding=DecodingOptions(max_new_tokens=12, stop=(stop,)),
        capture=CaptureOptions(hidden=True, hidden_at="eos", hidden_layer=0),
    )[0]
    assert trace.stop_string == stop
    eos = chat.hf_tokenizer.eos_token_id
    replaced = GenerationTrace(
        prompt_ids=trace.prompt_ids,
        token_ids=trace.token_ids[:-1],
        tokens=trace.tokens[:-1],
        text="",
        logprobs=trace.logprobs[:-1],
        entropies=trace.entropies[:-1],
        finish_reason="stop",
    )
    np.testing.assert_allclose(trace.hidden, _layer_output(chat, replaced, [eos], 0), atol=ATOL)


def _boundary_stop(trace: GenerationTrace) -> str:
    return boundary_stop(trace.tokens, trace.text)


def test_stop_string_across_token_boundary(chat: ChatTransformers) -> None:
    free = chat.generate_trace(
        PROMPT, decoding=DecodingOptions(max_new_tokens=16, min_new_tokens=16)
    )[0]
    stop = _boundary_stop(free)
    cut = free.text.index(stop)
    trace = chat.generate_trace(PROMPT, decoding=DecodingOptions(max_new_tokens=16, stop=(stop,)))[
        0
    ]
    assert trace.finish_reason == "stop"
    assert trace.stop_string == stop
    assert trace.text == free.text[:cut]
    assert "".join(trace.tokens) == trace.text
    # decoding stopped at the token that completed the stop string
    ends = np.cumsum([len(piece) for piece in free.tokens])
    count = int(np.argmax(ends >= cut + len(stop))) + 1
    assert trace.num_tokens == count
    np.testing.assert_array_equal(trace.token_ids, free.token_ids[:count])


def test_n_samples_equal_single_runs_with_same_seeds(chat: ChatTransformers) -> None:
    sampling = DecodingOptions(max_new_tokens=10, do_sample=True, temperature=1.0, top_k=50)
    batch = chat.generate_trace(
        PROMPT, decoding=replace(sampling, seed=11), n=3, include_greedy=True
    )
    greedy = chat.generate_trace(PROMPT, decoding=DecodingOptions(max_new_tokens=10))[0]
    np.testing.assert_array_equal(batch[0].token_ids, greedy.token_ids)
    assert batch[0].seed is None
    for i, sample in enumerate(batch[1:]):
        single = chat.generate_trace(PROMPT, decoding=replace(sampling, seed=11 + i), n=1)[0]
        assert sample.seed == single.seed == 11 + i
        np.testing.assert_array_equal(sample.token_ids, single.token_ids)
        np.testing.assert_allclose(sample.logprobs, single.logprobs, atol=ATOL)
        np.testing.assert_allclose(sample.entropies, single.entropies, atol=ATOL)
    assert len({tuple(s.token_ids) for s in batch[1:]}) > 1  # the seeds differ


def test_batched_attention_matches_single(chat: ChatTransformers) -> None:
    sampling = DecodingOptions(max_new_tokens=8, do_sample=True)
    capture = CaptureOptions(attention=True, hidden=True)
    batch = chat.generate_trace(PROMPT, decoding=replace(sampling, seed=3), capture=capture, n=2)
    for i, sample in enumerate(batch):
        single = chat.generate_trace(
            PROMPT, decoding=replace(sampling, seed=3 + i), capture=capture
        )[0]
        np.testing.assert_array_equal(sample.token_ids, single.token_ids)
        np.testing.assert_allclose(sample.attention, single.attention, atol=ATOL)
        np.testing.assert_allclose(sample.hidden, single.hidden, atol=ATOL)


def test_processed_distribution_option(chat: ChatTransformers) -> None:
    sampling = DecodingOptions(max_new_tokens=6, do_sample=True, top_k=5, seed=1)
    raw = chat.generate_trace(PROMPT, decoding=sampling)[0]
    processed = chat.generate_trace(
        PROMPT, decoding=replace(sampling, signal_distribution="processed")
    )[0]
    np.testing.assert_array_equal(raw.token_ids, processed.token_ids)
    # top-k 5 leaves at most 5 outcomes: entropy <= ln 5, and always below the raw one here
    assert (processed.entropies <= np.log(5) + 1e-5).all()
    assert (processed.entropies < raw.entropies).all()
    assert (processed.logprobs >= raw.logprobs).all()


def test_forward_attention_matches_output_attentions(chat: ChatTransformers) -> None:
    matrix = chat.forward_attention("Anna Berg was born in 1931.")
    with torch.no_grad():
        out = chat.hf_model(
            input_ids=torch.tensor([matrix.token_ids.tolist()]), output_attentions=True
        )
    np.testing.assert_allclose(matrix.weights, out.attentions[-1][0].numpy(), atol=ATOL)
    assert "".join(matrix.tokens) == "Anna Berg was born in 1931."
    assert matrix.mean.shape == (len(matrix.tokens), len(matrix.tokens))


def test_missing_layer_is_explained(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), attn_implementation="eager")
    with pytest.raises(HiddenLayerError, match=r"layer 5 does not exist: the model has 2"):
        chat.generate_trace(
            PROMPT,
            decoding=DecodingOptions(max_new_tokens=2),
            capture=CaptureOptions(hidden=True, hidden_layer=5),
        )
    with pytest.raises(HiddenLayerError, match=r"Expected an index in \[-2, 1\]"):
        chat.generate_trace(
            PROMPT,
            decoding=DecodingOptions(max_new_tokens=2),
            capture=CaptureOptions(attention=True, attention_layer=-3),
        )


def test_prompt_longer_than_context_is_explained(tmp_path: Path) -> None:
    from langchain_adaptive_rag.testing import create_tiny_model

    directory = create_tiny_model(tmp_path / "short", max_positions=32)
    chat = ChatTransformers(model=str(directory))
    with pytest.raises(PromptTooLongError, match="model's context holds 32 positions"):
        chat.generate_trace(PROMPT * 3, decoding=DecodingOptions(max_new_tokens=4))


def _force_eos_on_call(chat: ChatTransformers, call: int):
    """Make the ``call``-th forward pass (1 = prefill) put all its mass on EOS."""
    eos = chat.hf_tokenizer.eos_token_id
    calls = {"count": 0}

    def hook(_module: torch.nn.Module, _args: object, output: torch.Tensor) -> torch.Tensor:
        calls["count"] += 1
        if calls["count"] != call:
            return output
        forced = output.clone()
        forced[..., eos] = 1e4
        return forced

    return chat.hf_model.lm_head.register_forward_hook(hook)


@pytest.mark.parametrize("hidden_at", ["last", "eos"])
def test_eos_finish(chat: ChatTransformers, hidden_at: str) -> None:
    handle = _force_eos_on_call(chat, 6)  # tokens 0-4 generated, EOS chosen for token 5
    try:
        trace = chat.generate_trace(
            PROMPT,
            capture=CaptureOptions(
                attention=True, hidden=True, hidden_layer=0, hidden_at=hidden_at
            ),
        )[0]
    finally:
        handle.remove()
    assert (trace.num_tokens, trace.finish_reason, trace.stop_string) == (5, "stop", None)
    eos = chat.hf_tokenizer.eos_token_id
    extra = [eos] if hidden_at == "eos" else []
    np.testing.assert_allclose(trace.hidden, _layer_output(chat, trace, extra, 0), atol=ATOL)
    out, _ = _reference(chat, trace)
    n_prompt = trace.num_prompt_tokens
    expected = out.attentions[-1][0].mean(0)[n_prompt : n_prompt + 5, : n_prompt + 5].numpy()
    np.testing.assert_allclose(trace.attention, expected, atol=ATOL)


def test_min_new_tokens_masks_eos(chat: ChatTransformers) -> None:
    handle = _force_eos_on_call(chat, 2)
    try:
        trace = chat.generate_trace(
            PROMPT, decoding=DecodingOptions(max_new_tokens=4, min_new_tokens=3)
        )[0]
    finally:
        handle.remove()
    assert trace.num_tokens == 4 and trace.finish_reason == "length"


def test_mlp_site_of_experts_that_flatten_their_tokens(
    tiny_model_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """Llama 4's mixture of experts returns its tokens as one ``(tokens, hidden)`` matrix:
    the hidden state is still the last position's, as the layer adds it to its input."""
    from transformers import AutoTokenizer, Llama4ForCausalLM, Llama4TextConfig

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dirs["llama"])
    config = Llama4TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        intermediate_size_mlp=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_local_experts=2,
        interleave_moe_layer_step=1,  # every layer's feed-forward is experts
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    torch.manual_seed(0)
    Llama4ForCausalLM(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    chat = ChatTransformers(model=str(tmp_path))
    (trace,) = chat.generate_trace(
        PROMPT,
        decoding=DecodingOptions(max_new_tokens=5, min_new_tokens=5),
        capture=CaptureOptions(hidden=True, hidden_layer=1, hidden_site="mlp"),
    )
    ids = [*trace.prompt_ids.tolist(), *trace.token_ids.tolist()]
    outputs: list[torch.Tensor] = []
    experts = decoder_layers(chat.hf_model)[1].feed_forward
    handle = experts.register_forward_hook(lambda _m, _a, out: outputs.append(out))
    try:
        with torch.no_grad():
            chat.hf_model(input_ids=torch.tensor([ids]))
    finally:
        handle.remove()
    (flat,) = [out[0] if isinstance(out, tuple) else out for out in outputs]
    assert flat.ndim == 2  # (tokens, hidden): what the hook is given
    np.testing.assert_allclose(trace.hidden, flat[-1].numpy(), atol=ATOL)


@pytest.mark.parametrize(
    "family",
    ["granitemoe", "granitemoeshared", "granitemoehybrid", "granitemoehybrid_dense"],
)
def test_mlp_site_of_granite_experts_and_shared_mlp(
    tiny_model_dirs: dict[str, Path], tmp_path: Path, family: str
) -> None:
    """Granite MoE's MLP output is its experts' output plus its shared MLP's (either may
    be absent): the hidden state read there is what the layer scales and adds to its
    residual, ``(output - residual) / residual_multiplier``, measured around the layer."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dirs["llama"])
    common: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "residual_multiplier": 0.5,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 3,
    }
    if family == "granitemoe":
        config: Any = transformers.GraniteMoeConfig(**common)
        model: Any = transformers.GraniteMoeForCausalLM
    elif family == "granitemoeshared":
        config = transformers.GraniteMoeSharedConfig(**common, shared_intermediate_size=48)
        model = transformers.GraniteMoeSharedForCausalLM
    else:
        experts = 0 if family.endswith("dense") else 4
        config = transformers.GraniteMoeHybridConfig(
            **{**common, "num_local_experts": experts},
            shared_intermediate_size=48,
            layers_block_type=["linear_attention", "attention"],
            mamba_n_heads=4,
            mamba_d_head=16,
            mamba_d_state=8,
            mamba_n_groups=1,
            mamba_expand=2,
        )
        model = transformers.GraniteMoeHybridForCausalLM
    torch.manual_seed(0)
    model(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    chat = ChatTransformers(model=str(tmp_path))
    seen: dict[str, torch.Tensor] = {}
    for layer in (0, 1):
        (trace,) = chat.generate_trace(
            PROMPT,
            decoding=DecodingOptions(max_new_tokens=4, min_new_tokens=4),
            capture=CaptureOptions(hidden=True, hidden_layer=layer, hidden_site="mlp"),
        )
        decoder = decoder_layers(chat.hf_model)[layer]
        seen.clear()
        handles = [
            decoder.post_attention_layernorm.register_forward_pre_hook(
                lambda _m, args: seen.update(residual=args[0].clone())
            ),
            decoder.register_forward_hook(lambda _m, _a, out: seen.update(output=out)),
        ]
        ids = [*trace.prompt_ids.tolist(), *trace.token_ids.tolist()]
        try:
            with torch.no_grad():
                chat.hf_model(input_ids=torch.tensor([ids]))
        finally:
            for handle in handles:
                handle.remove()
        output = seen["output"][0] if isinstance(seen["output"], tuple) else seen["output"]
        want = (output[0, -1] - seen["residual"][0, -1]) / config.residual_multiplier
        assert trace.hidden is not None
        np.testing.assert_allclose(trace.hidden, want.numpy(), atol=ATOL)
