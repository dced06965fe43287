"""Malformed dataset files raise DatasetFormatError naming file and line, whatever they hold.

Property-based: small valid files of every supported layout are mutated (cut short, bytes
inserted or replaced, Latin-1 bytes, values swapped for other types, nested thousands of
levels deep, integers of thousands of digits, huge TSV fields) and loaded; the only
exception allowed is DatasetFormatError whose location names a line or record. Then the
crash classes one by one, with the exact line and field, and official layouts written on
one line (json.dump without indent).
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langchain_adaptive_rag.errors import DatasetFormatError
from langchain_adaptive_rag.evaluation import (
    iter_passages,
    load_dataset,
    load_qrels,
    read_id_aliases,
)

Loader = Callable[[Path], object]

HOTPOT = [
    {
        "_id": "h1",
        "question": "Which band did the singer join?",
        "answer": "The Band",
        "type": "bridge",
        "level": "medium",
        "supporting_facts": [["Song X", 0], ["Singer Y", 1]],
        "context": [["Song X", ["Song X is a song."]], ["Singer Y", ["Y is a singer.", " Y."]]],
    },
    {
        "_id": "h2",
        "question": "Are A and B both cities?",
        "answer": "yes",
        "supporting_facts": [["A", 0]],
        "context": [["A", ["A is a city."]]],
    },
]
WIKI = [{**HOTPOT[0], "_id": "w1", "answer_id": "Q1", "evidences": [["a", "b", "c"]]}]
ALIASES = [{"Q_id": "Q1", "aliases": ["Band"], "demonyms": ["Bandish"]}]
IIRC = [
    {
        "title": "Main",
        "text": "Main text.",
        "links": [],
        "questions": [
            {
                "qid": "i1",
                "question": "What?",
                "answer": {"type": "span", "answer_spans": [{"text": "x", "passage": "main"}]},
                "context": [{"passage": "main", "text": "Main text.", "indices": [0, 4]}],
            },
            {
                "qid": "i2",
                "question": "How many?",
                "answer": {"type": "value", "answer_value": "3"},
            },
        ],
    }
]
STRATEGYQA = [{"qid": "s1", "term": "T", "question": "Is it?", "answer": True, "facts": ["f"]}]
NQ_OPEN = [
    {"question": "who sang it", "answer": ["Bob", "Robert"]},
    {"question": "q", "answer": ["a"]},
]
DPR_STYLE = [{"question": "q", "answers": ["a"], "ctxs": [{"id": "1", "title": "T", "text": "x"}]}]
RETRIEVALQA = [
    {
        "data_source": "popqa",
        "question_id": 7,
        "question": "Who?",
        "ground_truth": ["Ann"],
        "context": [{"title": "T", "text": "Ann."}],
        "param_knowledge_answerable": 0,
    }
]
MUSIQUE = [
    {
        "id": "m1",
        "question": "Where?",
        "answer": "Oslo",
        "answer_aliases": ["Christiania"],
        "answerable": True,
        "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "Oslo.", "is_supporting": True}],
    }
]
SQUAD = {
    "version": "1.1",
    "data": [
        {
            "title": "Oil crisis",
            "paragraphs": [
                {
                    "context": "It began in October 1973.",
                    "qas": [
                        {"id": "s1", "question": "When?", "answers": [{"text": "1973"}]},
                        {"id": "s2", "question": "No?", "answers": [], "is_impossible": True},
                    ],
                }
            ],
        }
    ],
}
TRIVIAQA = {
    "Data": [
        {
            "Question": "Capital of Oman?",
            "QuestionId": "tc_1",
            "Answer": {"Value": "Muscat", "Aliases": ["Muscat", "Masqat"]},
        }
    ],
    "Version": 1.0,
}
POPQA_TSV = (
    "id\tsubj\tprop\ts_pop\to_pop\tquestion\tpossible_answers\n"
    '1\tGeorge\toccupation\t142\t2569\tWhat is his job?\t"[""politician""]"\n'
    '2\tAnn\tcountry\t7\t9\tWhere is Ann from?\t"[""Norway"", ""NO""]"\n'
)
DPR_QA_TSV = "who got the first nobel prize\t['Röntgen']\nwhen\t['May 18, 2018', \"2018\"]\n"
PASSAGES_TSV = 'id\ttext\ttitle\n1\tOslo is in Norway.\tOslo\n2\t"A ""quoted"" text"\tQ\n'
PASSAGES_JSONL = [
    {"id": "p1", "title": "Oslo", "text": "Oslo is in Norway."},
    {"id": 2, "contents": "T\nx"},
]
QRELS = [
    {"dataset": "nq", "qid": "q1", "passage_id": "p1"},
    {"dataset": "nq", "qid": 2, "passage_id": 3},
]


def _jsonl(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _dataset(name: str) -> Loader:
    return lambda path: load_dataset(name, path)


# name: (loader, text of a valid file, "json" when its values may be swapped as JSON)
SEEDS: dict[str, tuple[Loader, str, str]] = {
    "hotpotqa.json": (_dataset("hotpotqa"), json.dumps(HOTPOT, indent=1), "document"),
    "2wiki.json": (_dataset("2wikimultihopqa"), json.dumps(WIKI), "document"),
    "id_aliases.jsonl": (read_id_aliases, _jsonl(ALIASES), "lines"),
    "iirc.json": (_dataset("iirc"), json.dumps(IIRC, indent=2), "document"),
    "strategyqa.json": (_dataset("strategyqa"), json.dumps(STRATEGYQA, indent=2), "document"),
    "nq-open.jsonl": (_dataset("nq"), _jsonl(NQ_OPEN), "lines"),
    "dpr-style.jsonl": (_dataset("triviaqa"), _jsonl(DPR_STYLE), "lines"),
    "retrievalqa.jsonl": (_dataset("retrievalqa"), _jsonl(RETRIEVALQA), "lines"),
    "musique.jsonl": (_dataset("musique"), _jsonl(MUSIQUE), "lines"),
    "squad.json": (_dataset("squad"), json.dumps(SQUAD, indent=2), "document"),
    "squad-one-line.json": (_dataset("squad"), json.dumps(SQUAD), "document"),
    "triviaqa-one-line.json": (_dataset("triviaqa"), json.dumps(TRIVIAQA), "document"),
    "popQA.tsv": (_dataset("popqa"), POPQA_TSV, "text"),
    "nq-test.qa.csv": (_dataset("nq"), DPR_QA_TSV, "text"),
    "psgs.tsv": (lambda path: list(iter_passages(path)), PASSAGES_TSV, "text"),
    "passages.jsonl": (lambda path: list(iter_passages(path)), _jsonl(PASSAGES_JSONL), "lines"),
    "qrels.jsonl": (load_qrels, _jsonl(QRELS), "lines"),
}

_LOCATION = re.compile(r"(line|record) \d+|the top-level object")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dataset-fuzz")


def check_load(load: Loader, path: Path, data: bytes) -> None:
    """Loading ``data`` succeeds or raises DatasetFormatError naming the file and place."""
    path.write_bytes(data)
    try:
        load(path)
    except DatasetFormatError as exc:
        assert exc.path == str(path)
        assert str(exc).startswith(str(path))
        if exc.location is None:
            assert exc.received == "an empty file", str(exc)
        else:
            assert _LOCATION.fullmatch(exc.location), str(exc)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_every_seed_file_is_valid(scratch: Path, name: str) -> None:
    load, text, _ = SEEDS[name]
    path = scratch / name
    path.write_text(text, encoding="utf-8")
    assert load(path)


# --------------------------------------------------------------------------------------
# Mutations

INSERTS = [
    b"\xe9",  # Latin-1 e acute
    b"\xff\xfe",
    b"\x00",
    b"\xef\xbb\xbf",
    b'"',
    b"[",
    b"{",
    b"}",
    b",",
    b"\n",
    b"\t",
    b"\\",
    b"\\ud800",
    b"9" * 5000,
    b"[" * 3000,
    b"x" * 140_000,
]
_PLACEHOLDERS = {"@@deep@@": "[" * 5000 + "]" * 5000, "@@huge@@": "-" + "7" * 4400}
REPLACEMENTS: list[object] = [
    None,
    True,
    0,
    -3,
    2.5,
    "",
    "text",
    [],
    {},
    ["a", 1],
    {"k": [None]},
    "@@deep@@",
    "@@huge@@",
    "\ud800",
]


@st.composite
def byte_edits(draw: st.DrawFn, data: bytes) -> bytes:
    """Cut, insert or overwrite bytes, once to three times."""
    for _ in range(draw(st.integers(1, 3))):
        position = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["cut", "insert", "overwrite", "latin-1"]))
        if action == "cut":
            data = data[:position]
        elif action == "latin-1":  # the file (or its tail) saved as Latin-1
            data = data[:position] + data[position:].decode("utf-8", "ignore").replace(
                "o", "ö"
            ).encode("latin-1", "replace")
        else:
            chunk = draw(st.sampled_from(INSERTS) | st.binary(min_size=1, max_size=6))
            end = position + (len(chunk) if action == "overwrite" else 0)
            data = data[:position] + chunk + data[end:]
    return data


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _swap(value: object, where: tuple[object, ...], new: object) -> object:
    if not where:
        return new
    head, rest = where[0], where[1:]
    if isinstance(value, dict):
        return {k: _swap(v, rest, new) if k == head else v for k, v in value.items()}
    assert isinstance(value, list)
    return [_swap(v, rest, new) if i == head else v for i, v in enumerate(value)]


def _dump(value: object, indent: int | None) -> str:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    for placeholder, raw in _PLACEHOLDERS.items():
        text = text.replace(json.dumps(placeholder), raw)
    return text


@st.composite
def value_swaps(draw: st.DrawFn, text: str, layout: str) -> bytes:
    """Swap one value of a JSON document or one JSON line for a value of another type."""
    if layout == "document":
        value = json.loads(text)
        where = draw(st.sampled_from(_paths(value)))
        new = draw(st.sampled_from(REPLACEMENTS))
        dumped = _dump(_swap(value, where, new), draw(st.sampled_from([None, 2])))
        return dumped.encode("utf-8", "surrogatepass")
    rows = [json.loads(line) for line in text.splitlines()]
    index = draw(st.integers(0, len(rows) - 1))
    where = draw(st.sampled_from(_paths(rows[index])))
    rows[index] = _swap(rows[index], where, draw(st.sampled_from(REPLACEMENTS)))
    return "".join(_dump(row, None) + "\n" for row in rows).encode("utf-8", "surrogatepass")


@st.composite
def tsv_edits(draw: st.DrawFn, text: str) -> bytes:
    """Swap one TSV field for a huge, quoted, tabbed, empty or Latin-1 one."""
    rows = [line.split("\t") for line in text.splitlines()]
    row = draw(st.integers(0, len(rows) - 1))
    column = draw(st.integers(0, len(rows[row]) - 1))
    rows[row][column] = draw(
        st.sampled_from(["x" * 140_000, '"open quote', "a\tb", "", "[", "['a'", "[1, 2]"])
    )
    data = "\n".join("\t".join(fields) for fields in rows).encode("utf-8") + b"\n"
    if draw(st.booleans()):
        data = data.replace(b"o", b"\xf6", 1)  # a Latin-1 o umlaut
    return data


def mutations(name: str) -> st.SearchStrategy[bytes]:
    _, text, layout = SEEDS[name]
    data = text.encode("utf-8")
    options = [byte_edits(data)]
    if layout == "text":
        options.append(tsv_edits(text))
    else:
        options.append(value_swaps(text, layout))
    return st.one_of(options)


FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_mutated_files_raise_only_dataset_format_errors(scratch: Path, name: str) -> None:
    load = SEEDS[name][0]
    path = scratch / f"fuzz-{name}"

    @FUZZ
    @given(mutations(name))
    def load_mutated(data: bytes) -> None:
        check_load(load, path, data)

    load_mutated()


# --------------------------------------------------------------------------------------
# Each crash class, with its exact place


def _error(tmp_path: Path, name: str, data: bytes, dataset: str = "nq") -> DatasetFormatError:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DatasetFormatError) as info:
        load_dataset(dataset, path)
    assert info.value.path == str(path)
    return info.value


def test_latin1_bytes_name_line_column_and_field(tmp_path: Path) -> None:
    rows = _jsonl(NQ_OPEN).encode("utf-8") + '{"question": "café?", "answer": ["x"]}\n'.encode(
        "latin-1"
    )
    error = _error(tmp_path, "nq.jsonl", rows)
    assert (error.location, error.field) == ("line 3", "question")
    assert "the byte 0xE9, which is not UTF-8 (column 18)" in error.received
    assert "Fix: re-encode the file as UTF-8" in str(error)
    document = json.dumps(HOTPOT, indent=1).replace("city", "citÿ").encode("latin-1")
    error = _error(tmp_path, "hotpot.json", document, "hotpotqa")
    assert error.location is not None and error.location.startswith("line ")
    assert error.field == "context[0][1][0]" and "0xFF" in error.received
    tsv = POPQA_TSV.replace("Norway", "Nörway").encode("latin-1")
    error = _error(tmp_path, "popQA.tsv", tsv, "popqa")
    assert error.location == "line 3" and "0xF6" in error.received


def test_deep_nesting_names_line_and_field(tmp_path: Path) -> None:
    deep = "[" * 50_000 + "]" * 50_000
    line = '{"question": "q", "answer": ["a"], "facts": {"f": ' + deep + "}}\n"
    error = _error(tmp_path, "deep.jsonl", (_jsonl(NQ_OPEN) + line).encode())
    assert (error.location, error.field) == ("line 3", "facts.f[0][0][0][0][0][0]...")
    assert "nested more than 100 levels deep" in error.received
    document = json.dumps(HOTPOT, indent=1).replace('"Song X is a song."', deep, 1)
    error = _error(tmp_path, "deep.json", document.encode(), "hotpotqa")
    assert error.location == f"line {document[: document.index('[[[[')].count(chr(10)) + 1}"
    assert error.field is not None and error.field.startswith("context[0][1][0]")


def test_huge_integers_name_their_field(tmp_path: Path) -> None:
    huge = "9" * 5000
    error = _error(
        tmp_path, "ids.jsonl", f'{{"id": {huge}, "question": "q", "answer": ["a"]}}\n'.encode()
    )
    assert (error.location, error.field) == ("line 1", "id")
    assert "a number of 5000 digits" in error.received
    rows = json.dumps(HOTPOT).replace('"h2"', huge)
    error = _error(tmp_path, "hotpot.json", rows.encode(), "hotpotqa")
    assert (error.location, error.field) == ("record 1", "_id")
    squad = json.dumps(SQUAD).replace('"s1"', huge)
    error = _error(tmp_path, "squad.json", squad.encode(), "squad")
    assert (error.location, error.field) == ("record 0", "data[0].paragraphs[0].qas[0].id")
    popqa = POPQA_TSV.replace("\t142\t", f"\t{huge}\t")
    path = tmp_path / "popQA.tsv"
    path.write_text(popqa, encoding="utf-8")
    assert load_dataset("popqa", path)[0].extra["s_pop"] == huge  # kept as text


def test_unpaired_surrogates_and_huge_tsv_fields(tmp_path: Path) -> None:
    line = '{"question": "q\\ud800", "answer": ["a"]}\n'
    error = _error(tmp_path, "s.jsonl", line.encode())
    assert (error.location, error.field) == ("line 1", "question")
    assert "unpaired surrogate escape \\ud800" in error.received
    emoji = '{"question": "q \\ud83d\\ude00", "answer": ["a"]}\n'  # a valid pair
    path = tmp_path / "emoji.jsonl"
    path.write_text(emoji, encoding="utf-8")
    assert load_dataset("nq", path)[0].question == "q \U0001f600"
    big = DPR_QA_TSV + "x" * 140_000 + "\t['a']\n"
    error = _error(tmp_path, "nq.qa.csv", big.encode())
    assert error.location == "line 3" and "field larger than field limit" in error.received


def test_official_one_line_documents_load(tmp_path: Path) -> None:
    squad = tmp_path / "dev-v1.1.json"
    squad.write_text(json.dumps(SQUAD), encoding="utf-8")
    (example,) = load_dataset("squad", squad)
    assert (example.id, example.answers) == ("s1", ("1973",))
    trivia = tmp_path / "verified-web-dev.json"
    trivia.write_text(json.dumps(TRIVIAQA), encoding="utf-8")
    (example,) = load_dataset("triviaqa", trivia)
    assert example.answers == ("Muscat", "Masqat")
    # a one-line document with a broken record names the record and field, not "question"
    broken = json.loads(json.dumps(SQUAD))
    del broken["data"][0]["paragraphs"][0]["qas"][0]["question"]
    squad.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"record 0: field 'data\[0\]\.paragraphs"):
        load_dataset("squad", squad)
    # a JSON-lines file whose rows happen to have a "data" list stays JSON lines
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_jsonl([{"question": "q", "answer": ["a"], "data": []}] * 2), encoding="utf-8")
    assert len(load_dataset("nq", rows)) == 2


def test_long_passages_load_and_leave_the_csv_limit_alone(tmp_path: Path) -> None:
    before = csv.field_size_limit()
    path = tmp_path / "psgs_w100.tsv"
    path.write_text(f"id\ttext\ttitle\n1\t{'word ' * 40_000}\tLong\n", encoding="utf-8")
    passages = iter_passages(path)
    (first,) = list(passages)
    assert len(first.page_content) == 200_000
    assert csv.field_size_limit() == before  # process-wide: not changed by the corpus


# --------------------------------------------------------------------------------------
# The real files in ../shared/data, in their official one-line layouts and in Latin-1


def _data_dir() -> Path:
    override = os.environ.get("ADAPTIVE_RAG_DATA")
    return Path(override) if override else Path(__file__).parents[3] / "shared" / "data"


DATA = _data_dir()
needs_data = pytest.mark.skipif(
    not DATA.is_dir(),
    reason=f"real evaluation data not found at {DATA} (set ADAPTIVE_RAG_DATA to its folder)",
)


def _rows(relative: str) -> list[dict[str, Any]]:
    with (DATA / relative).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@needs_data
def test_real_squad_dev_in_the_official_one_line_layout(tmp_path: Path) -> None:
    rows = _rows("squad/squad_v1.1_dev_qa.jsonl")
    articles: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        paragraphs = articles.setdefault(str(row["title"]), {})
        paragraph = paragraphs.setdefault(
            str(row["paragraph_id"]), {"context": row["context"], "qas": []}
        )
        answers = [{"text": text, "answer_start": 0} for text in row["answers"]]
        paragraph["qas"].append({"id": row["id"], "question": row["question"], "answers": answers})
    official = {
        "version": "1.1",
        "data": [
            {"title": title, "paragraphs": list(paragraphs.values())}
            for title, paragraphs in articles.items()
        ],
    }
    path = tmp_path / "dev-v1.1.json"
    with path.open("w", encoding="utf-8") as handle:
        json.dump(official, handle)  # one line, as the official file
    assert path.read_text(encoding="utf-8").count("\n") == 0
    examples = load_dataset("squad", path)
    assert len(examples) == len(rows) == 10_570
    assert [e.id for e in examples] == [row["id"] for row in rows]
    assert all(
        e.answers == tuple(dict.fromkeys(row["answers"]))
        for e, row in zip(examples, rows, strict=True)
    )


@needs_data
def test_real_triviaqa_in_the_official_one_line_layout(tmp_path: Path) -> None:
    rows = _rows("triviaqa/triviaqa_adarag_dev500_qa.jsonl")
    data = [
        {
            "Question": row["question"],
            "QuestionId": row["id"],
            "Answer": {"Value": row["answers"][0], "Aliases": row["answers"]},
        }
        for row in rows
    ]
    path = tmp_path / "verified-wikipedia-dev.json"
    path.write_text(json.dumps({"Data": data, "Version": 1.0}, ensure_ascii=False), "utf-8")
    examples = load_dataset("triviaqa", path)
    assert [e.id for e in examples] == [row["id"] for row in rows]
    assert examples[0].answers[0] == rows[0]["answers"][0]


@needs_data
@pytest.mark.parametrize(
    ("name", "relative"),
    [
        ("triviaqa", "triviaqa/triviaqa_adarag_dev500_qa.jsonl"),
        ("musique", "musique/musique_adarag_dev500_qa.jsonl"),
    ],
)
def test_real_files_saved_as_latin1_name_their_first_bad_line(
    tmp_path: Path, name: str, relative: str
) -> None:
    lines = (DATA / relative).read_text(encoding="utf-8").splitlines(keepends=True)
    first = next(n for n, line in enumerate(lines, 1) if re.search("[\x80-\xff]", line))
    path = tmp_path / Path(relative).name
    path.write_bytes("".join(lines).encode("latin-1", "replace"))
    with pytest.raises(DatasetFormatError) as info:
        load_dataset(name, path)
    assert info.value.location == f"line {first}" and "which is not UTF-8" in str(info.value)
