"""The DRAGIN paper's ablations: when to retrieve (Table 4) and what to ask (Table 6).

Table 4 compares retrieval timings under one query: FL-RAG's, FS-RAG's, FLARE's and
DRAGIN's triggers, each asking with the last sentence of the context before its trigger
(``query_formulation="last_sentence"``; FS-RAG's own query already is). Table 6 keeps
DRAGIN's trigger (RIND) and compares queries: QFS, the last sentence, the last ``n``
tokens (``n = query_top_n``) and the full context. Each row also runs the method with its
own query, the baseline of the same run.

Reported per row: EM, F1, retrievals per question, the share of a question's gold
passages any of its retrievals found, and seconds.

Run on the toy world (shipped model, BM25 over the toy corpus, the harness's held-out
test split, eight questions decoding together):
    python benchmarks/dragin_ablations.py [--limit 80]
Run on the real model (Gemma 3 270M, the first HotpotQA dev500 questions, BM25 over their
own paragraphs; about 30 s a question on two CPU cores):
    python benchmarks/dragin_ablations.py --real --limit 20
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from langchain_adaptive_rag import ChatTransformers, create_bm25_retriever
from langchain_adaptive_rag.evaluation.metrics import exact_match, f1_score
from langchain_adaptive_rag.exemplars import dataset_prompts
from langchain_adaptive_rag.graphs import config_class, create_adaptive_rag_graph, display_name
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.prompts import QAPrompts

TABLE_4 = ("fix_length", "fix_sentence", "flare", "dragin")
TABLE_6 = ("qfs", "last_sentence", "last_n_tokens", "full_context")
OWN_QUERY = {"fix_length": "last_chunk", "flare": "masked_sentence", "dragin": "qfs"}
HOTPOT = Path("../shared/data/hotpotqa/hotpotqa_adarag_dev500_ctx.jsonl")


@dataclasses.dataclass(frozen=True)
class Question:
    """One question with its gold answer and gold passage ids."""

    question: str
    answers: tuple[str, ...]
    gold_ids: frozenset[str]


def _toy(limit: int) -> tuple[Any, Any, list[Question], QAPrompts, dict[str, MethodConfig]]:
    from langchain_adaptive_rag.toyworld import (
        TOY_PROMPTS,
        load_toy_model,
        toy_corpus,
        toy_questions,
        toy_retriever,
    )
    from langchain_adaptive_rag.toyworld.benchmark import split_dev_test, toy_examples
    from langchain_adaptive_rag.toyworld.comparison import TOY_CONFIGS

    test = split_dev_test(toy_examples(toy_questions(), toy_corpus()))[1][:limit]
    questions = [
        Question(
            e.question, e.answers, frozenset(str(p.metadata.get("id", p.id)) for p in e.supporting)
        )
        for e in test
    ]
    model = load_toy_model(batch_concurrent_calls=True)
    return model, toy_retriever(), questions, TOY_PROMPTS, dict(TOY_CONFIGS)


def _real(limit: int) -> tuple[Any, Any, list[Question], QAPrompts, dict[str, MethodConfig]]:
    from langchain_adaptive_rag.pretrained import get_gemma_3_270m

    rows = [json.loads(line) for line in HOTPOT.read_text().splitlines()[:limit]]
    passages: dict[str, str] = {}
    questions = []
    for row in rows:
        ids = []
        for paragraph in row["paragraphs"]:
            key = f"{paragraph['title']}#{len(passages)}"
            passages[key] = paragraph["text"]
            if paragraph.get("is_supporting"):
                ids.append(key)
        questions.append(Question(row["question"], tuple(row["answers"]), frozenset(ids)))
    from langchain_core.documents import Document

    documents = [Document(id=k, page_content=t) for k, t in passages.items()]
    model = ChatTransformers(
        model=str(get_gemma_3_270m()), use_chat_template=False, batch_concurrent_calls=True
    )
    configs = {m: config_class(m)(generate_max_length=64) for m in TABLE_4}
    return (
        model,
        create_bm25_retriever(documents, k=3),
        questions,
        dataset_prompts("hotpotqa"),
        configs,
    )


def _row(
    label: str,
    graph: Any,
    questions: list[Question],
    concurrency: int,
) -> str:
    start = time.perf_counter()
    states = graph.batch(
        [{"question": q.question} for q in questions],
        {"max_concurrency": concurrency, "recursion_limit": 500},
    )
    seconds = time.perf_counter() - start
    em = sum(
        exact_match(str(s["answer"]), q.answers) for s, q in zip(states, questions, strict=True)
    )
    f1 = sum(f1_score(str(s["answer"]), q.answers) for s, q in zip(states, questions, strict=True))
    retrievals = sum(s["counts"]["retrievals"] for s in states) / len(states)
    found = [
        len(q.gold_ids & {d for e in s["retrievals"] for d in e["doc_ids"]}) / len(q.gold_ids)
        for s, q in zip(states, questions, strict=True)
        if q.gold_ids
    ]
    recall = sum(found) / len(found) if found else float("nan")
    n = len(states)
    scores = f"{em / n:.3f} | {f1 / n:.3f} | {retrievals:.2f} | {recall:.2f} | {seconds:.0f}"
    return f"| {label} | {scores} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="Gemma 3 270M on HotpotQA")
    parser.add_argument("--limit", type=int, default=80, help="questions")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    model, retriever, questions, prompts, configs = (_real if args.real else _toy)(args.limit)
    header = (
        "| {} | EM | F1 | retrievals/q | gold passages found/q | s |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    print(
        f"{len(questions)} questions ({'HotpotQA, Gemma 3 270M' if args.real else 'toy world'})\n"
    )

    rows: dict[tuple[str, str], str] = {}

    def row(method: str, formulation: str, label: str) -> str:
        if (method, formulation) not in rows:
            config = configs[method]
            if formulation != "own":
                config = dataclasses.replace(config, query_formulation=formulation)  # type: ignore[call-arg]
            graph = create_adaptive_rag_graph(
                model,
                retriever,
                method,  # type: ignore[arg-type]
                config=config,
                prompts=prompts,
            )
            rows[method, formulation] = _row(label, graph, questions, args.concurrency)
        line = rows[method, formulation]
        return "| " + label + " |" + line.split("|", 2)[2]

    print("Table 4: each trigger with its own query, then with the last sentence\n")
    print(header.format("timing (query)"))
    for method in TABLE_4:
        name = display_name(method)
        own = OWN_QUERY.get(method, "qfs")
        if method == "fix_sentence":  # its own query is the last sentence
            print(row(method, "own", f"{name} (last_sentence, its own)"))
            continue
        print(row(method, "own", f"{name} ({own}, its own)"))
        print(row(method, "last_sentence", f"{name} (last_sentence)"))
    print("\nTable 6: DRAGIN's trigger (RIND) with each query\n")
    print(header.format("query"))
    for formulation in TABLE_6:
        print(row("dragin", "own" if formulation == "qfs" else formulation, formulation))


if __name__ == "__main__":
    main()
