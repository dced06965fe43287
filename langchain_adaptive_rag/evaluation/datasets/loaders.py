"""Dispatch by detected format and the public loaders."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from langchain_adaptive_rag.errors import AdaptiveRAGError, DatasetFormatError
from langchain_adaptive_rag.evaluation.datasets.example import (
    Example,
    PathLike,
    canonical_dataset_name,
)
from langchain_adaptive_rag.evaluation.datasets.formats import (
    _iter_text,
    _parse_generic,
    _parse_hotpot_style,
    _parse_iirc_passage,
    _parse_squad_json,
    _parse_strategyqa,
    _parse_triviaqa_json,
)
from langchain_adaptive_rag.evaluation.datasets.reading import (
    _iter_json_lines,
    _load_json,
    _sniff,
)
from langchain_adaptive_rag.evaluation.datasets.records import _dedupe, _describe, _Record

# --------------------------------------------------------------------------------------
# Dispatch


def _parse_record(
    rec: _Record,
    dataset: str,
    number: int,
    aliases: Mapping[str, Sequence[str]] | None,
    include_unanswerable: bool,
) -> Iterator[Example]:
    if dataset == "strategyqa":
        yield _parse_strategyqa(rec, dataset)
    elif rec.has("questions") and dataset == "iirc":
        yield from _parse_iirc_passage(rec, dataset, include_unanswerable)
    elif rec.has("_id") and isinstance(rec.get("context"), list) and rec.has("supporting_facts"):
        yield _parse_hotpot_style(rec, dataset, aliases)
    elif dataset == "musique" and rec.get("answerable") is False:
        return
    else:
        yield _parse_generic(rec, dataset, number)


def _iter_examples(
    path: Path,
    dataset: str,
    aliases: Mapping[str, Sequence[str]] | None,
    include_unanswerable: bool,
) -> Iterator[Example]:
    kind = _sniff(path)
    if kind == "text":
        yield from _iter_text(path, dataset)
        return
    located: Iterable[tuple[str, object]]
    if kind == "jsonl":
        located = _iter_json_lines(path)
    else:
        data = _load_json(path)
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            yield from _parse_squad_json(data, str(path), dataset)
            return
        if isinstance(data, dict) and isinstance(data.get("Data"), list):
            yield from _parse_triviaqa_json(data, str(path), dataset)
            return
        if not isinstance(data, list):
            raise DatasetFormatError(
                str(path),
                location="line 1",
                field=None,
                received=_describe(data),
                expected=(
                    'a JSON list of records, the SQuAD {"data": [...]} or the TriviaQA '
                    '{"Data": [...]} layout'
                ),
            )
        located = ((f"record {index}", item) for index, item in enumerate(data))
    number = 0
    for location, value in located:
        rec = _Record(value, str(path), location)
        for example in _parse_record(rec, dataset, number, aliases, include_unanswerable):
            yield example
            number += 1


def _resolve_aliases(
    aliases: PathLike | Mapping[str, Sequence[str]] | None,
) -> Mapping[str, Sequence[str]] | None:
    if aliases is None or isinstance(aliases, Mapping):
        return aliases
    return read_id_aliases(aliases)


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or limit < 0):
        msg = f"limit={limit!r}; expected None (all examples) or an integer >= 0."
        raise AdaptiveRAGError(msg)


def _load(
    path: PathLike,
    dataset: str,
    *,
    limit: int | None,
    aliases: Mapping[str, Sequence[str]] | None = None,
    include_unanswerable: bool = False,
) -> list[Example]:
    _check_limit(limit)
    file = Path(path)
    if not file.is_file():
        msg = f"Dataset file {str(file)!r} does not exist or is not a file."
        raise AdaptiveRAGError(msg)
    examples: list[Example] = []
    if limit == 0:
        return examples
    try:
        for example in _iter_examples(file, dataset, aliases, include_unanswerable):
            examples.append(example)
            if limit is not None and len(examples) >= limit:
                break
    except OSError as exc:
        msg = (
            f"Could not read the dataset file {str(file)!r}: {exc.strerror or exc}. Expected "
            "a readable file. Fix: check its permissions, or copy it somewhere readable."
        )
        raise AdaptiveRAGError(msg) from None
    return examples


# --------------------------------------------------------------------------------------
# Public loaders


def read_id_aliases(path: PathLike) -> dict[str, tuple[str, ...]]:
    """Read 2WikiMultihopQA's ``id_aliases.json``: one ``{Q_id, aliases, demonyms}`` per line.

    Args:
        path: The file.

    Returns:
        Each Wikidata id mapped to its aliases followed by its demonyms (duplicates dropped).

    Raises:
        DatasetFormatError: A line is not such an object.
    """
    table: dict[str, tuple[str, ...]] = {}
    for location, value in _iter_json_lines(Path(path)):
        rec = _Record(value, str(path), location, expected="an object {Q_id, aliases, demonyms}")
        names = list(rec.strings("aliases", allow_single=False, allow_empty=True))
        if rec.get("demonyms") is not None:
            names.extend(rec.strings("demonyms", allow_single=False, allow_empty=True))
        table[rec.identifier("Q_id")] = _dedupe(names)
    return table


def load_hotpotqa(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load HotpotQA: the official distractor/fullwiki json or JSON lines with ``paragraphs``.

    Args:
        path: ``hotpot_dev_distractor_v1.json`` or a JSON-lines file.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples; ``context`` holds the paragraphs, ``supporting`` the gold ones.
    """
    return _load(path, "hotpotqa", limit=limit)


def load_2wikimultihopqa(
    path: PathLike,
    *,
    limit: int | None = None,
    aliases: PathLike | Mapping[str, Sequence[str]] | None = None,
) -> list[Example]:
    """Load 2WikiMultihopQA: the official ``dev.json``, a question list, or JSON lines.

    Args:
        path: ``dev.json`` (records with ``_id``, ``answer``, ``answer_id``, ``context``...),
            a JSON list of ``{question, answer}`` records, or a JSON-lines file.
        limit: Keep only the first ``limit`` examples.
        aliases: ``id_aliases.json`` (or its contents as from [`read_id_aliases`][]):
            each question's golds gain the aliases and demonyms of its ``answer_id``.

    Returns:
        The examples.
    """
    return _load(path, "2wikimultihopqa", limit=limit, aliases=_resolve_aliases(aliases))


def load_iirc(
    path: PathLike, *, limit: int | None = None, include_unanswerable: bool = False
) -> list[Example]:
    """Load IIRC's ``dev.json`` (a list of passages, each with its questions).

    Args:
        path: The file (or JSON lines of ``{id, question, answers}`` rows).
        limit: Keep only the first ``limit`` examples.
        include_unanswerable: Keep questions whose answer type is ``none``, with the gold
            ``"noanswer"``; by default they are skipped.

    Returns:
        The examples; ``type`` is the answer type; ``supporting`` holds the main passage
        and the context snippets the annotator selected.
    """
    return _load(path, "iirc", limit=limit, include_unanswerable=include_unanswerable)


def load_strategyqa(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load StrategyQA: the official json list or JSON lines with a boolean ``answer``.

    Args:
        path: ``strategyqa_train.json`` or a JSON-lines file.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples; ``answers`` is ``("yes",)`` or ``("no",)`` and ``answer_bool`` the
        boolean.
    """
    return _load(path, "strategyqa", limit=limit)


def load_open_qa(
    path: PathLike,
    dataset: Literal["nq", "triviaqa", "squad", "popqa", "musique"],
    *,
    limit: int | None = None,
) -> list[Example]:
    """Load an open-domain QA file.

    Args:
        path: NQ-open / DPR-style JSON lines, DPR ``*.qa.csv``, the SQuAD or TriviaQA json,
            a PopQA TSV, or re-serialised ``{id, question, answers}`` JSON lines.
        dataset: The dataset label for the examples.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples.
    """
    return _load(path, canonical_dataset_name(dataset), limit=limit)


def load_popqa(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load PopQA's ``popQA.tsv`` (or JSON lines with ``possible_answers``).

    Args:
        path: The file.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples; ``extra`` holds the other columns (``prop``, ``s_pop`` as int, ...).
    """
    return _load(path, "popqa", limit=limit)


def load_retrievalqa(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load RetrievalQA JSON lines.

    Args:
        path: ``retrievalqa.jsonl`` (or the 250-question ``retrievalqa_gpt4.jsonl``).
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples; ``context`` holds the pre-retrieved passages,
        ``param_knowledge_answerable`` the label when the file has it, ``extra`` the
        ``data_source``.
    """
    return _load(path, "retrievalqa", limit=limit)


def load_musique(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load MuSiQue JSON lines (answerable questions; aliases join the gold answers).

    Args:
        path: ``musique_ans_v1.0_dev.jsonl`` or ``{id, question, answers}`` JSON lines.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples.
    """
    return _load(path, "musique", limit=limit)


def load_dataset(
    name: str,
    path: PathLike,
    *,
    limit: int | None = None,
    aliases: PathLike | Mapping[str, Sequence[str]] | None = None,
) -> list[Example]:
    """Load a QA dataset file, detecting its layout from the content.

    Args:
        name: One of [`DATASET_NAMES`][] (or a synonym, see
            [`canonical_dataset_name`][]).
        path: The file in its native format (see the module docstring).
        limit: Keep only the first ``limit`` examples (JSON-lines files stop reading there).
        aliases: 2WikiMultihopQA only: ``id_aliases.json`` or a mapping from answer id to
            aliases.

    Returns:
        The examples, in file order.

    Raises:
        AdaptiveRAGError: Unknown name, missing file, bad ``limit``, or ``aliases`` given
            for another dataset.
        DatasetFormatError: The file is malformed (the error names the line or record,
            the field, what was received and what was expected).
    """
    dataset = canonical_dataset_name(name)
    if aliases is not None and dataset != "2wikimultihopqa":
        msg = (
            f"aliases were given for dataset {dataset!r}; answer-id aliases exist only for "
            "2wikimultihopqa. Fix: drop the aliases argument."
        )
        raise AdaptiveRAGError(msg)
    return _load(path, dataset, limit=limit, aliases=_resolve_aliases(aliases))
