"""Reading among look-alike passages: the toy model with and without other people's passages.

For one-hop "When was X born?" and two-hop "When was the director of film T born?"
questions, the gold passages are given alone, then shuffled with two passages about
other people of the same world ("Y was born in YEAR in CITY. ..."): a model that looks
facts up by name is unaffected; one that copies the year after any "was born in" is
right about once in three. Measured on the evaluated world's unknown facts and on fresh
practice worlds of the kind training reads (disjoint and mixed name pools), so a gap
on practice worlds means the lookup is not learned, not merely not transferred.

Usage: ``python benchmarks/toy_lookalike_reading.py [--model DIR] [--per-world N]``.
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from langchain_adaptive_rag.prompts import extract_answer
from langchain_adaptive_rag.toyworld import TOY_MODEL_PATH
from langchain_adaptive_rag.toyworld.corpus import build_corpus
from langchain_adaptive_rag.toyworld.data import MIXED_POOLS, PRACTICE_SIZES, qa_example
from langchain_adaptive_rag.toyworld.questions import (
    ToyQuestion,
    evaluation_questions,
    iter_questions,
)
from langchain_adaptive_rag.toyworld.train import greedy_answer
from langchain_adaptive_rag.toyworld.world import PRACTICE_POOLS, ToyWorld, generate_world

PRACTICE_SEEDS = (777_001, 777_002, 777_003)
"""Seeds of the practice worlds (outside the training stream's seeds)."""


def questions_of(world: ToyWorld, practice: bool, per_world: int) -> list[ToyQuestion]:
    """Two-hop "When ... director ... born?" and one-hop "When was X born?" questions."""
    if practice:
        every = list(iter_questions(world))
        two = [q for q in every if q.type == "compositional" and q.question.startswith("When")]
        one = [q for q in every if q.id.endswith("-when-born")]
        return two[:per_world] + one[:per_world]
    return [
        q for q in evaluation_questions(world) if q.type == "compositional" and not q.answer_known
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(TOY_MODEL_PATH), help="model directory")
    parser.add_argument("--per-world", type=int, default=8, help="questions per type and world")
    args = parser.parse_args()
    torch.set_num_threads(2)
    start = time.time()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    world = generate_world(0)
    rng = random.Random(5)
    worlds: list[tuple[str, ToyWorld, bool]] = [("evaluated world (unknown)", world, False)]
    for seed in PRACTICE_SEEDS:
        for label, pools in (
            ("practice, disjoint pools", PRACTICE_POOLS),
            ("practice, mixed pools", MIXED_POOLS),
        ):
            practice = generate_world(
                seed, sizes=PRACTICE_SIZES, pools=pools, reserved=world.names()
            )
            worlds.append((label, practice, True))
    scores: dict[tuple[str, str, int], list[bool]] = {}
    for label, source, is_practice in worlds:
        passages = {d.id or "": d.page_content for d in build_corpus(source)}
        people = sorted(i for i in passages if i.startswith("person"))
        for question in questions_of(source, is_practice, args.per_world):
            gold = [passages[i] for i in dict.fromkeys(question.supporting_ids)]
            hops = "two-hop" if question.type == "compositional" else "one-hop"
            for others in (0, 2):
                picked = [i for i in rng.sample(people, 4) if i not in question.supporting_ids]
                context = gold + [passages[i] for i in picked[:others]]
                rng.shuffle(context)
                prompt = qa_example(question, context).prompt
                answer = extract_answer(prompt + greedy_answer(model, tokenizer, prompt))
                scores.setdefault((label, hops, others), []).append(answer == question.answer)
    print(f"{'world':<28} {'question':<9} {'n':>4} {'gold alone':>11} {'gold + 2 people':>16}")
    for label, hops in dict.fromkeys((k[0], k[1]) for k in scores):
        alone, mixed = scores[(label, hops, 0)], scores[(label, hops, 2)]
        print(
            f"{label:<28} {hops:<9} {len(alone):>4} {sum(alone) / len(alone):>11.3f}"
            f" {sum(mixed) / len(mixed):>16.3f}"
        )
    print(f"\n({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
