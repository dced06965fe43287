"""The official IRCoT run, restated from its code for parity tests (not the package's code).

Sources: StonyBrookNLP/ircot (commit 3c1820f), ``commaqa/inference/ircot.py``:
``remove_wh_words`` (lines 58-62), ``is_reasoning_sentence`` (30-41),
``is_para_closely_matching`` (111-130), ``para_to_text`` (133-142), the BM25 branch of
``RetrieveAndResetParagraphsParticipant.query`` (339-352, 431-500),
``StepByStepCOTGenParticipant.query`` (790-895), ``StepByStepExitControllerParticipant.query``
(933-990), ``AnswerExtractor.query`` (210-250); ``commaqa/models/gpt3generator.py``
(``stop=["\\n"]``, lines 82-92); and the configs ``base_configs/ircot_qa_*.jsonnet`` (the
exit controller's regex ``.* answer is:? (.*)\\.?`` with ``remove_last_fullstop``, the
reader's ``extract_answer`` with ``match_all_on_failure``) and Adaptive-RAG's
``oner_qa_*.jsonnet`` (the single-step route: one retrieval with the original question).

The model is a list of outputs (the i-th generation call gets the i-th, cut at its first
line break as the generator's stop string does); the retriever is a list of results (the
i-th retrieval gets the i-th list of ``(title, text)`` pairs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz

ANSWER_REGEX = re.compile(".* answer is:? (.*)\\.?")


def remove_wh_words(text: str) -> str:
    wh_words = {"who", "what", "when", "where", "why", "which", "how", "does", "is"}
    words = [word for word in text.split(" ") if word.strip().lower() not in wh_words]
    return " ".join(words)


def is_reasoning_sentence(sentence: str) -> bool:
    for starter in ["thus ", "thus,", "so ", "so,", "that is,", "therefore", "hence"]:
        if sentence.lower().startswith(starter):
            return True
    number = "(\\d[\\d,]*\\.?\\d+|\\d+)"
    regex = re.compile(f"(.*){number} ([+-]) {number} = {number}(.*)")
    return bool(re.match(regex, sentence))


def is_para_closely_matching(
    existing_titles: list[str], existing_paras: list[str], new_title: str, new_para: str
) -> bool:
    if new_title in existing_titles and new_para in existing_paras:
        return True
    for existing_title, existing_para in zip(existing_titles, existing_paras, strict=True):
        condition_1 = fuzz.ratio(existing_title, new_title) >= 90
        condition_2 = fuzz.ratio(existing_para, new_para) >= 90
        if condition_1 and condition_2:
            return True
    return False


def para_view(para: str, max_num_words: int = 350) -> str:
    """``para_to_text`` without the title line: the first 350 space-separated words."""
    return " ".join(para.split(" ")[:max_num_words]).strip()


@dataclass
class OfficialRun:
    """What the official run did: its queries, what each generation call was shown, its
    sentences and its answer."""

    queries: list[str] = field(default_factory=list)
    shown: list[list[str]] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    answer: str = ""
    calls: int = 0


class _Script:
    def __init__(self, outputs: list[str], results: list[list[tuple[str, str]]]) -> None:
        self.outputs, self.results = list(outputs), list(results)
        self.run = OfficialRun()

    def generate(self, paras: list[str]) -> str:
        self.run.calls += 1
        self.run.shown.append([para_view(p) for p in paras])
        return self.outputs.pop(0).split("\n", 1)[0]  # stop=["\n"]

    def retrieve(self, query: str, titles: list[str], paras: list[str], max_paras: int) -> None:
        query = remove_wh_words(query)
        if not query.strip():  # "can happen when query is based on last cot gen"
            return
        self.run.queries.append(query)
        for title, text in self.results.pop(0):
            if len(text.split(" ")) > 600:
                continue
            if is_para_closely_matching(titles, paras, title, text):
                continue
            if len(paras) >= max_paras:
                continue
            titles.append(title)
            paras.append(text)


def _extract(output: str) -> str:
    """``AnswerExtractor`` with the configs' regex, ``match_all_on_failure`` and
    ``remove_last_fullstop``."""
    if output.startswith('"') and output.endswith('"'):
        output = output[1:-1]
    m = ANSWER_REGEX.match(output)
    if not m:
        m = re.compile(r"(.*)").match(output)
    assert m is not None
    answer = m.group(1)
    return answer[:-1] if answer.endswith(".") else answer


def official_ircot(
    question: str,
    outputs: list[str],
    results: list[list[tuple[str, str]]],
    nlp: Any,
    *,
    reader: str = "cot",
    max_num_sentences: int = 10,
    global_max_num_paras: int = 15,
) -> OfficialRun:
    """The ircot_qa configs' run: retrieve, one sentence, exit check, ..., then the reader."""
    script = _Script(outputs, results)
    run = script.run
    titles: list[str] = []
    paras: list[str] = []
    while True:
        # step_by_step_bm25_retriever: query_source question_or_last_generated_sentence
        kept = [s for s in run.sentences if not is_reasoning_sentence(s)]
        last = kept[-1].strip() if kept else ""
        script.retrieve(last if last else question, titles, paras, global_max_num_paras)
        # step_by_step_cot_gen with disable_exit=True
        if len(run.sentences) < max_num_sentences:
            new_generation = script.generate(paras).strip()
            new_sents = list(nlp(new_generation).sents)
            run.sentences.append(new_sents[0].text if new_sents else "")
        # step_by_step_exit_controller
        exit_generation = bool(run.sentences and not run.sentences[-1])
        if len(run.sentences) >= max_num_sentences:
            exit_generation = True
        chain_answer = " ".join(run.sentences)
        m = ANSWER_REGEX.match(run.sentences[-1]) if run.sentences else None
        if m:
            chain_answer = m.group(1)[:-1] if m.group(1).endswith(".") else m.group(1)
            exit_generation = True
        if exit_generation:
            break
    if reader == "none":
        run.answer = chain_answer
    elif reader == "cot":  # answer_main_question, then extract_answer
        run.answer = _extract(script.generate(paras).strip())
    else:  # direct: the reader's output is the answer
        run.answer = script.generate(paras).strip()
    return run


def official_single_step(
    question: str, results: list[list[tuple[str, str]]], *, global_max_num_paras: int = 15
) -> OfficialRun:
    """Adaptive-RAG's ``oner_qa`` retrieval: one with the original question."""
    script = _Script([], results)
    titles: list[str] = []
    paras: list[str] = []
    script.retrieve(question, titles, paras, global_max_num_paras)
    script.run.shown.append([para_view(p) for p in paras])
    return script.run
