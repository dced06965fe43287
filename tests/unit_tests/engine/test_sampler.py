"""Decoding helpers: option validation, stop-string hold-back, sampling filters."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from langchain_adaptive_rag.engine import sampler
from langchain_adaptive_rag.engine.sampler import draw_tokens, warp
from langchain_adaptive_rag.engine.step_logits import StepLogits, entropy_of
from langchain_adaptive_rag.engine.token_text import clip_pieces, longest_stop_prefix
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.options import DecodingOptions
from tests.helpers.host_reads import count_host_reads


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
    assert longest_stop_prefix("So the ans", ["the answer is"]) == 7  # "the ans"
    assert longest_stop_prefix("hello\n", ["\n\n"]) == 1
    assert longest_stop_prefix("hello", ["\n\n"]) == 0
    assert longest_stop_prefix("ab", ["abc", "bcd"]) == 2


def test_clip_pieces() -> None:
    assert clip_pieces(["ab", "cd", "ef"], 3) == ["ab", "c", ""]
    assert clip_pieces(["ab", "", "cd"], 4) == ["ab", "", "cd"]


def test_top_k_keeps_k_most_likely() -> None:
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0]])
    warped = warp(logits, DecodingOptions(do_sample=True, top_k=2))
    assert torch.isinf(warped[0, [0, 3]]).all()
    assert warped[0, 1].item() == 3.0 and warped[0, 2].item() == 2.0


def test_top_p_keeps_smallest_set_reaching_p() -> None:
    # p = (0.5, 0.3, 0.2): top_p 0.7 keeps the first two (0.5 < 0.7 <= 0.8).
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    warped = warp(logits, DecodingOptions(do_sample=True, top_p=0.7))
    kept = torch.isfinite(warped[0]).tolist()
    assert kept == [True, True, False]


def _warp_by_sorting(logits: torch.Tensor, options: DecodingOptions) -> torch.Tensor:
    """Top-k, then top-p over the whole row sorted (the definition)."""
    warped = logits / options.temperature
    assert options.top_k is not None and options.top_p is not None
    kth = torch.topk(warped, options.top_k, dim=-1).values[..., -1:]
    warped = warped.masked_fill(warped < kth, -math.inf)
    sorted_logits, order = torch.sort(warped, descending=True, dim=-1)
    probs = torch.softmax(sorted_logits, dim=-1)
    remove = probs.cumsum(dim=-1) - probs >= options.top_p
    remove[..., 0] = False
    return warped.masked_fill(torch.zeros_like(remove).scatter(-1, order, remove), -math.inf)


@pytest.mark.parametrize(
    ("top_k", "top_p", "scale"), [(50, 0.9, 3.0), (5, 0.5, 1.0), (200, 0.95, 0.3)]
)
def test_top_p_after_top_k_orders_only_the_kept_tokens_and_equals_sorting_all(
    top_k: int, top_p: float, scale: float
) -> None:
    torch.manual_seed(0)
    logits = torch.randn(64, 1853) * scale
    options = DecodingOptions(do_sample=True, temperature=0.7, top_k=top_k, top_p=top_p)
    assert torch.equal(warp(logits, options), _warp_by_sorting(logits, options))
    # an accelerator's way (no wait for the device to check ties) gives the same rows
    assert torch.equal(warp(logits, options, sort_all=True), warp(logits, options))


def test_ties_at_the_kth_value_keep_every_tied_token_before_top_p() -> None:
    logits = torch.tensor([[4.0, 1.0, 1.0, 1.0, 0.0, -2.0]])  # three tokens tie for 2nd
    options = DecodingOptions(do_sample=True, top_k=2, top_p=0.99)
    warped = warp(logits, options)
    assert torch.isfinite(warped[0]).tolist() == [True, True, True, True, False, False]
    assert torch.equal(warped, _warp_by_sorting(logits, options))
    assert torch.equal(warp(logits, options, sort_all=True), warped)


def test_temperature_scales_logits() -> None:
    logits = torch.tensor([[2.0, 4.0]])
    warped = warp(logits, DecodingOptions(do_sample=True, temperature=2.0))
    assert warped.tolist() == [[1.0, 2.0]]
    assert torch.softmax(warped, -1)[0, 1].item() == pytest.approx(1 / (1 + math.exp(-1)), abs=1e-6)


def _truncated(seed: int, rows: int, vocab: int) -> torch.Tensor:
    """Sampling distributions as decoding makes them: softmax after top-k and temperature."""
    logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed)) * 3
    options = DecodingOptions(do_sample=True, temperature=0.7, top_k=5)
    return torch.softmax(warp(logits, options), dim=-1)


@pytest.mark.parametrize("vocab", [2, 17, 1853])
def test_draw_tokens_draws_what_multinomial_draws(vocab: int) -> None:
    probs = _truncated(vocab, rows=6, vocab=vocab)
    for round_seed in range(20):
        mine = [torch.Generator().manual_seed(round_seed * 10 + i) for i in range(6)]
        theirs = [torch.Generator().manual_seed(round_seed * 10 + i) for i in range(6)]
        for _ in range(3):  # the generators advance alike: later draws agree too
            expected = [
                int(torch.multinomial(probs[i], 1, generator=theirs[i]).item()) for i in range(6)
            ]
            assert draw_tokens(probs, mine) == expected


@pytest.mark.parametrize("vocab", [1853, 32000])
@pytest.mark.parametrize("by_uniforms", [True, False])
def test_exponential_noise_is_what_exponential_draws_and_advances_alike(
    vocab: int, by_uniforms: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not by_uniforms:  # the fallback: exponential_ row by row
        monkeypatch.setattr(sampler, "_uniforms_give_exponentials", lambda *_: False)
    else:
        assert sampler._uniforms_give_exponentials(torch.float32, vocab)
    seeds = (3, 4, 5)
    mine = [torch.Generator().manual_seed(s) for s in seeds]
    theirs = [torch.Generator().manual_seed(s) for s in seeds]
    like = torch.empty(len(seeds), vocab)
    for _ in range(3):  # consecutive draws: each generator must advance as exponential_'s
        got = sampler.exponential_noise(like, mine)
        want = torch.stack([torch.empty(vocab).exponential_(1.0, generator=g) for g in theirs])
        assert torch.equal(got, want)


def test_draw_tokens_never_draws_a_token_of_zero_probability() -> None:
    probs = _truncated(3, rows=4, vocab=50)
    generators = [torch.Generator().manual_seed(i) for i in range(4)]
    for _ in range(200):
        for row, token in enumerate(draw_tokens(probs, generators)):
            assert probs[row, token] > 0


def test_draw_tokens_rows_are_independent_of_their_neighbours() -> None:
    probs = _truncated(4, rows=3, vocab=40)
    together = draw_tokens(probs, [torch.Generator().manual_seed(s) for s in (5, 6, 7)])
    alone = [
        draw_tokens(probs[i : i + 1], [torch.Generator().manual_seed(5 + i)])[0] for i in range(3)
    ]
    assert together == alone


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_draw_tokens_rejects_rows_that_are_not_distributions(bad: float) -> None:
    probs = torch.full((3, 4), 0.25)
    probs[1, 2] = bad
    generators = [torch.Generator().manual_seed(i) for i in range(3)]
    with pytest.raises(AdaptiveRAGError, match=r"Cannot sample rows \[1\]"):
        draw_tokens(probs, generators)


def test_draw_tokens_rejects_an_all_zero_row_and_a_generator_count_mismatch() -> None:
    probs = torch.tensor([[0.0, 0.0], [0.5, 0.5]])
    with pytest.raises(AdaptiveRAGError, match=r"rows \[0\]"):
        draw_tokens(probs, [torch.Generator(), torch.Generator()])
    with pytest.raises(AdaptiveRAGError, match="2 rows and 1 generators"):
        draw_tokens(probs, [torch.Generator()])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_step_logits_reads_back_each_rows_values_exactly(dtype: torch.dtype) -> None:
    """One read-back for the step's values; token ids exact (float32 rides them along)."""
    torch.manual_seed(0)
    logits = (torch.randn(5, 1853) * 4).to(dtype)
    logits[2, 1852] = 50.0  # the last id wins a row: the largest id travels exactly
    step = StepLogits.of(logits)
    raw = torch.log_softmax(logits, dim=-1)
    argmax = logits.argmax(dim=-1)
    assert step.argmax == argmax.tolist() and step.argmax[2] == 1852
    assert all(type(i) is int for i in step.argmax)
    assert step.entropy == entropy_of(raw).tolist()
    assert step.logsumexp == torch.logsumexp(logits, dim=-1).tolist()
    assert step.argmax_logprob == raw.gather(-1, argmax[:, None]).squeeze(-1).tolist()
    by_hand = [-(p * math.log(p)) for p in torch.softmax(logits[0].double(), -1).tolist() if p]
    assert step.entropy[0] == pytest.approx(
        sum(by_hand), rel=1e-2 if dtype == torch.bfloat16 else 1e-5
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("signal", ["raw", "processed"])
def test_a_distribution_reads_back_its_entropies_and_greedy_tokens_exactly(
    dtype: torch.dtype, signal: str
) -> None:
    torch.manual_seed(1)
    logits = (torch.randn(4, 1853) * 4).to(dtype)
    logits[1, 1852] = 50.0
    options = DecodingOptions(do_sample=True, top_k=50, top_p=0.9, signal_distribution=signal)
    raw = torch.log_softmax(logits, dim=-1)
    got = sampler.Distribution.of(logits, raw, options)
    assert got.greedy == logits.argmax(dim=-1).tolist() and got.greedy[1] == 1852
    assert all(type(i) is int for i in got.greedy)
    assert got.entropies == entropy_of(got.signal_logp).tolist()


def test_step_values_and_captures_come_back_in_one_read_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attention rows and hidden states travel with the step's values, each exact."""
    torch.manual_seed(2)
    logits = torch.randn(3, 1853) * 4
    captured = [torch.randn(3, 40), torch.rand(3, 17), torch.randn(3, 8)]
    alone = StepLogits.of(logits)
    reads = count_host_reads(monkeypatch)
    step, host = StepLogits.read(logits, captured)
    monkeypatch.undo()
    assert reads == ["cpu"]
    assert (step.entropy, step.logsumexp) == (alone.entropy, alone.logsumexp)
    assert (step.argmax, step.argmax_logprob) == (alone.argmax, alone.argmax_logprob)
    for got, want in zip(host, captured, strict=True):
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_array_equal(got, want.numpy())


def test_captures_in_another_dtype_are_read_back_apart_and_exact() -> None:
    logits = torch.randn(2, 50)
    hidden = torch.randn(2, 6, dtype=torch.float64)
    step, (host,) = StepLogits.read(logits, [hidden])
    np.testing.assert_array_equal(host, hidden.numpy())
    assert step.argmax == logits.argmax(dim=-1).tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_drawn_tokens_come_with_their_logprobs(dtype: torch.dtype) -> None:
    torch.manual_seed(3)
    logits = (torch.randn(4, 300) * 3).to(dtype)
    logp = torch.log_softmax(logits, dim=-1)
    probs = torch.softmax(logits.float(), dim=-1)
    seeds = (11, 12, 13, 14)
    tokens, ok, logprobs = sampler.draw_rows(
        probs, [torch.Generator().manual_seed(s) for s in seeds], logp
    )
    assert ok == [True] * 4
    assert tokens == draw_tokens(probs, [torch.Generator().manual_seed(s) for s in seeds])
    assert logprobs == logp[torch.arange(4), torch.tensor(tokens)].tolist()


@pytest.mark.parametrize("signal", ["raw", "processed"])
@pytest.mark.parametrize("known", [True, False])
def test_a_distribution_knows_its_greedy_tokens_logprobs(signal: str, known: bool) -> None:
    torch.manual_seed(4)
    logits = torch.randn(5, 400) * 4
    logits[3, 7] = 40.0
    masked = logits.clone()
    if not known:  # an EOS mask: the step's values do not apply
        masked[:, 7] = -math.inf
    options = DecodingOptions(do_sample=True, top_k=20, top_p=0.9, signal_distribution=signal)
    raw = torch.log_softmax(logits, dim=-1)
    step = StepLogits.of(logits).of_rows(range(5)) if known else None
    got = sampler.Distribution.of(masked, raw, options, step)
    want_ids = masked.argmax(dim=-1)
    assert got.greedy == want_ids.tolist() and (got.greedy[3] == 7) == known
    want = got.signal_logp.gather(-1, want_ids[:, None])[:, 0].tolist()
    assert got.greedy_logprob == want
    part = got.part(1, 3)
    assert (part.greedy, part.greedy_logprob) == (got.greedy[1:3], want[1:3])


def test_the_step_reads_the_argmax_without_eos_with_its_raw_logprob() -> None:
    torch.manual_seed(5)
    logits = torch.randn(3, 60) * 3
    logits[0, 2] = 30.0  # EOS wins row 0; row 1's best is another EOS id
    logits[1, 5] = 30.0
    step, _ = StepLogits.read(logits, [], eos_ids=(2, 5))
    masked = logits.clone()
    masked[:, [2, 5]] = -math.inf
    want = masked.argmax(dim=-1)
    raw = torch.log_softmax(logits, dim=-1)
    assert step.masked_argmax == want.tolist() and step.argmax[:2] == [2, 5]
    assert step.masked_argmax_logprob == raw.gather(-1, want[:, None])[:, 0].tolist()
    assert step.greedy(0, masked=True) == (want[0].item(), step.masked_argmax_logprob[0])
    assert step.greedy(0, masked=False) == (2, step.argmax_logprob[0])
    plain = StepLogits.of(logits)
    assert (plain.argmax, plain.entropy) == (step.argmax, step.entropy)
    # rows that join keep the masked argmax only when both computed it for the same ids
    both = step.joined(step)
    assert both.masked_for == (2, 5) and both.masked_argmax == step.masked_argmax * 2
    assert step.joined(plain).masked_for == () and step.joined(plain).masked_argmax == []


def test_race_values_at_few_nonzero_entries_equal_the_whole_rows_race(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Top-k rows take logarithms at their nonzero entries only: the same bits."""
    probs = _truncated(8, rows=5, vocab=8192)
    nonzero = int(torch.count_nonzero(probs))
    assert probs.numel() >= sampler.SPARSE_RACE_MIN_ENTRIES
    assert nonzero * sampler.SPARSE_RACE_SHARE < probs.numel()
    logarithms: list[int] = []
    exponentials = sampler._exponentials

    def counted(uniforms: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        logarithms.append(uniforms.numel())
        return exponentials(uniforms, dtype)

    mine = [torch.Generator().manual_seed(s) for s in range(5)]
    theirs = [torch.Generator().manual_seed(s) for s in range(5)]
    for _ in range(3):  # and each generator advances over its whole row
        want = probs / sampler.exponential_noise(probs, theirs)
        with monkeypatch.context() as patch:
            patch.setattr(sampler, "_exponentials", counted)
            got = sampler.race_values(probs, mine)
        assert torch.equal(got, want)
    assert logarithms == [nonzero] * 3


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0.0])
def test_a_row_with_few_nonzero_entries_still_rejects_nan_inf_and_all_zero(
    bad: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sampler, "SPARSE_RACE_MIN_ENTRIES", 0)
    probs = torch.zeros(3, 64)
    probs[:, 5] = 1.0
    probs[1, 5] = 0.0
    probs[1, 9] = bad
    generators = [torch.Generator().manual_seed(i) for i in range(3)]
    with pytest.raises(AdaptiveRAGError, match=r"Cannot sample rows \[1\]"):
        draw_tokens(probs, generators)


@pytest.mark.parametrize("min_entries", [0, 10**9])
def test_draws_at_few_nonzero_entries_are_multinomials_either_way(
    min_entries: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sampler, "SPARSE_RACE_MIN_ENTRIES", min_entries)
    probs = _truncated(9, rows=4, vocab=1853)
    mine = [torch.Generator().manual_seed(20 + i) for i in range(4)]
    theirs = [torch.Generator().manual_seed(20 + i) for i in range(4)]
    for _ in range(5):
        want = [int(torch.multinomial(probs[i], 1, generator=theirs[i]).item()) for i in range(4)]
        assert draw_tokens(probs, mine) == want


def test_exponential_noise_names_a_generator_count_mismatch() -> None:
    with pytest.raises(AdaptiveRAGError, match="2 rows and 1 generators"):
        sampler.exponential_noise(torch.empty(2, 1853), [torch.Generator()])
