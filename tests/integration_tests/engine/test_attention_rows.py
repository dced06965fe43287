"""Attention rows on sdpa equal eager's: every architecture, decoding and full passes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from langchain_adaptive_rag import AdaptiveRAGError, AttentionUnavailableError, ChatTransformers
from langchain_adaptive_rag.engine import attention_rows as attention_rows_module
from langchain_adaptive_rag.engine.attention_rows import PendingRows, attention_rows
from langchain_adaptive_rag.engine.layers import attention_module
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions
from tests.helpers.compare import assert_same_traces
from tests.helpers.host_reads import DispatchedOperators, count_host_reads, count_tensors_from_lists
from tests.helpers.together import decoded_together

ATOL = 1e-5
PROMPT = (
    "Question: Anna Berg was born in 1931 in Oslo and she directed the film Blue Harbour "
    "in 1962. Who directed it?\nAnswer:"
)
ARCHITECTURES = ["llama", "qwen2", "gpt2", "mistral", "gemma"]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_sdpa_rows_equal_eager(tiny_model_dirs: dict[str, Path], arch: str) -> None:
    eager = ChatTransformers(model=str(tiny_model_dirs[arch]), attn_implementation="eager")
    sdpa = ChatTransformers(model=str(tiny_model_dirs[arch]), attn_implementation="sdpa")
    assert sdpa.hf_model.config._attn_implementation == "sdpa" and sdpa.attention_available
    twelve = DecodingOptions(max_new_tokens=12, min_new_tokens=12)
    signals = CaptureOptions(
        attention=True, attention_head_max=True, attention_layer=0, hidden=True
    )
    (want,) = eager.generate_trace(PROMPT, decoding=twelve, capture=signals)
    (got,) = sdpa.generate_trace(PROMPT, decoding=twelve, capture=signals)
    assert got.token_ids.tolist() == want.token_ids.tolist()
    assert got.attention is not None and want.attention is not None
    np.testing.assert_allclose(got.attention, want.attention, atol=ATOL)
    np.testing.assert_allclose(got.attention_head_max, want.attention_head_max, atol=ATOL)
    np.testing.assert_allclose(got.hidden, want.hidden, atol=ATOL)
    np.testing.assert_allclose(got.attention.sum(axis=1), 1.0, atol=ATOL)
    # the reference-mode forward pass: every row of the last layer
    full, reference = sdpa.forward_attention(PROMPT), eager.forward_attention(PROMPT)
    np.testing.assert_allclose(full.weights, reference.weights, atol=ATOL)
    with torch.no_grad():
        out = eager.hf_model(
            input_ids=torch.tensor([full.token_ids.tolist()]), output_attentions=True
        )
    np.testing.assert_allclose(full.weights, out.attentions[-1][0].numpy(), atol=ATOL)
    # the routed layer is restored: the model's layers all run sdpa again
    assert attention_module(sdpa.hf_model, 0).config._attn_implementation == "sdpa"


@pytest.mark.parametrize("arch", [a for a in ARCHITECTURES if a != "gpt2"])  # GPT-2: no flex
def test_flex_attention_rows_equal_eager(tiny_model_dirs: dict[str, Path], arch: str) -> None:
    """A model on flex attention (its masks are BlockMasks): rows, samples, concurrent
    left-padded calls and the reference-mode pass as eager gives them.

    transformers compiles flex attention; ``force_eager`` runs torch's own uncompiled
    kernel instead (the same masks and results, without a C++ compiler or a minute of
    compiling; torch 2.13's compiled CPU kernel also fails on padded batches).
    """
    eager = ChatTransformers(model=str(tiny_model_dirs[arch]), attn_implementation="eager")
    flex = ChatTransformers(
        model=str(tiny_model_dirs[arch]),
        attn_implementation="flex_attention",
        batch_concurrent_calls=True,
    )
    twelve = DecodingOptions(max_new_tokens=12, min_new_tokens=12)
    signals = CaptureOptions(attention=True, attention_head_max=True, hidden=True)
    prompts = [PROMPT, "Question: Who directed Blue Harbour?\nAnswer:"]
    sampling = DecodingOptions(do_sample=True, seed=3, max_new_tokens=6)
    hidden = CaptureOptions(hidden=True)
    with torch.compiler.set_stance("force_eager"):
        assert flex.hf_model.config._attn_implementation == "flex_attention"
        assert flex.attention_available
        got = decoded_together(  # the second row is padded
            flex,
            [lambda p=p: flex.generate_trace(p, decoding=twelve, capture=signals) for p in prompts],
        )
        samples = flex.generate_trace(PROMPT, decoding=sampling, capture=hidden, n=3)
        full = flex.forward_attention(PROMPT)
    assert flex.scheduler is not None and flex.scheduler.batch_sizes[2] == 1
    want = [eager.generate_trace(p, decoding=twelve, capture=signals)[0] for p in prompts]
    assert_same_traces(
        [ours for (ours,) in got],
        want,
        ATOL,
        captured=("attention", "attention_head_max", "hidden"),
    )
    reference = eager.generate_trace(PROMPT, decoding=sampling, capture=hidden, n=3)
    assert_same_traces(samples, reference, ATOL, captured=("hidden",))
    np.testing.assert_allclose(full.weights, eager.forward_attention(PROMPT).weights, atol=ATOL)
    assert attention_module(flex.hf_model, -1).config._attn_implementation == "flex_attention"


def _weightless(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """A kernel that gives no weights: gpt-oss's eager attention, its output alone."""
    from transformers.models.gpt_oss import modeling_gpt_oss

    output, _ = modeling_gpt_oss.eager_attention_forward(
        module, query, key, value, attention_mask, **kwargs
    )
    return output, None


@pytest.mark.parametrize("layer_types", [("sliding_attention", "full_attention"), ("full",) * 2])
def test_attention_sink_rows_equal_eager(
    tiny_model_dirs: dict[str, Path], tmp_path: Path, layer_types: tuple[str, ...]
) -> None:
    """gpt-oss's attention sinks (``s_aux``, one logit a head) on a kernel without weights
    (as flash and flex attention run them on a GPU): the rows eager gives, which sum to
    less than 1; in each step (a sliding-window layer) and deferred (full attention)."""
    import transformers
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    transformers.AttentionInterface.register("adaptive_rag_test_weightless", _weightless)
    AttentionMaskInterface.register("adaptive_rag_test_weightless", eager_mask)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dirs["llama"])
    config = transformers.GptOssConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=16,
        layer_types=[t if t != "full" else "full_attention" for t in layer_types],
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    torch.manual_seed(0)
    model = transformers.GptOssForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.normal_()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    eager = ChatTransformers(model=str(tmp_path), attn_implementation="eager")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, attn_implementation="adaptive_rag_test_weightless"
    )
    fast = ChatTransformers(model=loaded, tokenizer=tokenizer)
    assert fast.attention_available
    eight = DecodingOptions(max_new_tokens=8, min_new_tokens=8)
    rows = CaptureOptions(attention=True, attention_head_max=True)
    (want,) = eager.generate_trace(PROMPT, decoding=eight, capture=rows)
    (got,) = fast.generate_trace(PROMPT, decoding=eight, capture=rows)
    assert got.token_ids.tolist() == want.token_ids.tolist()
    assert got.attention is not None and want.attention is not None
    assert np.all(want.attention.sum(axis=1) < 0.99)  # the sinks took their share
    np.testing.assert_allclose(got.attention, want.attention, atol=ATOL)
    np.testing.assert_allclose(got.attention_head_max, want.attention_head_max, atol=ATOL)
    full, reference = fast.forward_attention(PROMPT), eager.forward_attention(PROMPT)
    np.testing.assert_allclose(full.weights, reference.weights, atol=ATOL)


def test_a_layer_passing_options_the_rows_do_not_read_names_the_fix() -> None:
    """A position bias (or per-token sinks) changes the weights: no rows rather than
    wrong ones."""
    module = nn.Module()
    module._adaptive_rag_sink = attention_rows_module.RowSink(original="sdpa")  # type: ignore[assignment]
    query, key = torch.randn(1, 2, 1, 4), torch.randn(1, 2, 6, 4)
    for option in attention_rows_module.UNREAD_OPTIONS:
        with pytest.raises(
            AttentionUnavailableError, match=f"passes its kernel {option}"
        ) as caught:
            attention_rows_module.capture_attention_forward(
                module, query, key, key, None, scaling=0.5, **{option: torch.zeros(1, 2, 1, 6)}
            )
        assert 'attn_implementation="eager"' in str(caught.value)


def _padding_mask_kernel(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """A kernel given flash attention's mask, ``(batch, keys)`` padding or ``None``, that
    gives no weights: causal sdpa under that padding."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    assert attention_mask is None or attention_mask.ndim == 2
    queries, keys = query.shape[2], key.shape[2]
    allowed = torch.ones(queries, keys, dtype=torch.bool).tril(keys - queries)[None, None]
    if attention_mask is not None:
        allowed = allowed & attention_mask[:, None, None, -keys:].bool()
    kwargs.pop("is_causal", None)
    output, _ = sdpa_attention_forward(
        module, query, key, value, allowed, is_causal=False, **kwargs
    )
    return output, None


def test_rows_under_flash_attentions_padding_mask_equal_eager(llama_dir: Path) -> None:
    """The masks flash attention gets (a GPU's ``flash_attention_2``), on a kernel that runs
    on a CPU: left-padded calls decoded together, samples and stored prefixes, as eager."""
    import transformers
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    name = "adaptive_rag_test_padding_mask"  # not "flash...": transformers would load one
    transformers.AttentionInterface.register(name, _padding_mask_kernel)
    AttentionMaskInterface.register(name, flash_attention_mask)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(llama_dir, attn_implementation=name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(llama_dir)
    chat = ChatTransformers(model=loaded, tokenizer=tokenizer, batch_concurrent_calls=True)
    eager = ChatTransformers(model=str(llama_dir), attn_implementation="eager")
    prompts = [PROMPT, "Question: Who directed Blue Harbour?\nAnswer:", "Question: Who?\nAnswer:"]
    eight = DecodingOptions(max_new_tokens=8, min_new_tokens=8)
    signals = CaptureOptions(attention=True, attention_head_max=True, hidden=True)
    want = [eager.generate_trace(p, decoding=eight, capture=signals)[0] for p in prompts]
    call = [lambda p=p: chat.generate_trace(p, decoding=eight, capture=signals)[0] for p in prompts]
    got = decoded_together(chat, call)
    again = [each() for each in call]  # from stored prefixes
    assert chat.scheduler is not None and chat.scheduler.batch_sizes[3] == 1
    assert chat.prefix_cache is not None and chat.prefix_cache.stats.hits >= 1
    assert_same_traces(
        got + again, want + want, ATOL, captured=("attention", "attention_head_max", "hidden")
    )
    sampling = DecodingOptions(do_sample=True, seed=3, max_new_tokens=6)
    hidden = CaptureOptions(hidden=True)
    samples = chat.generate_trace(PROMPT, decoding=sampling, capture=hidden, n=3)
    reference = eager.generate_trace(PROMPT, decoding=sampling, capture=hidden, n=3)
    assert_same_traces(samples, reference, ATOL, captured=("hidden",))
    full = chat.forward_attention(PROMPT)
    np.testing.assert_allclose(full.weights, eager.forward_attention(PROMPT).weights, atol=ATOL)


def test_sliding_window_rows_see_only_the_window(tiny_model_dirs: dict[str, Path]) -> None:
    sdpa = ChatTransformers(model=str(tiny_model_dirs["mistral"]), attn_implementation="sdpa")
    (trace,) = sdpa.generate_trace(
        PROMPT,
        decoding=DecodingOptions(max_new_tokens=4, min_new_tokens=4),
        capture=CaptureOptions(attention=True),
    )
    assert trace.attention is not None
    for t in range(trace.num_tokens):
        position = trace.num_prompt_tokens + t
        assert np.all(trace.attention[t, : position - 15] == 0)  # window 16
        assert trace.attention[t, position - 15 : position + 1].sum() == pytest.approx(1.0)


def test_rows_by_hand() -> None:
    # one head, head_dim 1, keys 1, 2, 0: scores q*k*scaling = (1, 2, 0) for q = 1
    query = torch.tensor([[[[1.0]]]])
    key = torch.tensor([[[[1.0], [2.0], [0.0]]]])
    expected = np.exp([1.0, 2.0, 0.0]) / np.exp([1.0, 2.0, 0.0]).sum()
    rows = attention_rows(query, key, None, scaling=1.0)
    np.testing.assert_allclose(rows[0, 0, 0].numpy(), expected, rtol=1e-6)
    window = attention_rows(query, key, None, scaling=1.0, sliding_window=2)  # sees keys 1, 2
    np.testing.assert_allclose(
        window[0, 0, 0].numpy(), [0, *np.exp([2.0, 0.0]) / (np.exp(2.0) + 1)], rtol=1e-6
    )
    padded = torch.tensor([[0, 1, 1]])  # a flash-attention padding mask: key 0 is padding
    np.testing.assert_allclose(
        attention_rows(query, key, padded, scaling=1.0)[0, 0, 0].numpy(), window[0, 0, 0].numpy()
    )
    additive = torch.tensor([[[[torch.finfo(torch.float32).min, 0.0, 0.0]]]])
    np.testing.assert_allclose(
        attention_rows(query, key, additive, scaling=1.0)[0, 0, 0].numpy(), window[0, 0, 0].numpy()
    )
    capped = attention_rows(query, key, None, scaling=1.0, softcap=1.0)
    expected = np.exp(np.tanh([1.0, 2.0, 0.0]))
    np.testing.assert_allclose(capped[0, 0, 0].numpy(), expected / expected.sum(), rtol=1e-6)
    # grouped-query heads: two query heads share one key head
    two = attention_rows(torch.tensor([[[[1.0]], [[0.0]]]]), key, None, scaling=1.0)
    np.testing.assert_allclose(two[0, 1, 0].numpy(), [1 / 3] * 3, rtol=1e-6)
    # an attention-sink logit of 1.5 joins the normalisation: the row sums to less than 1
    sunk = attention_rows(query, key, None, scaling=1.0, sinks=torch.tensor([1.5]))
    expected = np.exp([1.0, 2.0, 0.0]) / (np.exp([1.0, 2.0, 0.0]).sum() + np.exp(1.5))
    np.testing.assert_allclose(sunk[0, 0, 0].numpy(), expected, rtol=1e-6)
    assert sunk.sum() == pytest.approx(1 - np.exp(1.5) / (np.exp([1.0, 2.0, 0.0, 1.5]).sum()))


def test_grouped_query_rows_score_each_key_head_once() -> None:
    """Four query heads per key head: every row as a float64 per-head reference gives it,
    and no operator writes more than one float32 copy of the keys (repeating each key head
    for its query heads would write four)."""
    generator = torch.Generator().manual_seed(3)
    query = torch.randn(2, 8, 3, 16, generator=generator)
    key = torch.randn(2, 2, 40, 16, generator=generator).to(torch.bfloat16)
    padding = torch.ones(2, 40, dtype=torch.long)
    padding[1, :5] = 0  # the second row's first five keys are padding
    with DispatchedOperators() as seen:
        rows = attention_rows(query, key, padding, scaling=0.25, queries=3)
    assert rows.shape == (2, 8, 3, 40) and rows.dtype == torch.float32
    keys = key.double()
    for b in range(2):
        for h in range(8):
            for i, position in enumerate(range(37, 40)):  # the last three queries
                scores = (keys[b, h // 4, : position + 1] @ query[b, h, i].double()) * 0.25
                if b == 1:
                    scores[:5] = -torch.inf
                expected = torch.zeros(40, dtype=torch.float64)
                expected[: position + 1] = torch.softmax(scores, dim=0)
                np.testing.assert_allclose(rows[b, h, i].numpy(), expected.numpy(), atol=1e-6)
    assert "repeat_interleave" not in seen.seen
    assert max(seen.sizes) <= key.numel()


@pytest.mark.parametrize("chunk_scores", [10**9, 300])  # one chunk; a few steps a chunk
@pytest.mark.parametrize("sinks", [None, (0.5, -1.0, 2.0, 0.0)])  # one logit a query head
def test_deferred_steps_give_the_rows_each_step_computes(
    monkeypatch: pytest.MonkeyPatch, chunk_scores: int, sinks: tuple[float, ...] | None
) -> None:
    """Five decoding steps over an appending cache, their rows computed at the end.

    Two rows (the second left-padded by three columns), four query heads over two key
    heads, a 4D boolean mask as the model builds it for the newest query, soft-capping.
    """
    monkeypatch.setattr(attention_rows_module, "PENDING_SCORES", chunk_scores)
    generator = torch.Generator().manual_seed(11)
    keys = torch.randn(2, 2, 12, 8, generator=generator)
    padded = torch.ones(2, 12, dtype=torch.bool)
    padded[1, :3] = False
    pending = attention_rows_module.PendingRows()
    expected = []
    for length in range(8, 13):  # each step appends one key column
        query = torch.randn(2, 4, 1, 8, generator=generator)
        mask = padded[:, None, None, :length]
        logits = None if sinks is None else torch.tensor(sinks)
        pending.add(query, keys[:, :, :length], mask, 0.5, 2.0, sinks=logits)
        expected.append(
            attention_rows(query, keys[:, :, :length], mask, scaling=0.5, softcap=2.0, sinks=logits)
        )
    chunks = list(pending.weights())
    assert len(chunks) == (1 if chunk_scores > 10**6 else 2)  # 300 scores: 3 steps a chunk
    got = torch.cat([torch.nn.functional.pad(c, (0, 12 - c.shape[-1])) for c in chunks], dim=2)
    for step, want in enumerate(expected):
        length = want.shape[-1]
        np.testing.assert_allclose(got[:, :, step, :length], want[:, :, 0], atol=1e-7)
        assert torch.all(got[:, :, step, length:] == 0)  # keys after the step's own
    assert not pending.queries and pending.key is None and not list(pending.weights())


def _mask_function(name: str, padding: torch.Tensor, offset: int) -> Callable[..., object]:
    """One of transformers' flex-attention mask functions, as a forward pass builds it:
    ``offset`` is the position of the pass's first query."""
    from transformers import masking_utils as masks

    function = masks.causal_mask_function
    if "window" in name:
        function = masks.and_masks(function, masks.sliding_window_overlay(4))
    if "padding" in name:
        function = masks.and_masks(function, masks.padding_mask_function(padding))
    if "packed" in name:  # two sequences in each row: keys 0-4 and 5-9
        sequences = (torch.arange(padding.shape[1]) >= 5).long().expand(padding.shape[0], -1)
        function = masks.and_masks(function, masks.packed_sequence_mask_function(sequences))
    return masks.add_offsets_to_mask_function(function, offset, 0)


@pytest.mark.parametrize("name", ["causal", "window", "padding", "window, padding", "packed"])
@pytest.mark.parametrize(("query_length", "queries"), [(1, 1), (1, 3), (3, 1), (3, 3)])
def test_a_block_mask_gives_the_rows_its_dense_mask_gives(
    name: str, query_length: int, queries: int
) -> None:
    """A flex-attention BlockMask read at the rows' positions: its dense mask's last rows,
    and the attention rows that dense boolean mask gives."""
    from torch.nn.attention.flex_attention import create_block_mask, create_mask

    keys = 10
    padding = torch.ones(2, keys, dtype=torch.bool)
    padding[1, :3] = False  # the second row's first three keys are padding
    function = _mask_function(name, padding, keys - query_length)
    block = create_block_mask(function, 2, None, query_length, keys, device="cpu")
    dense = create_mask(function, 2, 1, query_length, keys, device="cpu")
    wanted = min(queries, query_length)
    got = attention_rows_module.block_mask_rows(block, 2, queries, keys)
    assert got.shape == (2, 1, wanted, keys) and got.dtype == torch.bool
    assert torch.equal(got, dense[:, :, -wanted:, :])
    generator = torch.Generator().manual_seed(5)
    query = torch.randn(2, 4, query_length, 8, generator=generator)
    key = torch.randn(2, 2, keys, 8, generator=generator)
    rows = attention_rows(query, key, block, scaling=0.5, queries=wanted)
    want = attention_rows(query, key, dense, scaling=0.5, queries=wanted)
    assert not rows.isnan().any()
    np.testing.assert_allclose(rows, want, atol=1e-7)
    if "padding" in name:
        assert torch.all(rows[1, :, :, :3] == 0)  # the padding is never seen
    if "window" in name:
        assert torch.all(rows[..., : keys - query_length - 3] == 0)  # behind every window
    if "packed" in name:
        assert torch.all(rows[..., :5] == 0)  # the queries are in the second sequence


def test_deferred_rows_read_the_latest_block_mask() -> None:
    """Steps that kept their queries under flex attention: the rows each step's dense
    mask gives, from the latest step's BlockMask."""
    from torch.nn.attention.flex_attention import create_block_mask, create_mask

    padding = torch.ones(2, 12, dtype=torch.bool)
    padding[1, :3] = False
    generator = torch.Generator().manual_seed(2)
    keys = torch.randn(2, 2, 12, 8, generator=generator)
    pending = PendingRows()
    expected = []
    for length in range(9, 13):  # each step's one query is at the last position
        step = _mask_function("padding", padding, length - 1)
        block = create_block_mask(step, 2, None, 1, length, device="cpu")
        dense = create_mask(step, 2, 1, 1, length, device="cpu")
        query = torch.randn(2, 4, 1, 8, generator=generator)
        pending.add(query, keys[:, :, :length], block, 0.5, None)
        expected.append(attention_rows(query, keys[:, :, :length], dense, scaling=0.5))
    (chunk,) = list(pending.weights())
    for step_index, want in enumerate(expected):
        length = want.shape[-1]
        np.testing.assert_allclose(chunk[:, :, step_index, :length], want[:, :, 0], atol=1e-7)
        assert torch.all(chunk[:, :, step_index, length:] == 0)
    assert torch.all(chunk[1, :, :, :3] == 0)  # the padding is never seen


def test_a_block_mask_that_cannot_be_read_names_the_fix() -> None:
    from torch.nn.attention.flex_attention import create_block_mask

    def branching(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> object:
        return torch.tensor(True) if kv <= q else torch.tensor(False)  # one pair at a time

    block = create_block_mask(_mask_function("causal", torch.ones(1, 4), 3), 1, None, 1, 4)
    block.mask_mod = branching
    with pytest.raises(AttentionUnavailableError, match="mask_mod cannot be evaluated") as caught:
        attention_rows(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 4, 4), block, scaling=None)
    assert "flex_attention" in str(caught.value) and 'attn_implementation="eager"' in str(
        caught.value
    )


def test_a_sliding_window_layer_refuses_to_defer_its_rows_past_its_window() -> None:
    """Past the window the latest step's mask hides keys an earlier step saw."""
    module = nn.Module()
    sink = attention_rows_module.RowSink(original="sdpa", pending=PendingRows())
    module._adaptive_rag_sink = sink  # type: ignore[assignment]
    query, key = torch.randn(1, 2, 1, 4), torch.randn(1, 2, 6, 4)
    attention_rows_module.capture_attention_forward(module, query, key, key, None, scaling=0.5)
    assert len(sink.pending.queries) == 1  # no window: kept for later
    attention_rows_module.capture_attention_forward(  # a window no key is past yet
        module, query, key, key, None, scaling=0.5, sliding_window=6
    )
    assert len(sink.pending.queries) == 2
    with pytest.raises(AdaptiveRAGError, match=r"past its window \(6 keys, window 4\)"):
        attention_rows_module.capture_attention_forward(
            module, query, key, key, None, scaling=0.5, sliding_window=4
        )


def test_attention_that_bypasses_the_interface_fails_with_the_fix(
    tiny_model_dirs: dict[str, Path],
) -> None:
    sdpa = ChatTransformers(model=str(tiny_model_dirs["llama"]), attn_implementation="sdpa")
    module = attention_module(sdpa.hf_model, -1)

    def own_kernel(hidden_states: torch.Tensor, *args: object, **kwargs: object) -> tuple:
        return torch.zeros_like(hidden_states), None  # computes without AttentionInterface

    module.forward = own_kernel  # type: ignore[method-assign]
    assert not sdpa.attention_available
    with pytest.raises(AttentionUnavailableError, match="does not call transformers'") as caught:
        sdpa.generate_trace(
            PROMPT,
            decoding=DecodingOptions(max_new_tokens=2),
            capture=CaptureOptions(attention=True),
        )
    assert 'attn_implementation="eager"' in str(caught.value)


@pytest.mark.parametrize(
    ("decoding", "n", "include_greedy"),
    [
        (DecodingOptions(max_new_tokens=10, seed=5), 1, False),
        # greedy with EOS masked: the step's masked argmax serves
        (DecodingOptions(max_new_tokens=10, min_new_tokens=8, seed=5), 1, False),
        (DecodingOptions(max_new_tokens=10, do_sample=True, seed=5), 3, True),
    ],
)
def test_capture_reads_back_once_per_forward_pass(
    tiny_model_dirs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    decoding: DecodingOptions,
    n: int,
    include_greedy: bool,
) -> None:
    """Rows, hidden states, logprobs and drawn tokens wait for the device once a pass.

    On an accelerator each host read waits for the device; the hooks keep their captures
    on the device until the step's read-back, and sampled tokens bring their logprobs. A
    tensor made from a list is a blocking copy to the device (it waits too): a step makes
    one (its tokens and positions), and one more to gather its sampled rows.
    """
    sdpa = ChatTransformers(model=str(tiny_model_dirs["llama"]), attn_implementation="sdpa")
    capture = CaptureOptions(attention=True, attention_head_max=True, hidden=True)
    assert sdpa.capabilities.shares_prompts  # read once per model (its probe), not counted
    passes: list[int] = []
    handle = sdpa.hf_model.register_forward_hook(lambda *_: passes.append(1))
    reads = count_host_reads(monkeypatch)
    made = count_tensors_from_lists(monkeypatch)
    try:
        traces = sdpa.generate_trace(
            PROMPT, decoding=decoding, capture=capture, n=n, include_greedy=include_greedy
        )
    finally:
        monkeypatch.undo()
        handle.remove()
    assert all(t.attention is not None and t.hidden is not None for t in traces)
    sampled = 1 if decoding.do_sample else 0  # a sampled step reads its draws back too
    assert len(passes) > 5
    # the decoding steps' attention rows are computed and read back together when samples
    # finish (at most once a sample)
    assert len(reads) <= len(passes) * (1 + sampled) + len(traces)
    in_steps = [name for name in made if not name.startswith(("_prefill", "lazy_init"))]
    assert len(in_steps) <= (len(passes) - 1) * (1 + sampled)  # the fed tokens (+ draws)


def test_capture_adds_a_few_operators_a_token_and_one_pass_a_call(
    tiny_model_dirs: dict[str, Path],
) -> None:
    """What capture costs a launch-bound GPU: a few operators a step, one pass a call.

    A decoding step of a 7B model launches about 1,500 kernels. A step keeps a view of
    the captured layer's query and copies the hidden state (six operators, two of them
    kernels); the rows of all steps (their queries against the keys, softmax, mean over
    heads) are computed at once when the call ends, and the last token is fed once more
    for its own row. Counted per token from the difference between 12- and 4-token calls.
    """
    sdpa = ChatTransformers(
        model=str(tiny_model_dirs["llama"]),
        attn_implementation="sdpa",
        batch_concurrent_calls=False,  # decode in this thread: the dispatch mode sees it
        prefix_cache_mib=0,
    )

    def operators(tokens: int, capture: CaptureOptions | None) -> int:
        decoding = DecodingOptions(max_new_tokens=tokens, min_new_tokens=tokens)
        # the same call once before: nothing lazy
        sdpa.generate_trace(PROMPT, decoding=decoding, capture=capture)
        with DispatchedOperators() as counted:
            sdpa.generate_trace(PROMPT, decoding=decoding, capture=capture)
        return len(counted.seen)

    def per_token_and_call(capture: CaptureOptions | None = None) -> tuple[float, float]:
        short, long = operators(4, capture), operators(12, capture)
        token = (long - short) / 8
        return token, short - 4 * token

    step, call = per_token_and_call()
    captured_step, captured_call = per_token_and_call(CaptureOptions(attention=True, hidden=True))
    assert step > 100  # a forward pass of the tiny model
    assert 0 < captured_step - step <= 8
    assert captured_call - call <= step + 40  # the last token fed once more, then the rows
