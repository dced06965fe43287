"""Signal functions against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from langchain_adaptive_rag.engine.step_logits import entropy_of
from langchain_adaptive_rag.signals import (
    Word,
    aggregate_words,
    log_softmax,
    merge_tokens_into_words,
    token_entropy,
    token_logprobs,
)


def test_entropy_of_uniform_and_point_mass() -> None:
    logits = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, -np.inf, -np.inf, -np.inf]])
    np.testing.assert_allclose(token_entropy(logits), [math.log(4), 0.0], atol=1e-12)


def test_entropy_two_way_distribution_by_hand() -> None:
    # p = (0.75, 0.25): logits log 3 and 0.
    logits = np.array([math.log(3.0), 0.0])
    expected = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))  # 0.5623351446
    assert token_entropy(logits) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.5623351446, abs=1e-9)


def test_torch_entropy_matches_hand_values() -> None:
    logp = torch.log_softmax(torch.tensor([[math.log(3.0), 0.0], [0.0, -math.inf]]), dim=-1)
    values = entropy_of(logp).tolist()
    assert values[0] == pytest.approx(0.5623351446, abs=1e-6)
    assert values[1] == 0.0


def test_torch_entropy_equals_summing_the_positive_entries_bit_for_bit() -> None:
    """Zero probabilities (masked -inf, and exp underflow), one-hot and wide rows."""
    torch.manual_seed(0)
    logits = torch.randn(6, 1853, dtype=torch.float32) * 12
    logits[0, :900] = -math.inf  # masked entries: probability 0, logprob -inf
    logits[1] = -math.inf
    logits[1, 7] = 0.0  # one-hot
    logits[2, :5] = 200.0  # the rest underflows: probability 0, finite logprob
    for dtype in (torch.float32, torch.float64):
        logp = torch.log_softmax(logits.to(dtype), dim=-1)
        p = logp.exp()
        selected = -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(dim=-1)
        got = entropy_of(logp)
        assert not got.isnan().any()
        assert torch.equal(got, selected)
        assert torch.equal(torch.signbit(got), torch.signbit(selected))


def test_logprobs_by_hand() -> None:
    # softmax([ln 1, ln 2, ln 7]) = (0.1, 0.2, 0.7)
    logits = np.log(np.array([[1.0, 2.0, 7.0], [1.0, 2.0, 7.0]]))
    np.testing.assert_allclose(token_logprobs(logits, [2, 0]), [math.log(0.7), math.log(0.1)])
    np.testing.assert_allclose(np.exp(log_softmax(logits[0])), [0.1, 0.2, 0.7])


def test_logprobs_shape_mismatch_is_explained() -> None:
    with pytest.raises(ValueError, match="one token id per logits row"):
        token_logprobs(np.zeros((2, 3)), [0])


def test_log_softmax_is_stable_for_large_logits() -> None:
    out = log_softmax(np.array([1000.0, 1000.0]))
    np.testing.assert_allclose(out, [math.log(0.5)] * 2)


def test_merge_words_on_space_newline_and_boundaries() -> None:
    tokens = ["The", " direct", "or", " was", " born", ".", "\n", "Ann", "a", " Berg", "</s>", "X"]
    words = merge_tokens_into_words(tokens, boundaries=[11])
    assert words == [
        Word(0, 1, "The"),
        Word(1, 3, "director"),
        Word(3, 4, "was"),
        Word(4, 6, "born."),
        Word(6, 7, ""),
        Word(7, 9, "Anna"),
        Word(9, 11, "Berg</s>"),
        Word(11, 12, "X"),
    ]


def test_merge_words_keeps_empty_pieces_inside_a_word() -> None:
    # A multi-byte character split over two tokens: the first decodes to "".
    words = merge_tokens_into_words([" caf", "", "é", " au"])
    assert [(w.start, w.end, w.text) for w in words] == [(0, 3, "café"), (3, 4, "au")]


def test_aggregate_words_mean_and_sum_by_hand() -> None:
    words = [Word(0, 1, "a"), Word(1, 4, "bcd")]
    values = np.array([0.5, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(aggregate_words(values, words, "mean"), [0.5, 2.0])
    np.testing.assert_allclose(aggregate_words(values, words, "sum"), [0.5, 6.0])
    np.testing.assert_allclose(aggregate_words(values, words, "max"), [0.5, 3.0])


def test_split_sentences_and_first_sentence() -> None:
    from langchain_adaptive_rag.signals import first_sentence, split_sentences

    text = " Anna Berg directed it. She was born in 1931! Why? Because 3.5 is"
    assert split_sentences(text) == [
        " Anna Berg directed it.",
        " She was born in 1931!",
        " Why?",
        " Because 3.5 is",
    ]
    assert first_sentence(text) == " Anna Berg directed it."
    assert first_sentence("") == ""


def test_tokens_covering() -> None:
    from langchain_adaptive_rag.signals import tokens_covering

    tokens = [" Anna", " Berg", ".", " She"]
    assert tokens_covering(tokens, 11) == 3  # " Anna Berg." is 11 characters
    assert tokens_covering(tokens, 10) == 2
    assert tokens_covering(tokens, 6) == 2  # a straddled token counts
    assert tokens_covering(tokens, 0) == 0
    assert tokens_covering(tokens, 99) == 4


def test_token_sentences() -> None:
    from langchain_adaptive_rag.signals import token_sentences

    tokens = [" Anna", " Berg", ".", " She", " was", " born", ".", " So"]
    assert token_sentences(tokens) == [(0, 3), (3, 7), (7, 8)]
    assert token_sentences([" a", " b"]) == [(0, 2)]
    assert token_sentences([]) == []


def test_flare_rules_by_hand() -> None:
    from langchain_adaptive_rag.signals import flare_sentence_score

    probs = [0.9, 0.3, 0.8]
    any_token = flare_sentence_score(probs, theta=0.4, rule="any_token")
    assert (any_token.uncertain, any_token.score, any_token.position) == (True, 0.3, 1)
    assert not flare_sentence_score(probs, theta=0.25, rule="any_token").uncertain
    # mean(1 - p) = (0.1 + 0.7 + 0.2) / 3 = 1/3
    mean = flare_sentence_score(probs, theta=0.3, rule="mean")
    assert mean.uncertain and mean.score == pytest.approx(1 / 3)
    assert not flare_sentence_score(probs, theta=0.34, rule="mean").uncertain


def test_masked_query_by_hand() -> None:
    from langchain_adaptive_rag.signals import masked_query

    tokens = [" Anna", " Berg", " was", " born", " in", " 1931", "."]
    probs = [0.9, 0.95, 0.9, 0.9, 0.8, 0.1, 0.7]
    assert masked_query(tokens, probs, beta=0.4) == "Anna Berg was born in."
    assert masked_query(tokens, probs, beta=0.99) == ""


def test_content_words() -> None:
    from langchain_adaptive_rag.signals import is_content_word

    assert is_content_word("Berg.") and is_content_word("1931") and is_content_word("(born")
    assert not is_content_word("the") and not is_content_word("Was") and not is_content_word(".")
    assert not is_content_word("")


def test_attention_received_by_hand() -> None:
    from langchain_adaptive_rag.signals import attention_received

    mean = np.array(
        [
            [1.0, 0.0, 0.0],
            [0.6, 0.4, 0.0],
            [0.2, 0.5, 0.3],
        ]
    )
    # later rows only: a(0) = max(0.6, 0.2), a(1) = 0.5, a(2) = 0
    np.testing.assert_allclose(attention_received(mean, "later_rows"), [0.6, 0.5, 0.0])
    heads = np.stack([mean, np.array([[1.0, 0, 0], [0.1, 0.9, 0], [0.3, 0.3, 0.4]])])
    # max over all rows per head, then mean over heads:
    # head 0: (1.0, 0.5, 0.3); head 1: (1.0, 0.9, 0.4) -> (1.0, 0.7, 0.35)
    np.testing.assert_allclose(attention_received(heads, "all_rows_head_mean"), [1.0, 0.7, 0.35])


def test_rind_by_hand() -> None:
    from langchain_adaptive_rag.signals import rind_scores, rind_trigger

    entropy = np.array([0.5, 2.0, 1.0, 3.0, 0.2])
    attention = np.array([1.0, 3.0, 2.0, 1.0, 1.0])
    content = [True, True, False, True, True]
    sentences = [(0, 3), (3, 5)]
    scores = rind_scores(entropy, attention, content, sentences)
    # sentence 1: |S| = 3, sum a = 6 -> s = 3 * a / 6 * H: (0.25, 3.0, 0 [stop word])
    # sentence 2: |S| = 2, sum a = 2 -> s = 2 * a / 2 * H: (3.0, 0.2)
    np.testing.assert_allclose(scores, [0.25, 3.0, 0.0, 3.0, 0.2])
    trigger = rind_trigger(scores, sentences, theta=1.0)
    assert trigger is not None
    assert (trigger.sentence, trigger.words, trigger.score) == ((0, 3), (1,), 3.0)
    assert rind_trigger(scores, sentences, theta=3.0) is None


def test_word_sentences() -> None:
    from langchain_adaptive_rag.signals import merge_tokens_into_words, word_sentences

    tokens = [" Anna", " Be", "rg", ".", " She", " was", " born", "."]
    words = merge_tokens_into_words(tokens)
    assert [w.text for w in words] == ["Anna", "Berg.", "She", "was", "born."]
    assert word_sentences(words, tokens) == [(0, 2), (2, 5)]


def test_qfs_select_by_hand() -> None:
    from langchain_adaptive_rag.signals import qfs_select

    weights = np.array([0.1, 0.5, 0.3, 0.9, 0.2, 0.4])
    content = [True, True, False, True, True, True]
    # word 3 triggered (excluded), word 2 is a stop word: top 2 of {0, 1, 4, 5} are 1 and 5
    assert qfs_select(weights, content, exclude={3}, top_n=2) == [1, 5]
    assert qfs_select(weights, content, exclude=set(), top_n=10) == [0, 1, 3, 4, 5]


def test_gram_uncertainty_by_hand() -> None:
    from langchain_adaptive_rag.signals import gram_uncertainty

    # two samples, d = 2: z1 = (1, -1) is already centred, z2 = (3, 3) centres to (0, 0)
    # Gram = [[2, 0], [0, 0]] + 0.5 I -> det = 2.5 * 0.5 = 1.25, U = ln(1.25) / 2
    z = np.array([[1.0, -1.0], [3.0, 3.0]])
    assert gram_uncertainty(z, alpha=0.5) == pytest.approx(math.log(1.25) / 2)
    # identical samples: each centres to (0.1, -0.4, 0.3), c = |.|^2 = 0.26, Gram = c 11^T
    # (rank one) + alpha I -> det = alpha^3 (alpha + 4c), U = ln(det) / 4 = -5.170771
    same = np.tile(np.array([[0.3, -0.2, 0.5]]), (4, 1))
    expected = (3 * math.log(1e-3) + math.log(1e-3 + 4 * 0.26)) / 4
    assert gram_uncertainty(same, alpha=1e-3) == pytest.approx(expected)
    assert expected == pytest.approx(-5.170771, abs=1e-6)
    # spread-out samples are more uncertain than consistent ones
    rng = np.random.default_rng(0)
    spread = rng.normal(size=(5, 16))
    close = np.tile(spread[:1], (5, 1)) + 0.01 * rng.normal(size=(5, 16))
    assert gram_uncertainty(spread) > gram_uncertainty(close)
    assert gram_uncertainty(np.zeros((0, 4))) == math.inf
    with pytest.raises(ValueError, match=r"shape \(k, d\)"):
        gram_uncertainty(np.zeros(4))


def test_merge_words_of_no_tokens_is_no_words() -> None:
    assert merge_tokens_into_words([]) == []


def test_bare_word_strips_the_punctuation_around_a_word() -> None:
    from langchain_adaptive_rag.signals import bare_word

    assert bare_word("Grahn.") == "Grahn" and bare_word(" 1956,") == "1956"
    assert bare_word("\u201cOslo\u201d") == "Oslo" and bare_word("(born") == "born"
    assert bare_word("U.S.") == "U.S" and bare_word("1956-57") == "1956-57"  # inner stays
    assert bare_word("...") == "" and bare_word("Erik") == "Erik"


def test_folded_word_keeps_lower_case_letters_and_digits() -> None:
    from langchain_adaptive_rag.signals import folded_word

    assert folded_word("U.S.") == "us" == folded_word("us") and folded_word("1956-57") == "195657"
    assert folded_word("“Oslo,”") == "oslo" and folded_word("--") == ""
