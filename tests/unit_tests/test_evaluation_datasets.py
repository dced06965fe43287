"""Dataset, corpus and qrels loaders: native-format fixtures, malformed files, real data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError, DatasetFormatError
from langchain_adaptive_rag.evaluation import (
    DATASET_NAMES,
    Example,
    Qrel,
    canonical_dataset_name,
    iter_dpr_passages,
    iter_jsonl_passages,
    iter_passages,
    iter_qrels,
    load_2wikimultihopqa,
    load_dataset,
    load_hotpotqa,
    load_iirc,
    load_musique,
    load_open_qa,
    load_popqa,
    load_qrels,
    load_retrievalqa,
    load_strategyqa,
    read_id_aliases,
)


def _write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------
# Native formats (fixtures written in each benchmark's own schema)

HOTPOT = [
    {
        "_id": "h1",
        "question": "Which band did the singer of Song X join?",
        "answer": "The Band",
        "type": "bridge",
        "level": "medium",
        "supporting_facts": [["Song X", 0], ["Singer Y", 1], ["Singer Y", 0]],
        "context": [
            ["Song X", ["Song X is a song", " by Singer Y."]],
            ["Other", ["Unrelated text."]],
            ["Singer Y", ["Singer Y is a singer.", " She joined The Band."]],
        ],
    },
    {
        "_id": "h2",
        "question": "Are A and B both cities?",
        "answer": "yes",
        "type": "comparison",
        "level": "hard",
        "supporting_facts": [["A", 0], ["B", 0]],
        "context": [["A", ["A is a city."]], ["B", ["B is a city."]]],
    },
]


def test_hotpotqa_native_json(tmp_path: Path) -> None:
    examples = load_hotpotqa(_write_json(tmp_path / "hotpot_dev_distractor_v1.json", HOTPOT))
    assert [e.id for e in examples] == ["h1", "h2"]
    first = examples[0]
    assert first.answers == ("The Band",)
    assert (first.type, first.level, first.dataset) == ("bridge", "medium", "hotpotqa")
    assert [d.metadata["title"] for d in first.context] == ["Song X", "Other", "Singer Y"]
    # HotpotQA sentences carry their own leading space: joined without doubling it.
    assert first.context[0].page_content == "Song X is a song by Singer Y."
    assert [d.metadata["title"] for d in first.supporting] == ["Song X", "Singer Y"]
    assert first.supporting[1].metadata["supporting_sentences"] == [0, 1]
    assert first.context[1].metadata == {
        "id": "h1-1",
        "title": "Other",
        "idx": 1,
        "is_supporting": False,
        "supporting_sentences": [],
    }
    assert first.context[0].id == "h1-0"
    assert examples[1].answer == "yes"
    assert load_dataset("HotpotQA", tmp_path / "hotpot_dev_distractor_v1.json", limit=1) == [first]


WIKI2 = [
    {
        "_id": "w1",
        "type": "compositional",
        "question": "Where was the director of film F born?",
        "answer": "United States",
        "answer_id": "Q30",
        "supporting_facts": [["F", 0], ["D", 0]],
        "context": [["F", ["F is a film by D."]], ["D", ["D was born in", "the United States."]]],
        "evidences": [["F", "director", "D"], ["D", "place of birth", "United States"]],
        "evidences_id": [],
        "entity_ids": "Q1_Q2",
    },
    {
        "_id": "w2",
        "type": "comparison",
        "question": "Which film came out first, F or G?",
        "answer": "F",
        "answer_id": "Q999",
        "supporting_facts": [["F", 0]],
        "context": [["F", ["F is a 1950 film."]]],
        "evidences": [],
    },
]


def test_2wikimultihopqa_native_with_id_aliases(tmp_path: Path) -> None:
    dev = _write_json(tmp_path / "dev.json", WIKI2)
    alias_file = _write_jsonl(
        tmp_path / "id_aliases.json",
        [
            {
                "Q_id": "Q30",
                "aliases": ["USA", "United States", "America"],
                "demonyms": ["American"],
            },
            {"Q_id": "Q5", "aliases": [], "demonyms": []},
        ],
    )
    assert read_id_aliases(alias_file) == {
        "Q30": ("USA", "United States", "America", "American"),
        "Q5": (),
    }
    examples = load_dataset("2wiki", dev, aliases=alias_file)
    # The answer first, then the answer id's aliases and demonyms, without duplicates.
    assert examples[0].answers == ("United States", "USA", "America", "American")
    assert examples[0].extra["answer_id"] == "Q30"
    assert examples[0].extra["evidences"] == WIKI2[0]["evidences"]
    assert examples[0].type == "compositional"
    assert examples[0].context[1].page_content == "D was born in the United States."
    assert examples[1].answers == ("F",)  # an answer id without aliases
    assert load_2wikimultihopqa(dev)[0].answers == ("United States",)
    mapping = {"Q30": ["U.S."]}
    assert load_2wikimultihopqa(dev, aliases=mapping)[0].answers == ("United States", "U.S.")


def test_2wikimultihopqa_question_list_with_string_or_list_answer(tmp_path: Path) -> None:
    path = _write_json(
        tmp_path / "dev_subset.json",
        [
            {"test_id": 0, "question": "Q0?", "answer": ["A", "The A"]},
            {"test_id": 1, "question": "Q1?", "answer": "B"},
        ],
    )
    examples = load_2wikimultihopqa(path)
    assert [(e.id, e.answers) for e in examples] == [("0", ("A", "The A")), ("1", ("B",))]


IIRC = [
    {
        "pid": "p1",
        "title": "Main Page",
        "text": "Main text mentions Linked.",
        "links": [{"target": "Linked", "indices": [19, 25]}],
        "questions": [
            {
                "qid": "q-span",
                "question": "Who?",
                "answer": {
                    "type": "span",
                    "answer_spans": [
                        {"text": " Ann ", "passage": "main", "start": 0, "end": 3},
                        {"text": "Bob", "passage": "linked", "start": 0, "end": 3},
                    ],
                },
                "question_links": ["Linked"],
                "context": [
                    {"passage": "main", "text": "Main text", "indices": [0, 9]},
                    {"passage": "Linked", "text": "Bob was here.", "indices": [0, 13]},
                ],
            },
            {
                "qid": "q-value",
                "question": "How many years?",
                "answer": {"type": "value", "answer_value": "53", "answer_unit": "years"},
                "context": [],
            },
            {
                "qid": "q-binary",
                "question": "Was it?",
                "answer": {"type": "binary", "answer_value": "yes"},
                "context": [],
            },
            {"qid": "q-none", "question": "Unknown?", "answer": {"type": "none"}, "context": []},
        ],
    }
]


def test_iirc_native(tmp_path: Path) -> None:
    path = _write_json(tmp_path / "dev.json", IIRC)
    examples = load_iirc(path)
    assert [(e.id, e.answers, e.type) for e in examples] == [
        ("q-span", ("Ann", "Bob"), "span"),
        ("q-value", ("53",), "value"),
        ("q-binary", ("yes",), "binary"),
    ]
    span = examples[0]
    assert [d.metadata["title"] for d in span.supporting] == ["Main Page", "Main Page", "Linked"]
    assert span.supporting[0].page_content == "Main text mentions Linked."
    assert span.supporting[2].page_content == "Bob was here."
    assert examples[1].extra["answer_unit"] == "years"
    with_none = load_iirc(path, include_unanswerable=True)
    assert with_none[-1].answers == ("noanswer",)
    assert len(load_dataset("iirc", path, limit=2)) == 2


def test_strategyqa_native(tmp_path: Path) -> None:
    path = _write_json(
        tmp_path / "strategyqa_train.json",
        [
            {
                "qid": "s1",
                "term": "Pear",
                "description": "Fruit",
                "question": "Would a pear sink in water?",
                "answer": False,
                "facts": ["Pears float."],
                "decomposition": ["What is the density of a pear?"],
                "evidence": [[[["Pear-1"]], ["operation"]]],
            },
            {"qid": "s2", "question": "Is water wet?", "answer": True},
        ],
    )
    first, second = load_strategyqa(path)
    assert (first.answers, first.answer_bool) == (("no",), False)
    assert (second.answers, second.answer_bool) == (("yes",), True)
    assert first.extra["facts"] == ["Pears float."]
    assert first.extra["term"] == "Pear"


def test_nq_open_and_dpr_style_jsonl(tmp_path: Path) -> None:
    nq = _write_jsonl(
        tmp_path / "NQ-open.dev.jsonl",
        [
            {"question": "when was x", "answer": ["1972", "December 1972"]},
            {"question": "who wrote y", "answer": ["Bob"]},
        ],
    )
    examples = load_dataset("NQ-open", nq)
    assert [(e.id, e.answers, e.dataset) for e in examples] == [
        ("nq-0", ("1972", "December 1972"), "nq"),
        ("nq-1", ("Bob",), "nq"),
    ]
    dpr = _write_jsonl(
        tmp_path / "trivia-dev.jsonl",
        [
            {
                "question": "q?",
                "answers": ["A", "A"],
                "ctxs": [{"id": "123", "title": "T", "text": "body", "score": 1.5}],
            }
        ],
    )
    (example,) = load_open_qa(dpr, "triviaqa")
    assert example.answers == ("A",)  # duplicates dropped
    assert example.context[0].metadata == {"id": "123", "title": "T", "score": 1.5}


def test_reserialised_jsonl_with_paragraphs(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "ctx.jsonl",
        [
            {
                "id": "x1",
                "dataset": "hotpotqa",
                "question": "q?",
                "answers": ["a"],
                "type": "bridge",
                "level": "hard",
                "paragraphs": [
                    {"idx": 0, "title": "T0", "text": "zero", "is_supporting": False},
                    {"idx": 1, "title": "T1", "text": "one", "is_supporting": True},
                ],
                "llm_answer_no_retrieve": "b",
            }
        ],
    )
    (example,) = load_dataset("hotpotqa", path)
    assert [d.page_content for d in example.context] == ["zero", "one"]
    assert [d.metadata["id"] for d in example.supporting] == ["x1-1"]
    assert example.extra == {"llm_answer_no_retrieve": "b"}


def test_dpr_qa_csv(tmp_path: Path) -> None:
    path = tmp_path / "nq-test.qa.csv"
    path.write_text(
        "who got the first nobel prize in physics\t['Wilhelm Conrad Röntgen']\n"
        "when is the next deadpool movie\t['May 18, 2018', \"2018\"]\n",
        encoding="utf-8",
    )
    examples = load_dataset("nq", path)
    assert [e.answers for e in examples] == [
        ("Wilhelm Conrad Röntgen",),
        ("May 18, 2018", "2018"),
    ]


def test_squad_official_json(tmp_path: Path) -> None:
    data = {
        "version": "1.1",
        "data": [
            {
                "title": "Oil crisis",
                "paragraphs": [
                    {
                        "context": "It began in October 1973.",
                        "qas": [
                            {
                                "id": "s1",
                                "question": "When?",
                                "answers": [
                                    {"text": "October 1973", "answer_start": 12},
                                    {"text": "October 1973", "answer_start": 12},
                                    {"text": "1973", "answer_start": 20},
                                ],
                            },
                            {"id": "s2", "question": "No?", "answers": [], "is_impossible": True},
                        ],
                    }
                ],
            }
        ],
    }
    (example,) = load_dataset("squad", _write_json(tmp_path / "dev-v1.1.json", data))
    assert example.answers == ("October 1973", "1973")
    assert example.supporting[0].metadata == {"id": "Oil_crisis_0", "title": "Oil crisis"}


def test_triviaqa_native_json(tmp_path: Path) -> None:
    data = {
        "Data": [
            {
                "Question": "Capital of Oman?",
                "QuestionId": "tc_1",
                "Answer": {
                    "Value": "Muscat",
                    "Aliases": ["Muscat", "Masqat"],
                    "Type": "WikipediaEntity",
                },
            }
        ],
        "Version": 1.0,
    }
    (example,) = load_dataset("triviaqa", _write_json(tmp_path / "verified-web-dev.json", data))
    assert (example.id, example.answers) == ("tc_1", ("Muscat", "Masqat"))


POPQA_TSV = (
    "id\tsubj\tprop\tobj\tsubj_id\tprop_id\tobj_id\ts_aliases\to_aliases\ts_uri\to_uri\t"
    "s_wiki_title\to_wiki_title\ts_pop\to_pop\tquestion\tpossible_answers\n"
    '4222362\tGeorge Rankin\toccupation\tpolitician\t1850297\t22\t2834605\t"[""G R""]"\t'
    '"[""political leader""]"\thttp://s\thttp://o\tGeorge Rankin\tPolitician\t142\t2569\t'
    "What is George Rankin's occupation?\t"
    '"[""politician"", ""political leader""]"\n'
)


def test_popqa_tsv(tmp_path: Path) -> None:
    path = tmp_path / "popQA.tsv"
    path.write_text(POPQA_TSV, encoding="utf-8")
    (example,) = load_popqa(path)
    assert example.id == "4222362"
    assert example.question == "What is George Rankin's occupation?"
    assert example.answers == ("politician", "political leader")
    assert example.extra["s_pop"] == 142
    assert example.extra["prop"] == "occupation"


def test_retrievalqa_jsonl(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "retrievalqa.jsonl",
        [
            {
                "data_source": "popqa",
                "question_id": "popqa_1",
                "question": "What is X's occupation?",
                "ground_truth": ["politician"],
                "context": [{"title": "X", "text": "X is a politician."}, "bare snippet"],
                "param_knowledge_answerable": 0,
            },
            {
                "data_source": "triviaqa",
                "question_id": "tq_1",
                "question": "Capital of France?",
                "ground_truth": ["Paris"],
                "context": [],
                "param_knowledge_answerable": 1,
            },
        ],
    )
    first, second = load_retrievalqa(path)
    assert (first.param_knowledge_answerable, first.needs_retrieval) == (0, True)
    assert (second.param_knowledge_answerable, second.needs_retrieval) == (1, False)
    assert [d.page_content for d in first.context] == ["X is a politician.", "bare snippet"]
    assert first.extra["data_source"] == "popqa"


def test_musique_native_skips_unanswerable(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "musique_full_v1.0_dev.jsonl",
        [
            {
                "id": "2hop__1_2",
                "paragraphs": [
                    {"idx": 0, "title": "T", "paragraph_text": "text", "is_supporting": True}
                ],
                "question": "q?",
                "question_decomposition": [{"id": 1, "question": "s?", "answer": "a"}],
                "answer": "Yangon",
                "answer_aliases": ["Rangoon"],
                "answerable": True,
            },
            {
                "id": "2hop__1_2_u",
                "paragraphs": [],
                "question": "q?",
                "answer": "",
                "answer_aliases": [],
                "answerable": False,
            },
        ],
    )
    (example,) = load_musique(path)
    assert example.answers == ("Yangon", "Rangoon")
    assert example.supporting[0].page_content == "text"


# --------------------------------------------------------------------------------------
# Names, limits and errors


def test_dataset_names_and_synonyms() -> None:
    assert {canonical_dataset_name(n) for n in DATASET_NAMES} == set(DATASET_NAMES)
    assert canonical_dataset_name("2Wiki") == "2wikimultihopqa"
    assert canonical_dataset_name("natural_questions") == "nq"
    with pytest.raises(AdaptiveRAGError, match="Unknown dataset name 'webqa'"):
        canonical_dataset_name("webqa")


def test_bad_arguments(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "nq.jsonl", [{"question": "q", "answer": ["a"]}] * 3)
    assert len(load_dataset("nq", path, limit=2)) == 2
    assert load_dataset("nq", path, limit=0) == []
    with pytest.raises(AdaptiveRAGError, match="limit=-1"):
        load_dataset("nq", path, limit=-1)
    with pytest.raises(AdaptiveRAGError, match="only for 2wikimultihopqa"):
        load_dataset("nq", path, aliases={"Q1": ["x"]})
    with pytest.raises(AdaptiveRAGError, match="does not exist"):
        load_dataset("nq", tmp_path / "missing.jsonl")
    with pytest.raises(AdaptiveRAGError, match="non-empty tuple"):
        Example(id="x", question="q", answers=(), dataset="nq")


def test_jsonl_stops_reading_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "nq.jsonl"
    path.write_text('{"question": "q", "answer": ["a"]}\nnot json\n', encoding="utf-8")
    assert len(load_dataset("nq", path, limit=1)) == 1
    with pytest.raises(DatasetFormatError, match="line 2"):
        load_dataset("nq", path)


def test_malformed_jsonl_names_file_line_field_and_values(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "bad.jsonl",
        [{"question": "ok", "answers": ["a"]}, {"question": "q", "answers": 5}],
    )
    with pytest.raises(DatasetFormatError) as info:
        load_dataset("triviaqa", path)
    err = info.value
    assert (err.path, err.location, err.field) == (str(path), "line 2", "answers")
    text = str(err)
    assert str(path) in text
    assert "line 2" in text
    assert "'answers'" in text
    assert "received a number (5)" in text
    assert "expected a non-empty list of strings or a string" in text


def test_malformed_json_cases(tmp_path: Path) -> None:
    no_question = _write_jsonl(tmp_path / "a.jsonl", [{"answers": ["x"]}])
    with pytest.raises(DatasetFormatError, match=r"line 1: field 'question': received no such"):
        load_dataset("nq", no_question)

    no_answer = _write_jsonl(tmp_path / "b.jsonl", [{"question": "q"}])
    with pytest.raises(DatasetFormatError, match="one of the fields answers, answer"):
        load_dataset("nq", no_answer)

    bad_item = _write_jsonl(tmp_path / "c.jsonl", [{"question": "q", "answers": ["x", 3]}])
    with pytest.raises(DatasetFormatError, match=r"field 'answers\[1\]': received a number"):
        load_dataset("nq", bad_item)

    broken = tmp_path / "d.jsonl"
    broken.write_text('{"question": "q", "answers": ["x"]}\n{"question": \n', encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"line 2: received text that is not valid JSON"):
        load_dataset("nq", broken)

    not_object = _write_jsonl(tmp_path / "e.jsonl", [{"question": "q", "answers": ["x"]}, [1]])
    with pytest.raises(DatasetFormatError, match=r"line 2: received a list"):
        load_dataset("nq", not_object)

    empty = tmp_path / "f.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="empty file"):
        load_dataset("nq", empty)


def test_malformed_native_json_names_record_and_nested_field(tmp_path: Path) -> None:
    records = json.loads(json.dumps(HOTPOT))
    records[1]["context"][0] = ["A", "not a list"]
    path = _write_json(tmp_path / "hotpot.json", records)
    with pytest.raises(DatasetFormatError) as info:
        load_hotpotqa(path)
    assert (info.value.location, info.value.field) == ("record 1", "context[0][1]")
    assert "expected a list of sentences" in str(info.value)

    strategy = _write_json(tmp_path / "s.json", [{"qid": "s", "question": "q", "answer": "yes"}])
    with pytest.raises(
        DatasetFormatError, match=r"record 0: field 'answer'.*expected true or false"
    ):
        load_strategyqa(strategy)

    iirc = json.loads(json.dumps(IIRC))
    iirc[0]["questions"][1]["answer"]["type"] = "number"
    with pytest.raises(
        DatasetFormatError, match=r"field 'questions\[1\].answer.type'.*span, value, binary, none"
    ):
        load_iirc(_write_json(tmp_path / "iirc.json", iirc))

    top = _write_json(tmp_path / "top.json", {"version": 1})
    with pytest.raises(DatasetFormatError, match="expected a JSON list of records"):
        load_dataset("hotpotqa", top)

    pka = _write_jsonl(
        tmp_path / "r.jsonl",
        [{"question": "q", "ground_truth": ["a"], "param_knowledge_answerable": 2}],
    )
    with pytest.raises(DatasetFormatError, match=r"param_knowledge_answerable.*expected 0 or 1"):
        load_retrievalqa(pka)


def test_malformed_text_files(tmp_path: Path) -> None:
    popqa = tmp_path / "popQA.tsv"
    popqa.write_text("id\tquestion\n1\tq\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="line 1: field 'possible_answers'"):
        load_popqa(popqa)
    popqa.write_text('id\tquestion\tpossible_answers\n1\tq\t"[""a""]"\n2\tq\t[]\n', "utf-8")
    with pytest.raises(DatasetFormatError, match="line 3: field 'possible_answers'"):
        load_popqa(popqa)
    csv_file = tmp_path / "qa.csv"
    csv_file.write_text("q1\t['a']\nq2\t['a']\textra\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="line 2: received 3 tab-separated columns"):
        load_dataset("nq", csv_file)


# --------------------------------------------------------------------------------------
# Corpus and qrels


def test_dpr_passages_tsv_streams_documents(tmp_path: Path) -> None:
    path = tmp_path / "psgs_w100.tsv"
    path.write_text(
        "id\ttext\ttitle\n"
        '1\t"Aaron Aaron ( or ; ""Ahärôn"") is a prophet."\tAaron\n'
        "2\tSecond passage.\tTitle Two\n",
        encoding="utf-8",
    )
    documents = iter_dpr_passages(path)
    first = next(documents)
    assert first.page_content == 'Aaron Aaron ( or ; "Ahärôn") is a prophet.'
    assert first.metadata == {"id": "1", "title": "Aaron"}
    assert first.id == "1"
    assert [d.metadata["title"] for d in documents] == ["Title Two"]
    assert [d.id for d in iter_passages(path)] == ["1", "2"]


def test_dpr_passages_errors(tmp_path: Path) -> None:
    path = tmp_path / "psgs.tsv"
    path.write_text("1\ttext\ttitle\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"line 1: field 'id'.*header row"):
        list(iter_dpr_passages(path))
    path.write_text("id\ttext\ttitle\n1\tok\tT\n2\tonly two\n", encoding="utf-8")
    documents = iter_dpr_passages(path)
    assert next(documents).page_content == "ok"  # streamed before the bad line is read
    with pytest.raises(DatasetFormatError, match="line 3: received 2 tab-separated columns"):
        next(documents)


def test_jsonl_passages_and_contents_layout(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "passages.jsonl",
        [
            {"id": "p1", "title": "T1", "text": "one", "source": "squad"},
            {"id": 2, "contents": '"T2"\ntwo'},
        ],
    )
    first, second = iter_passages(path)
    assert first.metadata == {"id": "p1", "title": "T1", "source": "squad"}
    assert (second.id, second.metadata["title"], second.page_content) == ("2", "T2", "two")
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"id": "p1", "title": "T"}])
    with pytest.raises(DatasetFormatError, match="line 1: field 'text': received no such field"):
        list(iter_jsonl_passages(bad))
    as_json = _write_json(tmp_path / "list.json", [{"id": "p1", "text": "x"}])
    with pytest.raises(DatasetFormatError, match="expected a DPR TSV"):
        list(iter_passages(as_json))


def test_qrels(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "qrels.jsonl",
        [
            {"dataset": "hotpotqa", "qid": "q1", "passage_id": "p1"},
            {"dataset": "hotpotqa", "qid": "q1", "passage_id": "p2"},
            {"dataset": "2wikimultihopqa", "qid": "q2", "passage_id": "p3"},
            {"dataset": "hotpotqa", "qid": "q1", "passage_id": "p1"},
        ],
    )
    assert next(iter_qrels(path)) == Qrel("hotpotqa", "q1", "p1")
    assert load_qrels(path) == {"q1": ("p1", "p2"), "q2": ("p3",)}
    assert load_qrels(path, dataset="2wikimultihopqa") == {"q2": ("p3",)}
    with pytest.raises(AdaptiveRAGError, match="No qrels for dataset 'nq'"):
        load_qrels(path, dataset="nq")
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"dataset": "d", "qid": "q"}])
    with pytest.raises(DatasetFormatError, match="line 1: field 'passage_id'"):
        list(iter_qrels(bad))


# --------------------------------------------------------------------------------------
# The real files in ../shared/data


def _data_dir() -> Path:
    override = os.environ.get("ADAPTIVE_RAG_DATA")
    return Path(override) if override else Path(__file__).parents[3] / "shared" / "data"


DATA = _data_dir()
needs_data = pytest.mark.skipif(
    not DATA.is_dir(),
    reason=f"real evaluation data not found at {DATA} (set ADAPTIVE_RAG_DATA to its folder)",
)

REAL_FILES = [
    ("hotpotqa", "hotpotqa/hotpotqa_adarag_dev500_ctx.jsonl", 500),
    ("2wikimultihopqa", "2wikimultihopqa/2wiki_adarag_dev500_ctx.jsonl", 500),
    ("2wikimultihopqa", "2wikimultihopqa/2wiki_dev1000_qa_trustmargin.json", 1000),
    ("strategyqa", "strategyqa/strategyqa_train2290_gold.jsonl", 2290),
    ("retrievalqa", "retrievalqa/retrievalqa_gpt4.jsonl", 250),
    ("nq", "nq/NQ-open.dev.jsonl", 3610),
    ("nq", "nq/NQ-open.efficientqa.dev.1.1.jsonl", 1800),
    ("nq", "nq/nq_adarag_dev500_qa.jsonl", 500),
    ("triviaqa", "triviaqa/triviaqa_adarag_dev500_qa.jsonl", 500),
    ("squad", "squad/squad_adarag_dev500_qa.jsonl", 500),
    ("squad", "squad/squad_v1.1_dev_qa.jsonl", 10570),
    ("musique", "musique/musique_adarag_dev500_qa.jsonl", 500),
]


@needs_data
@pytest.mark.parametrize(("name", "relative", "count"), REAL_FILES)
def test_real_files_load_completely(name: str, relative: str, count: int) -> None:
    examples = load_dataset(name, DATA / relative)
    assert len(examples) == count
    assert len({e.id for e in examples}) == count
    assert all(e.dataset == name and e.question.strip() and e.answers for e in examples)


@needs_data
def test_real_hotpotqa_and_2wiki_paragraphs() -> None:
    hotpot = load_hotpotqa(DATA / "hotpotqa/hotpotqa_adarag_dev500_ctx.jsonl")
    assert all(len(e.supporting) == 2 for e in hotpot)
    assert {e.type for e in hotpot} == {"bridge", "comparison"}
    assert sum(e.answer in ("yes", "no") for e in hotpot) == 25
    first = hotpot[0]
    assert first.id == "5ac07327554299012d1db5f2"
    assert first.supporting[0].metadata["title"] == "Kaep (disambiguation)"
    wiki = load_2wikimultihopqa(DATA / "2wikimultihopqa/2wiki_adarag_dev500_ctx.jsonl")
    assert {len(e.supporting) for e in wiki} == {2, 4}
    # Some 2Wiki questions repeat a title among their paragraphs: ids stay unique.
    assert all(len({d.id for d in e.context}) == len(e.context) for e in wiki)


@needs_data
def test_real_small_files_fields() -> None:
    subset = load_2wikimultihopqa(DATA / "2wikimultihopqa/2wiki_dev1000_qa_trustmargin.json")
    assert subset[1].answers == ("Mask of Fu Manchu", "The Mask of Fu Manchu")
    assert subset[2].answers == ("12 June 1516",)
    strategy = load_strategyqa(DATA / "strategyqa/strategyqa_train2290_gold.jsonl")
    assert strategy[0].answer_bool is False and strategy[0].answers == ("no",)
    assert {e.answer_bool for e in strategy} == {True, False}
    rqa = load_retrievalqa(DATA / "retrievalqa/retrievalqa_gpt4.jsonl")
    assert {e.extra["data_source"] for e in rqa} == {
        "realtimeqa",
        "freshqa",
        "toolqa",
        "popqa",
        "triviaqa",
    }
    assert all(e.param_knowledge_answerable is None for e in rqa)  # this subset has no label
    assert rqa[0].answers == ("15%",) and len(rqa[0].context) == 5
    squad = load_dataset("squad", DATA / "squad/squad_v1.1_dev_qa.jsonl", limit=3)
    assert squad[0].answers == ("October 1973", "October", "1973")
    assert squad[0].supporting[0].metadata["id"] == "1973_oil_crisis_0"


@needs_data
def test_real_popqa_question_list_is_rejected_clearly() -> None:
    with pytest.raises(DatasetFormatError, match=r"line 1: field 'question'.*popQA.tsv header"):
        load_popqa(DATA / "popqa/crag_popqa_longtail_questions.txt")


@needs_data
def test_real_corpus_holds_the_gold_paragraphs_named_by_the_qrels() -> None:
    hotpot = load_hotpotqa(DATA / "hotpotqa/hotpotqa_adarag_dev500_ctx.jsonl")
    qrels = load_qrels(DATA / "corpus/qrels_supporting_hotpot_2wiki.jsonl", dataset="hotpotqa")
    assert {e.id for e in hotpot} <= set(qrels)
    wanted = {pid for e in hotpot for pid in qrels[e.id]}
    found = {}
    count = 0
    for document in iter_passages(DATA / "corpus/wiki_passages_mixed.jsonl"):
        count += 1
        if document.metadata["id"] in wanted:
            found[document.metadata["id"]] = document
    assert count == 41_417
    assert set(found) == wanted
    for example in hotpot[:50]:
        gold_titles = {d.metadata["title"] for d in example.supporting}
        assert {found[pid].metadata["title"] for pid in qrels[example.id]} == gold_titles


def test_evaluation_public_surface() -> None:
    import langchain_adaptive_rag.evaluation as evaluation

    assert sorted(evaluation.__all__) == sorted(set(evaluation.__all__))
    assert all(hasattr(evaluation, name) for name in evaluation.__all__)
    assert {"Example", "load_dataset", "iter_passages", "load_qrels", "f1_score"} <= set(
        evaluation.__all__
    )
