"""How the toy model follows the search protocol of its search traces.

The search agent (``TOY_SEARCH_PROTOCOL``: Search-R1's tags, documents and answer with a
one-line prompt) answers the toy world's evaluation questions with BM25 top 3 over the
toy corpus, ``--concurrency`` questions decoding together. Printed per question category
and overall: the share whose first turn is a well-formed query, searched, searches per
question, the share answered in ``<answer>`` form, EM and F1, seconds per question; then
how often the queries name an entity of the question's reasoning steps.

``python benchmarks/toy_search_agent.py [--model DIR] [--questions N] [--concurrency 8]``
(default: the shipped model, every question).
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

from search_adherence import HEADER, adherence_row, run_one

from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.toyworld import (
    build_corpus,
    load_toy_model,
    toy_questions,
    toy_retriever,
    toy_world,
)
from langchain_adaptive_rag.toyworld.comparison import TOY_SEARCH_BUDGET, toy_config
from langchain_adaptive_rag.toyworld.prompts import TOY_SEARCH_PROTOCOL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model directory (default: shipped)")
    parser.add_argument("--questions", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    questions = toy_questions()[: args.questions]
    chat = load_toy_model(args.model, batch_concurrent_calls=True)
    config = toy_config("search_agent")  # TOY_SEARCH_PROTOCOL within TOY_SEARCH_BUDGET
    graph = create_adaptive_rag_graph(chat, toy_retriever(), "search_agent", config=config)
    with ThreadPoolExecutor(args.concurrency) as pool:
        runs = list(pool.map(run_one, [graph] * len(questions), [q.question for q in questions]))
    print(
        f"toy model {args.model or '(shipped)'}, {len(questions)} toy questions, BM25 top 3, "
        f"protocol {TOY_SEARCH_PROTOCOL.name}, {TOY_SEARCH_BUDGET} tokens over at most 5 turns "
        f"of {TOY_SEARCH_PROTOCOL.turn_max_tokens}, "
        f"concurrency {args.concurrency}\n"
    )
    print(HEADER.format(label="questions"))
    for category in ("known", "known_first_unknown_second", "unknown"):
        picked = [i for i, q in enumerate(questions) if q.category == category]
        if picked:
            print(
                adherence_row(
                    category,
                    config,
                    [runs[i] for i in picked],
                    [questions[i].answer for i in picked],
                )
            )
    print(adherence_row("all", config, runs, [q.answer for q in questions]))
    titles = {d.id: str(d.metadata["title"]) for d in build_corpus(toy_world())}
    queries = [
        (event["query"], {titles[i] for i in q.supporting_ids})
        for q, r in zip(questions, runs, strict=True)
        for event in r["turns"]
        if event["action"] == "search"
    ]
    named = sum(query in entities for query, entities in queries)
    print(
        f"\n{len(queries)} queries; {named} ({named / max(1, len(queries)):.0%}) are exactly "
        "the name of an entity of the question's reasoning steps"
    )


if __name__ == "__main__":
    main()
