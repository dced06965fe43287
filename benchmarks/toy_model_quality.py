"""Quality of the toy model on the toy world's fixed evaluation questions.

Measures, with the product's own generation path (``ChatTransformers.generate_trace``,
greedy, stop at the newline, entropies of the raw distribution):

- closed-book accuracy on known-fact questions (target >= 90%) and on unknown-fact ones
  (target <= 10%): compositional ("When was the director of film X born?") and inference
  ("Who is the paternal grandfather of A?") questions, whose answers cannot be guessed;
- accuracy on unknown-fact questions with their gold passages as context (target >= 80%),
  with the gold passages among two other people's passages (seeded random), with BM25's
  top 3 for the question, and continuing a known first step with only the second hop's
  passage;
- comparison questions ("Who was born first?") separately (a guess is right half the time);
- the distributions of the max and mean token entropy over the generated answer tokens,
  known vs unknown answers (closed-book), and the AUROC of the max entropy.

Usage: ``python benchmarks/toy_model_quality.py [--model DIR] [--limit N]``.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.evaluation.metrics import exact_match
from langchain_adaptive_rag.prompts import build_prompt, extract_answer
from langchain_adaptive_rag.state import RetrievedDoc
from langchain_adaptive_rag.toyworld import (
    TOY_PROMPTS,
    ToyQuestion,
    load_toy_model,
    toy_corpus,
    toy_questions,
    toy_retriever,
)


@dataclass
class Result:
    question: ToyQuestion
    answer: str | None
    max_entropy: float
    mean_entropy: float

    @property
    def correct(self) -> bool:
        return exact_match(self.answer or "", self.question.answer) == 1.0


def run(
    model: ChatTransformers, question: ToyQuestion, docs: Sequence[str] = (), accepted: int = 0
) -> Result:
    prefix = "".join(f" {s}" for s in question.steps[:accepted])
    context: list[RetrievedDoc] = [{"id": str(i), "text": t} for i, t in enumerate(docs)]
    prompt = build_prompt(TOY_PROMPTS, question.question, prefix, context)
    decoding = replace(model.decoding, max_new_tokens=64, stop=("\n",))
    trace = model.generate_trace(prompt, decoding=decoding)[0]
    entropies = np.asarray(trace.entropies, dtype=np.float64)
    return Result(
        question,
        extract_answer(prefix + trace.text),
        float(entropies.max()) if entropies.size else 0.0,
        float(entropies.mean()) if entropies.size else 0.0,
    )


def accuracy(results: Sequence[Result]) -> float:
    return sum(r.correct for r in results) / max(1, len(results))


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(a positive scores above a negative), ties counted half."""
    if not positive or not negative:
        return float("nan")
    pos, neg = np.asarray(positive)[:, None], np.asarray(negative)[None, :]
    return float((pos > neg).mean() + 0.5 * (pos == neg).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="model directory (default: shipped)")
    parser.add_argument("--limit", type=int, default=0, help="questions per set (0: all)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    start = time.time()
    model = load_toy_model(args.model)
    passages = {d.id: d.page_content for d in toy_corpus()}
    retriever = toy_retriever(k=3)
    rng = random.Random(0)

    def take(questions: list[ToyQuestion]) -> list[ToyQuestion]:
        return questions[: args.limit] if args.limit else questions

    questions = toy_questions()
    open_types = ("compositional", "inference")
    known = take([q for q in questions if q.type in open_types and q.answer_known])
    unknown = take([q for q in questions if q.type in open_types and not q.answer_known])
    second = take([q for q in unknown if q.category == "known_first_unknown_second"])
    compare = take([q for q in questions if q.type == "comparison"])

    def gold(q: ToyQuestion) -> list[str]:
        docs = [passages[i] for i in dict.fromkeys(q.supporting_ids)]
        rng.shuffle(docs)
        return docs

    closed_known = [run(model, q) for q in known]
    closed_unknown = [run(model, q) for q in unknown]
    with_gold = [run(model, q, gold(q)) for q in unknown]
    people = sorted(i for i in passages if isinstance(i, str) and i.startswith("person"))

    def distracted(q: ToyQuestion) -> list[str]:
        others = [i for i in rng.sample(people, 4) if i not in q.supporting_ids][:2]
        docs = [*gold(q), *(passages[i] for i in others)]
        rng.shuffle(docs)
        return docs

    with_others = [run(model, q, distracted(q)) for q in unknown]
    with_bm25 = [
        run(model, q, [d.page_content for d in retriever.invoke(q.question)]) for q in unknown
    ]
    continued = [run(model, q, [passages[q.supporting_ids[1]]], accepted=1) for q in second]
    compare_closed = [run(model, q) for q in compare]
    compare_gold = [run(model, q, gold(q)) for q in compare]

    rows = [
        ("closed-book, known facts", closed_known, ">= 0.90", accuracy(closed_known) >= 0.9),
        ("closed-book, unknown facts", closed_unknown, "<= 0.10", accuracy(closed_unknown) <= 0.1),
        ("unknown facts, gold passages", with_gold, ">= 0.80", accuracy(with_gold) >= 0.8),
        ("unknown facts, gold + 2 other people", with_others, "", None),
        ("unknown facts, BM25 top-3 (question)", with_bm25, "", None),
        ("known 1st hop given, 2nd-hop passage", continued, "", None),
        ("comparison, closed-book (all)", compare_closed, "", None),
        ("comparison, gold passages (all)", compare_gold, "", None),
    ]
    print(f"{'measure':<40} {'n':>4} {'accuracy':>9} {'target':>8} {'met':>4}")
    for name, results, target, met in rows:
        flag = "" if met is None else ("yes" if met else "NO")
        print(f"{name:<40} {len(results):>4} {accuracy(results):>9.3f} {target:>8} {flag:>4}")
    print()
    print("per question type and category (closed-book / gold passages):")
    for kind in open_types:
        for category in ("known", "known_first_unknown_second", "unknown"):
            closed = [
                r
                for r in closed_known + closed_unknown
                if r.question.type == kind and r.question.category == category
            ]
            read = [
                r for r in with_gold if r.question.type == kind and r.question.category == category
            ]
            if closed:
                text = f"{accuracy(closed):.3f}" + (f" / {accuracy(read):.3f}" if read else "")
                print(f"  {kind:<14} {category:<28} n={len(closed):<4} {text}")

    def stats(values: Sequence[float]) -> str:
        q1, q2, q3 = np.quantile(values, [0.25, 0.5, 0.75])
        return f"{np.mean(values):>6.3f} {q1:>6.3f} {q2:>6.3f} {q3:>6.3f}"

    print()
    print("token entropy (nats) over the generated answer, closed-book:")
    print(f"{'answers':<26} {'signal':<12} {'mean':>6} {'q25':>6} {'median':>6} {'q75':>6}")
    for label, results in (("known facts", closed_known), ("unknown facts", closed_unknown)):
        print(f"{label:<26} {'max':<12} {stats([r.max_entropy for r in results])}")
        print(f"{label:<26} {'mean':<12} {stats([r.mean_entropy for r in results])}")
    separation = auroc(
        [r.max_entropy for r in closed_unknown], [r.max_entropy for r in closed_known]
    )
    print(f"AUROC of the max entropy, unknown vs known: {separation:.3f}")
    print(f"\n({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
