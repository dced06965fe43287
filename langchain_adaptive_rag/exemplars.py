"""Few-shot prompts for the benchmarks the papers evaluate on.

Each benchmark gets the prompt format of the DRAGIN code (the format under which the
papers' thresholds were tuned): its number of demonstrations (2WikiMultihopQA 6, HotpotQA
8, IIRC 8, StrategyQA 6), its question instruction and its answer kind (StrategyQA answers
"yes" or "no"). The demonstrations are this package's own chain-of-thought examples in
each benchmark's style (compositional, comparison, inference and bridge questions;
arithmetic over linked facts for IIRC; implicit yes/no reasoning for StrategyQA). To run
with exactly the demonstrations of a paper, save them as a JSON or JSON-lines file and
pass it: ``dataset_prompts("hotpotqa", exemplars=load_exemplars(path))``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal, get_args

from langchain_adaptive_rag.errors import AdaptiveRAGError, DatasetFormatError
from langchain_adaptive_rag.prompts import Exemplar, QAPrompts

_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone UTF-16 surrogate: JSON can spell one (``\\ud800``), no UTF-8 text holds one."""

__all__ = [
    "DATASET_GENERATE_MAX_LENGTH",
    "HOTPOTQA_EXEMPLARS",
    "IIRC_EXEMPLARS",
    "SIMPLE_QA_EXEMPLARS",
    "STRATEGYQA_EXEMPLARS",
    "WIKI_MULTIHOP_EXEMPLARS",
    "PromptDataset",
    "dataset_prompts",
    "load_exemplars",
]

PromptDataset = Literal["2wikimultihopqa", "hotpotqa", "iirc", "strategyqa", "simple_qa"]
"""Benchmarks with a prompt of their own; ``simple_qa`` serves single-hop open-domain QA
(NaturalQuestions, TriviaQA, SQuAD, PopQA)."""

WIKI_MULTIHOP_EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar(
        question="When was the director of film Jaws born?",
        reasoning=(
            "The film Jaws was directed by Steven Spielberg. "
            "Steven Spielberg was born on December 18, 1946."
        ),
        answer="December 18, 1946",
    ),
    Exemplar(
        question="Are both Lyon and Ghent located in the same country?",
        reasoning=(
            "Lyon is located in the country of France. Ghent is located in the country of "
            "Belgium. Thus, they are not in the same country."
        ),
        answer="no",
    ),
    Exemplar(
        question=(
            "Do the director of film Psycho and the director of film Rashomon have the same "
            "nationality?"
        ),
        reasoning=(
            "Psycho was directed by Alfred Hitchcock. Rashomon was directed by Akira "
            "Kurosawa. Alfred Hitchcock's nationality is British. Akira Kurosawa's "
            "nationality is Japanese. Thus, they do not have the same nationality."
        ),
        answer="no",
    ),
    Exemplar(
        question="Who is the paternal grandfather of Charles III?",
        reasoning=(
            "The father of Charles III is Prince Philip, Duke of Edinburgh. The father of "
            "Prince Philip is Prince Andrew of Greece and Denmark. Thus, the paternal "
            "grandfather of Charles III is Prince Andrew of Greece and Denmark."
        ),
        answer="Prince Andrew of Greece and Denmark",
    ),
    Exemplar(
        question="Who was born first, Marie Curie or Albert Einstein?",
        reasoning=(
            "Marie Curie was born on 7 November 1867. Albert Einstein was born on 14 March "
            "1879. Thus, Marie Curie was born first."
        ),
        answer="Marie Curie",
    ),
    Exemplar(
        question="Which film has the director who died later, Vertigo or Seven Samurai?",
        reasoning=(
            "The film Vertigo was directed by Alfred Hitchcock. The film Seven Samurai was "
            "directed by Akira Kurosawa. Alfred Hitchcock died on 29 April 1980. Akira "
            "Kurosawa died on 6 September 1998. Thus, the director of Seven Samurai died "
            "later."
        ),
        answer="Seven Samurai",
    ),
)
"""Six 2WikiMultihopQA-style demonstrations: compositional, comparison, inference and
bridge-comparison questions."""

HOTPOTQA_EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar(
        question="In which country was the composer of the opera Carmen born?",
        reasoning=(
            "The opera Carmen was composed by Georges Bizet. Georges Bizet was born in "
            "Paris, France."
        ),
        answer="France",
    ),
    Exemplar(
        question="Were Ernest Hemingway and F. Scott Fitzgerald both American?",
        reasoning=(
            "Ernest Hemingway was an American novelist. F. Scott Fitzgerald was an American "
            "novelist. Thus, both were American."
        ),
        answer="yes",
    ),
    Exemplar(
        question="In which city is the university that Isaac Newton attended?",
        reasoning=(
            "Isaac Newton attended the University of Cambridge. The University of Cambridge "
            "is in the city of Cambridge, England."
        ),
        answer="Cambridge",
    ),
    Exemplar(
        question="Who was born first, Ludwig van Beethoven or Wolfgang Amadeus Mozart?",
        reasoning=(
            "Ludwig van Beethoven was born in December 1770. Wolfgang Amadeus Mozart was "
            "born on 27 January 1756. Thus, Mozart was born first."
        ),
        answer="Wolfgang Amadeus Mozart",
    ),
    Exemplar(
        question="The author of Pride and Prejudice was born in which English county?",
        reasoning=(
            "Pride and Prejudice was written by Jane Austen. Jane Austen was born in "
            "Steventon, Hampshire."
        ),
        answer="Hampshire",
    ),
    Exemplar(
        question="Which magazine was started first, Time or Newsweek?",
        reasoning=(
            "Time was first published in 1923. Newsweek was first published in 1933. Thus, "
            "Time was started first."
        ),
        answer="Time",
    ),
    Exemplar(
        question="Which river flows through the capital of Hungary?",
        reasoning="The capital of Hungary is Budapest. The Danube flows through Budapest.",
        answer="Danube",
    ),
    Exemplar(
        question="How many Academy Awards did the director of Titanic (1997) win for it?",
        reasoning=(
            "Titanic (1997) was directed by James Cameron. For Titanic, James Cameron won "
            "the Academy Awards for Best Picture, Best Director and Best Film Editing."
        ),
        answer="three",
    ),
)
"""Eight HotpotQA-style demonstrations: bridge, comparison and yes/no questions."""

IIRC_EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar(
        question="How many years after Harvard University was Yale University founded?",
        reasoning=(
            "Harvard University was founded in 1636. Yale University was founded in 1701. "
            "So Yale was founded 1701 - 1636 = 65 years after Harvard."
        ),
        answer="65",
    ),
    Exemplar(
        question="In what country was the composer of the Moonlight Sonata born?",
        reasoning=(
            "The Moonlight Sonata was composed by Ludwig van Beethoven. Beethoven was born "
            "in Bonn, which is in Germany."
        ),
        answer="Germany",
    ),
    Exemplar(
        question=(
            "How many years passed between the launch of Sputnik 1 and the first Moon landing?"
        ),
        reasoning=(
            "Sputnik 1 was launched in 1957. The first Moon landing was in 1969. Thus, "
            "1969 - 1957 = 12 years passed."
        ),
        answer="12",
    ),
    Exemplar(
        question="When was the university that Isaac Newton attended founded?",
        reasoning=(
            "Isaac Newton attended the University of Cambridge. The University of Cambridge "
            "was founded in 1209."
        ),
        answer="1209",
    ),
    Exemplar(
        question=(
            "Which was founded first, the club Lionel Messi joined in 2021 or the club he "
            "joined in 2023?"
        ),
        reasoning=(
            "In 2021 Lionel Messi joined Paris Saint-Germain. In 2023 he joined Inter Miami. "
            "Paris Saint-Germain was founded in 1970. Inter Miami was founded in 2018. Thus, "
            "Paris Saint-Germain was founded first."
        ),
        answer="Paris Saint-Germain",
    ),
    Exemplar(
        question="How long is the river that flows through Cairo?",
        reasoning="Cairo lies on the Nile. The Nile is about 6,650 kilometres long.",
        answer="6,650 kilometres",
    ),
    Exemplar(
        question="Did the author of Hamlet live longer than the author of Don Quixote?",
        reasoning=(
            "Hamlet was written by William Shakespeare, who was born in 1564 and died in "
            "1616, so he lived about 1616 - 1564 = 52 years. Don Quixote was written by "
            "Miguel de Cervantes, who was born in 1547 and died in 1616, so he lived about "
            "1616 - 1547 = 69 years. Thus, the author of Hamlet did not live longer."
        ),
        answer="no",
    ),
    Exemplar(
        question=(
            "How many years after the Wright brothers' first flight did Charles Lindbergh "
            "fly alone across the Atlantic?"
        ),
        reasoning=(
            "The Wright brothers' first flight was in 1903. Charles Lindbergh flew alone "
            "across the Atlantic in 1927. Thus, it was 1927 - 1903 = 24 years later."
        ),
        answer="24",
    ),
)
"""Eight IIRC-style demonstrations: a fact from a linked article, often with arithmetic."""

STRATEGYQA_EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar(
        question="Would a week be enough to read every book in the Library of Congress?",
        reasoning=(
            "The Library of Congress holds more than 25 million books. A week has 168 "
            "hours. Thus, a week is far too short to read them all."
        ),
        answer="no",
    ),
    Exemplar(
        question="Did Julius Caesar ever use a telephone?",
        reasoning=(
            "Julius Caesar died in 44 BC. The telephone was invented in 1876. Thus, Julius "
            "Caesar never used a telephone."
        ),
        answer="no",
    ),
    Exemplar(
        question="Is the Pacific Ocean larger than the surface of the Moon?",
        reasoning=(
            "The Pacific Ocean covers about 165 million square kilometres. The surface of "
            "the Moon is about 38 million square kilometres. Thus, the Pacific Ocean is "
            "larger."
        ),
        answer="yes",
    ),
    Exemplar(
        question=(
            "Could a person born in 1990 have voted in the 2012 United States presidential "
            "election?"
        ),
        reasoning=(
            "A person born in 1990 was 22 years old in 2012. United States citizens can "
            "vote from the age of 18. Thus, such a person could have voted."
        ),
        answer="yes",
    ),
    Exemplar(
        question="Was the Eiffel Tower standing when the Titanic sank?",
        reasoning=(
            "The Eiffel Tower was completed in 1889. The Titanic sank in 1912. Thus, the "
            "Eiffel Tower was already standing."
        ),
        answer="yes",
    ),
    Exemplar(
        question="Would water freeze on a summer afternoon in the Sahara?",
        reasoning=(
            "Water freezes at 0 degrees Celsius. Summer afternoons in the Sahara are often "
            "hotter than 40 degrees Celsius. Thus, water would not freeze."
        ),
        answer="no",
    ),
)
"""Six StrategyQA-style demonstrations of implicit yes/no reasoning (3 yes, 3 no)."""

SIMPLE_QA_EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar(
        question="Who wrote the novel Nineteen Eighty-Four?",
        reasoning="Nineteen Eighty-Four is a novel by George Orwell.",
        answer="George Orwell",
    ),
    Exemplar(
        question="What is the capital of Australia?",
        reasoning="The capital of Australia is Canberra.",
        answer="Canberra",
    ),
    Exemplar(
        question="In which year did the Berlin Wall fall?",
        reasoning="The Berlin Wall fell in 1989.",
        answer="1989",
    ),
    Exemplar(
        question="Which chemical element has the symbol Fe?",
        reasoning="Fe is the chemical symbol of iron.",
        answer="iron",
    ),
)
"""Four single-hop demonstrations for open-domain QA."""

_EXEMPLARS: dict[str, tuple[Exemplar, ...]] = {
    "2wikimultihopqa": WIKI_MULTIHOP_EXEMPLARS,
    "hotpotqa": HOTPOTQA_EXEMPLARS,
    "iirc": IIRC_EXEMPLARS,
    "strategyqa": STRATEGYQA_EXEMPLARS,
    "simple_qa": SIMPLE_QA_EXEMPLARS,
}

_CASE_TEMPLATES: dict[str, str] = {
    "hotpotqa": (
        "Answer the following question by reasoning step-by-step, following the example "
        "above.\nQuestion: {question}\nAnswer:"
    ),
    "strategyqa": (
        "Following the examples above, answer the question by reasoning step-by-step.\n\n"
        "Question: {question}\nAnswer:"
    ),
}

DATASET_GENERATE_MAX_LENGTH: dict[str, int] = {
    "2wikimultihopqa": 64,
    "hotpotqa": 100,
    "iirc": 128,
    "strategyqa": 100,
    "simple_qa": 64,
}
"""The answer budget (``MethodConfig.generate_max_length``) of the DRAGIN configs."""


def dataset_prompts(
    dataset: PromptDataset,
    *,
    exemplars: Sequence[Exemplar] | None = None,
    num_exemplars: int | None = None,
) -> QAPrompts:
    """The few-shot prompt of one benchmark.

    Args:
        dataset: The benchmark.
        exemplars: Demonstrations to use instead of the built-in ones (for example the
            papers' own, read with [`load_exemplars`][]).
        num_exemplars: Keep only the first ``n`` demonstrations (default: all).

    Returns:
        The prompt templates (the benchmark's demonstrations, question instruction and
        answer kind, ``yes_no`` for StrategyQA and ``span`` otherwise).

    Raises:
        AdaptiveRAGError: The benchmark is unknown or ``num_exemplars`` is negative.
    """
    if dataset not in _EXEMPLARS:
        msg = (
            f"Received dataset={dataset!r}. Expected one of {list(get_args(PromptDataset))}; "
            "for another benchmark build QAPrompts(exemplars=...) yourself."
        )
        raise AdaptiveRAGError(msg)
    shots = tuple(_EXEMPLARS[dataset] if exemplars is None else exemplars)
    if num_exemplars is not None:
        if num_exemplars < 0:
            msg = f"num_exemplars must be >= 0, got {num_exemplars}."
            raise AdaptiveRAGError(msg)
        shots = shots[:num_exemplars]
    prompts = QAPrompts(
        exemplars=shots,
        answer_kind="yes_no" if dataset == "strategyqa" else "span",
    )
    if dataset in _CASE_TEMPLATES:
        prompts = replace(prompts, case_template=_CASE_TEMPLATES[dataset])
    return prompts


def load_exemplars(path: str | Path) -> tuple[Exemplar, ...]:
    """Read demonstrations from a JSON list or a JSON-lines file.

    Each record has ``question``, ``answer`` (a string; ``true``/``false`` read as "yes"/"no")
    and the reasoning as ``reasoning`` or ``cot`` (a string, or a list of sentences that are
    joined).

    Args:
        path: The file.

    Returns:
        The demonstrations, in file order.

    Raises:
        DatasetFormatError: The file is not UTF-8, not JSON, nested too deep, or a record
            lacks a field; the message names the file, the record (JSON lines: the line)
            and the field.
        AdaptiveRAGError: The file cannot be read.
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as error:
        msg = f"Cannot read exemplars from {file}: {error}. Expected a JSON or JSON-lines file."
        raise AdaptiveRAGError(msg) from error
    text = _utf8_text(file, raw)
    records: list[tuple[str, object]] = []
    if text.lstrip().startswith("["):
        data = _parse(file, text, None)
        if not isinstance(data, list):
            raise DatasetFormatError(
                str(file),
                location=None,
                field=None,
                received=type(data).__name__,
                expected="a JSON list of exemplar records",
            )
        records = [(f"record {i}", item) for i, item in enumerate(data)]
    else:
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                records.append((f"line {number}", _parse(file, line, number)))
    return tuple(_exemplar(file, where, record) for where, record in records)


def _utf8_text(file: Path, raw: bytes) -> str:
    """The file's text; a byte that is not UTF-8 is named with its line and column."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        before = raw[: error.start]
        line = before.count(b"\n") + 1
        column = error.start - (before.rfind(b"\n") + 1) + 1
        raise DatasetFormatError(
            str(file),
            location=f"line {line}",
            field=None,
            received=f"the byte 0x{raw[error.start]:02X} (column {column}), which is not UTF-8",
            expected="UTF-8 text",
            fix="re-encode the file as UTF-8 (for example: iconv -f latin1 -t utf-8 FILE > NEW)",
        ) from None


def _parse(file: Path, text: str, line: int | None) -> object:
    """One JSON value: a line of a JSON-lines file (``line``) or the whole file."""
    expected = "one JSON object per line" if line is not None else "a JSON list of exemplars"
    location: str | None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        at_line, column = (line, error.pos + 1) if line is not None else (error.lineno, error.colno)
        received = f"text that is not valid JSON ({error.msg} at column {column})"
        location = f"line {at_line}"
    except (RecursionError, ValueError) as error:  # nesting too deep, a number too long
        kind = "nesting too deep" if isinstance(error, RecursionError) else str(error)
        received = f"JSON that Python cannot read ({kind})"
        location = None if line is None else f"line {line}"
    raise DatasetFormatError(
        str(file), location=location, field=None, received=received, expected=expected
    )


def _exemplar(file: Path, where: str, record: object) -> Exemplar:
    if not isinstance(record, dict):
        raise DatasetFormatError(
            str(file),
            location=where,
            field=None,
            received=type(record).__name__,
            expected="a JSON object with question, reasoning (or cot) and answer",
        )
    reasoning = record.get("reasoning", record.get("cot"))
    if isinstance(reasoning, list) and all(isinstance(s, str) for s in reasoning):
        reasoning = " ".join(s.strip() for s in reasoning)
    fields = {"question": record.get("question"), "reasoning": reasoning}
    answer = record.get("answer")
    fields["answer"] = ("yes" if answer else "no") if isinstance(answer, bool) else answer
    for name, value in fields.items():
        shown = "reasoning (or cot)" if name == "reasoning" else name
        if not isinstance(value, str):
            raise DatasetFormatError(
                str(file),
                location=where,
                field=shown,
                received=f"{value!r}"[:80],
                expected=f"a string (record keys: {sorted(record)})",
            )
        if _SURROGATE.search(value):
            raise DatasetFormatError(
                str(file),
                location=where,
                field=shown,
                received="text with an unpaired surrogate escape (such as \\ud800)",
                expected="valid Unicode text",
            )
    return Exemplar(
        question=str(fields["question"]),
        reasoning=str(fields["reasoning"]),
        answer=str(fields["answer"]),
    )
