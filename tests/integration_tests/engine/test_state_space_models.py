"""State-space and hybrid models: caches of recurrent states, and layers without attention.

Mamba's layers hold a convolution and a recurrent state; LFM2 mixes convolution layers
with attention layers; Nemotron-H mixes Mamba-2, attention and MLP blocks, each its
layer's ``mixer``. Their caches are transformers' own (the loop's own cache holds
keys and values only): rows are selected as beam search selects them, decoding steps
hand a state-space model no padding mask, and an attention method names the layers it
can read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from langchain_adaptive_rag import (
    AdaptiveRAGError,
    AttentionUnavailableError,
    ChatTransformers,
    DRAGINConfig,
    SeaKRConfig,
)
from langchain_adaptive_rag.graphs.dragin import create_dragin_graph
from langchain_adaptive_rag.graphs.seakr import create_seakr_graph
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions
from tests.helpers.families import save_tiny_family
from tests.helpers.family_prompts import PROMPTS
from tests.helpers.scripted import RecordingRetriever
from tests.helpers.together import decoded_together

ATOL = 1e-5
STATE_SPACE = ("mamba", "lfm2", "nemotron_h")
"""Mamba; LFM2 (convolutions and attention); Nemotron-H (Mamba-2, attention, MLP)."""


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("state-space")
    return {family: save_tiny_family(family, root / family) for family in STATE_SPACE}


@pytest.mark.parametrize("arch", ["mamba", "lfm2", "nemotron_h"])
def test_calls_decoded_together_equal_calls_alone(tiny_models: dict[str, Path], arch: str) -> None:
    """Left-padded prompts of three lengths and budgets decoded together (rows leave as
    their budgets end), then a call of three samples (rows selected from one prefill):
    each as the call alone gives it."""
    alone = ChatTransformers(model=str(tiny_models[arch]))
    together = ChatTransformers(model=str(tiny_models[arch]), batch_concurrent_calls=True)
    hidden = CaptureOptions(hidden=True)
    calls = [
        (prompt, DecodingOptions(max_new_tokens=budget, min_new_tokens=budget))
        for prompt, budget in zip(PROMPTS, (8, 5, 3), strict=True)
    ]
    want = [alone.generate_trace(p, decoding=d, capture=hidden)[0] for p, d in calls]
    got = decoded_together(
        together,
        [
            lambda p=p, d=d: together.generate_trace(p, decoding=d, capture=hidden)[0]
            for p, d in calls
        ],
    )
    assert together.scheduler is not None
    assert together.scheduler.batch_sizes[3] == 1  # one loop took the three
    for ours, theirs in zip(got, want, strict=True):
        assert ours.token_ids.tolist() == theirs.token_ids.tolist()
        np.testing.assert_allclose(ours.logprobs, theirs.logprobs, atol=1e-4)
        np.testing.assert_allclose(ours.hidden, theirs.hidden, atol=ATOL)
    sampling = DecodingOptions(do_sample=True, seed=2, max_new_tokens=6)
    samples = together.generate_trace(PROMPTS[0], decoding=sampling, capture=hidden, n=3)
    reference = [
        alone.generate_trace(PROMPTS[0], decoding=sampling, capture=hidden, n=3)[i]
        for i in range(3)
    ]
    for ours, theirs in zip(samples, reference, strict=True):
        assert ours.token_ids.tolist() == theirs.token_ids.tolist()


@pytest.mark.parametrize("arch", ["lfm2", "nemotron_h"])
def test_an_attention_method_names_the_layers_a_hybrid_can_give(
    tiny_models: dict[str, Path], arch: str
) -> None:
    chat = ChatTransformers(model=str(tiny_models[arch]), attn_implementation="sdpa")
    assert not chat.attention_available  # the last layer is a convolution
    with pytest.raises(
        AttentionUnavailableError, match=r"layers with attention are \[1\]"
    ) as caught:
        create_dragin_graph(chat, RecordingRetriever())
    assert "DRAGINConfig(attention_layer=1)" in str(caught.value)
    assert (
        'Fix: load the model with ChatTransformers(model=..., attn_implementation="eager")'
        not in str(caught.value)
    )
    create_dragin_graph(chat, RecordingRetriever(), config=DRAGINConfig(attention_layer=1))
    four = DecodingOptions(max_new_tokens=4)
    layer_1 = CaptureOptions(attention=True, attention_layer=1)
    (trace,) = chat.generate_trace(PROMPTS[1], decoding=four, capture=layer_1)
    eager = ChatTransformers(model=str(tiny_models[arch]), attn_implementation="eager")
    (want,) = eager.generate_trace(PROMPTS[1], decoding=four, capture=layer_1)
    assert trace.attention is not None and want.attention is not None
    np.testing.assert_allclose(trace.attention, want.attention, atol=ATOL)
    np.testing.assert_allclose(trace.attention.sum(axis=1), 1.0, atol=ATOL)


def test_an_attention_method_on_a_state_space_model_names_the_methods_without(
    tiny_models: dict[str, Path],
) -> None:
    chat = ChatTransformers(model=str(tiny_models["mamba"]))
    with pytest.raises(AttentionUnavailableError, match="state-space model") as caught:
        create_dragin_graph(chat, RecordingRetriever())
    assert (
        "Fix: use a method that needs no attention (FLARE, the fixed schedules, SeaKR with "
        in str(caught.value)
    )
    assert "SeaKRConfig(hidden_site='residual'): no MLP here)" in str(caught.value)


def test_seakr_reads_an_mlp_only_where_a_layer_has_one(tiny_models: dict[str, Path]) -> None:
    """SeaKR reads the MLP output by default. Mamba has no MLP: building fails at once
    naming hidden_site='residual'. Nemotron-H's MLP is layer 3's mixer: its output is what
    is read there, and the middle layer (1, attention) names layer 3 as the fix."""
    mamba = ChatTransformers(model=str(tiny_models["mamba"]))
    with pytest.raises(AdaptiveRAGError, match=r"layers with one: \[\]") as caught:
        create_seakr_graph(mamba, RecordingRetriever())
    assert "decoder layer 1 (MambaBlock)" in str(caught.value)
    assert "Fix: hidden_site='residual' (SeaKRConfig or CaptureOptions)" in str(caught.value)
    create_seakr_graph(mamba, RecordingRetriever(), config=SeaKRConfig(hidden_site="residual"))

    nemotron = ChatTransformers(model=str(tiny_models["nemotron_h"]))
    with pytest.raises(AdaptiveRAGError, match=r"layers with one: \[3\]") as caught:
        create_seakr_graph(nemotron, RecordingRetriever())
    assert "or hidden_layer=3 reads an MLP's output" in str(caught.value)
    create_seakr_graph(nemotron, RecordingRetriever(), config=SeaKRConfig(hidden_layer=3))

    (trace,) = nemotron.generate_trace(
        PROMPTS[0],
        decoding=DecodingOptions(max_new_tokens=4, min_new_tokens=4),
        capture=CaptureOptions(hidden=True, hidden_layer=3, hidden_site="mlp"),
    )
    mixer = nemotron.hf_model.model.layers[3].mixer
    seen: list[torch.Tensor] = []
    handle = mixer.register_forward_hook(lambda _m, _i, out: seen.append(out.detach()))
    ids = np.concatenate([trace.prompt_ids, trace.token_ids])
    with torch.inference_mode():
        nemotron.hf_model(input_ids=torch.tensor(ids)[None])
    handle.remove()
    assert trace.hidden is not None and trace.hidden.shape == (32,)
    np.testing.assert_allclose(trace.hidden, seen[0][0, -1].numpy(), atol=ATOL)
