"""Recall of the queries the methods formulate, on the toy world.

Every method answers the same toy questions with the shipped model and BM25 over the toy
corpus; each retrieval event's documents are compared with the question's gold passages
(``supporting_ids``, one per reasoning step). Reported per method: retrievals per
question, the share of retrievals that returned at least one gold passage (precision of
a retrieval), and the share of a question's gold passages found by any of its retrievals
(recall per question), next to the question itself as the query (SR-RAG's query).

Run:
    python benchmarks/toy_query_recall.py [--per-category 10] [--k 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from langchain_adaptive_rag.graphs import display_name
from langchain_adaptive_rag.toyworld import load_toy_model, toy_questions, toy_retriever
from langchain_adaptive_rag.toyworld.comparison import TOY_CONFIGS, demo_questions, run_method

METHODS = (
    "single_round",
    "fix_length",
    "fix_sentence",
    "flare",
    "dragin",
    "seakr",
    "etc",
    "ta_are",
    "search_agent",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-category", type=int, default=10, help="questions per category")
    parser.add_argument("--k", type=int, default=3, help="passages per retrieval")
    args = parser.parse_args()
    model = load_toy_model()
    retriever = toy_retriever(k=args.k)
    questions = demo_questions(toy_questions(), per_category=args.per_category)
    gold = {q.id: set(q.supporting_ids) for q in questions}
    print(f"{len(questions)} toy questions, BM25 top-{args.k} per retrieval\n")
    print("| method | retrievals/q | retrievals with a gold passage | gold passages found/q | s |")
    print("|---|---:|---:|---:|---:|")
    for method in METHODS:
        base = TOY_CONFIGS[method]
        config = dataclasses.replace(base, retrieve_topk=args.k)
        start = time.perf_counter()
        results = run_method(model, retriever, method, questions, config=config)  # type: ignore[arg-type]
        seconds = time.perf_counter() - start
        events = [(r.question_id, e) for r in results for e in r.events]
        hits = sum(bool(gold[q] & set(e["doc_ids"])) for q, e in events)
        found = [
            len(gold[r.question_id] & {d for e in r.events for d in e["doc_ids"]})
            / len(gold[r.question_id])
            for r in results
        ]
        print(
            f"| {display_name(method)} | {len(events) / len(results):.2f} "
            f"| {hits / len(events) if events else 0.0:.2f} "
            f"| {sum(found) / len(found):.2f} | {seconds:.1f} |"
        )


if __name__ == "__main__":
    main()
