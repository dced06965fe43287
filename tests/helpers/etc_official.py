"""Test helper: the ETC code's signals and query, transcribed from its ``generate.py``.

WisdomShell/ETC at facd465538d91a3c9017f002fe235aefb96389b8, ``generate.py``: token
merging (``Generator.merge_tokens``, lines 149-160), the draft's signals
(``Generator.generate``, lines 218-342), the trigger (``ETC.hallucination_check``, lines
382-463) and the query (``ETC.generate_retrieve_qry``, lines 465-517). The loops, the
dict-of-tensors bookkeeping and the torch arithmetic are kept as the code writes them, so
that the package's vectorised functions are checked against the code's own steps, not
against a restatement of them. Only printing is dropped. Tokens are given as decoded text
pieces, a space marker being a leading ``" "``.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["OfficialDraft", "official_draft", "official_query"]

REAL_POS = ("NOUN", "ADJ", "VERB", "PROPN", "NUM")
SPACE = " "
CANNOT_MERGE = set(string.whitespace + string.punctuation) | {SPACE}


def merge_tokens(tokens: Sequence[str]) -> list[list[int]]:
    """``Generator.merge_tokens`` (lines 149-160)."""
    range_: list[list[int]] = []
    for i, t in enumerate(tokens):
        if (
            i == 0
            or t.startswith(SPACE)
            or tokens[i] in CANNOT_MERGE
            or tokens[i - 1] in CANNOT_MERGE
        ):
            range_.append([i, i + 1])
        else:
            range_[-1][1] += 1
    return range_


def match(word: str, real_words: set[str]) -> bool:
    """``match`` (lines 347-351)."""
    return any(real_word in word for real_word in real_words)


@dataclass
class OfficialDraft:
    """What ``generate`` and ``hallucination_check`` compute for one draft."""

    words: list[str]
    ranges: list[list[int]]
    max_atten: torch.Tensor
    entropies: torch.Tensor
    s1: list[float]
    s2: list[float]
    mt: list[float]
    fun_word: list[int]
    atten: torch.Tensor
    hallucination: bool
    curr_st: int | None = None
    curr_en: int | None = None
    curr_thres: torch.Tensor | None = None


def official_draft(
    block_tokens: Sequence[Sequence[str]],
    new_tokens: Sequence[str],
    attention: torch.Tensor,
    scores: torch.Tensor,
    nlp: Callable[[str], Any],
    threshold: float,
    *,
    thres_abs: bool = False,
) -> OfficialDraft:
    """One draft through lines 218-342 and 382-463.

    Args:
        block_tokens: The prompt's blocks (demo, ``"\\nQuestion:"``, question,
            ``"\\nAnswer:"``, text), each a list of token pieces.
        new_tokens: The draft's token pieces (end-of-sequence excluded).
        attention: The last layer's attention over the whole sequence, ``(heads, S, S)``.
        scores: The draft's logits, ``(T, 1, V)`` (``torch.stack(outputs.scores)``).
        nlp: A spaCy pipeline (``en_core_web_sm``).
        threshold: ``hallucination_threshold``.
        thres_abs: ``thres_abs``.
    """
    text = "".join(new_tokens)
    range_ = merge_tokens(new_tokens)
    blocks = [(list(b), merge_tokens(b) if b else []) for b in block_tokens]
    blocks.append((list(new_tokens), range_))
    # merge_blocks (lines 37-47)
    merged_range: list[tuple[int, int]] = []
    st = 0
    for _tokens, ranges in blocks:
        if ranges:
            for left, right in ranges:
                merged_range.append((st + left, st + right))
            st = merged_range[-1][1]
    new_len = len(new_tokens)
    new_words = len(range_)
    # lines 222-229
    atten = attention[:, -new_len:, :]
    atten = atten.mean(dim=0)
    atten = torch.stack([atten[:, left:right].sum(dim=-1) for left, right in merged_range], dim=-1)
    atten = torch.stack([atten[left:right, :].mean(dim=-2) for left, right in range_], dim=-2)
    atten_to_new = atten[:, -new_words:]
    atten_to_new /= atten.sum(dim=-1, keepdim=True) + 1e-10
    max_atten, _ = atten_to_new.max(dim=1)
    # lines 231-234
    probs = scores.softmax(dim=-1)
    entropies = (-probs * torch.log(probs + 1e-10)).sum(dim=-1)
    entropies = torch.stack([entropies[left:right, 0].max() for left, right in range_])
    # lines 236-245
    func_words = []
    doc = nlp(text)
    real_words = {token.text for token in doc if token.pos_ in REAL_POS}
    for i in range(new_words):
        tl, tr = range_[i]
        if not match("".join(new_tokens[tl:tr]), real_words):
            func_words.append(i)
    # lines 247-283
    zero = torch.tensor(0, dtype=torch.float64)
    s1 = [zero.clone() for _ in range_]
    s2 = [zero.clone() for _ in range_]
    mt = [zero.clone() for _ in range_]
    fun = [zero.clone() for _ in range_]
    for i in range(len(range_)):
        if i not in func_words:
            fun[i] = torch.tensor(1, dtype=torch.float64)
    for i in range(len(range_) - 1):
        if i + 1 not in func_words:
            j = i
            while j >= 0:
                if j not in func_words:
                    s1[i + 1] = entropies[i + 1].to(torch.float64) - entropies[j].to(torch.float64)
                    break
                if j == 0:
                    break
                j -= 1
    for i in range(len(range_) - 2):
        if i + 2 not in func_words:
            j = i + 1
            while j >= 1:
                if s1[j].item() != 0:
                    s2[i + 2] = s1[i + 2].to(torch.float64) - s1[j].to(torch.float64)
                    break
                if j == 1:
                    break
                j -= 1
    # lines 307-322
    count_fun = 0
    sum_s2 = 0.0
    mt_1 = torch.tensor(0, dtype=torch.float64)
    for i in range(len(range_) - 2):
        if s2[i + 2] != 0:
            count_fun += 1
            sum_s2 += s2[i + 2].item()
            s2_mean = sum_s2 / count_fun
            w = torch.abs(mt_1 - s2_mean) / (
                torch.abs(s2[i + 2] - s2_mean) + torch.abs(mt_1 - s2_mean)
            )
            alpha = 0.9 + 0.1 * w
            mt[i + 2] = alpha * s2[i + 2] + (1 - alpha) * mt_1
            mt_1 = s2[i + 2]
    result = OfficialDraft(
        words=["".join(new_tokens[left:right]) for left, right in range_],
        ranges=range_,
        max_atten=max_atten,
        entropies=entropies,
        s1=[float(v) for v in s1],
        s2=[float(v) for v in s2],
        mt=[float(v) for v in mt],
        fun_word=[int(v) for v in fun],
        atten=atten,
        hallucination=False,
    )
    # hallucination_check, lines 388-463
    sentences = [sent.text.strip() for sent in nlp(text).sents]
    sentences = [sent for sent in sentences if len(sent) > 0]
    wid = 0
    for sent in sentences:
        wl, wr = wid, wid
        if wid == new_words:
            break
        while wr < new_words and sent not in "".join(new_tokens[range_[wl][0] : range_[wr][1]]):
            wr += 1
        if wr < new_words:
            wr += 1
        wid = wr
        if wl == wr:
            continue
        max_atten_sent = max_atten[wl:wr]
        max_atten_sent = max_atten_sent * (wr - wl) / (max_atten_sent.sum() + 1e-10)
        value = max_atten_sent * torch.tensor([m.item() for m in mt[wl:wr]], dtype=torch.float64)
        thres = torch.abs(value) > threshold if thres_abs else value > threshold
        if True in thres:
            for i in range(wl, wr):
                if thres[i - wl].item():
                    result.hallucination = True
                    result.curr_st, result.curr_en = i, wr
                    result.curr_thres = thres[i - wl : wr]
                    return result
    return result


def official_query(
    block_tokens: Sequence[Sequence[str]],
    draft: OfficialDraft,
    nlp: Callable[[str], Any],
    top_k: int,
) -> str:
    """``generate_retrieve_qry`` (lines 465-517) for a draft that triggered."""
    ranges = [merge_tokens(b) if b else [] for b in block_tokens]
    words_of = [
        ["".join(b[left:right]) for left, right in r]
        for b, r in zip(block_tokens, ranges, strict=True)
    ]
    assert draft.curr_st is not None and draft.curr_en is not None
    assert draft.curr_thres is not None
    ques_st = len(ranges[0]) + len(ranges[1])
    ques_en = ques_st + len(ranges[2])
    text_st = ques_en + len(ranges[3])
    text_en = text_st + len(ranges[4]) + draft.curr_st
    merged_words = [w for ws in words_of for w in ws] + draft.words
    ques_atten = draft.atten[draft.curr_st : draft.curr_en, ques_st:ques_en]
    text_atten = draft.atten[draft.curr_st : draft.curr_en, text_st:text_en]
    ques_atten = ques_atten[draft.curr_thres, :].sum(dim=0)
    text_atten = text_atten[draft.curr_thres, :].sum(dim=0)
    merged_text = "".join("".join(b) for b in block_tokens) + "".join(draft.words)
    doc = nlp(merged_text)
    real_words = {token.text for token in doc if token.pos_ in REAL_POS}
    real_pairs = []
    for i in range(ques_st, ques_en):
        word = merged_words[i]
        if match(word, real_words):
            real_pairs.append((ques_atten[i - ques_st], word, i))
    for i in range(text_st, text_en):
        word = merged_words[i]
        if match(word, real_words):
            real_pairs.append((text_atten[i - text_st], word, i))
    top_k = min(top_k, len(real_pairs))
    real_pairs.sort(key=lambda x: -x[0])
    real_pairs = real_pairs[:top_k]
    real_pairs.sort(key=lambda x: x[2])
    return " ".join([x[1] for x in real_pairs])
