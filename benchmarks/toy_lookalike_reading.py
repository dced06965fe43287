"""Reading among look-alike passages: the toy model with and without other people's passages.

For one-hop "When was X born?" and two-hop "When was the director of film T born?"
questions, the gold passages are given alone, then shuffled with two passages about
other people of the same world ("Y was born in YEAR in CITY. ..."): a model that looks
facts up by name is unaffected; one that copies the year after any "was born in" is
right about once in three. Measured on the evaluated world's unknown facts and on fresh
practice worlds of the kind training reads (disjoint and mixed name pools), so a gap
on practice worlds means the lookup is not learned, not merely not transferred.

A second table asks what SeaKR's self-aware re-ranking needs: after the accepted first
step ("The film T was directed by X Y."), the second step is written from the gold
passage, from the gold passage among two look-alikes that share the director's given or
family name, from one such look-alike alone, and closed-book. Reported: how often the
step gives the gold year, and how often every token of the step has probability >= 0.9
(top-p 0.9 then keeps one token at each place, so all of SeaKR's samples agree and its
``U`` sits at the floor).

Usage: ``python benchmarks/toy_lookalike_reading.py [--model DIR] [--per-world N]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

# the training code (toyworld_training/) lives in the checkout, not in the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from langchain_adaptive_rag.prompts import extract_answer
from langchain_adaptive_rag.toyworld import TOY_MODEL_PATH
from langchain_adaptive_rag.toyworld.corpus import build_corpus
from langchain_adaptive_rag.toyworld.questions import (
    ToyQuestion,
    evaluation_questions,
    iter_questions,
)
from langchain_adaptive_rag.toyworld.world import PRACTICE_POOLS, ToyWorld, generate_world
from toyworld_training.data import MIXED_POOLS, PRACTICE_SIZES, qa_example
from toyworld_training.train import greedy_answer

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


def namesakes(person: str, passages: dict[str, str]) -> list[str]:
    """Other people's passages whose subject shares the given or family name of ``person``."""
    given, family = passages[person].split(" was born", 1)[0].split(" ", 1)
    return [
        i
        for i in sorted(passages)
        if i.startswith("person")
        and i != person
        and (
            passages[i].startswith(given + " ")
            or passages[i].split(" was born", 1)[0].endswith(" " + family)
        )
    ]


def second_step(
    model: torch.nn.Module, tokenizer: object, question: ToyQuestion, context: list[str]
) -> tuple[str, float]:
    """The greedy second step after the accepted first one, and its least token probability."""
    prompt = qa_example(question, context, accepted_steps=1).prompt
    step = greedy_answer(model, tokenizer, prompt).split(". ", 1)[0]
    ids: list[int] = tokenizer(prompt)["input_ids"]  # type: ignore[operator]
    full: list[int] = tokenizer(prompt + step)["input_ids"]  # type: ignore[operator]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([full])).logits[0, len(ids) - 1 : -1]
    chosen = logits.softmax(-1).gather(1, torch.tensor(full[len(ids) :])[:, None])
    return step, float(chosen.min()) if len(chosen) else 0.0


def namesake_rows(model: torch.nn.Module, tokenizer: object, world: ToyWorld) -> None:
    """Second steps of two-hop unknown-fact questions beside namesakes' passages."""
    passages = {d.id or "": d.page_content for d in build_corpus(world)}
    cases: dict[str, list[tuple[bool, bool]]] = {}
    for question in questions_of(world, False, 0):
        film, person = question.supporting_ids
        alike = namesakes(person, passages)[:2]
        if len(alike) < 2:
            continue
        contexts = {
            "gold passage": [passages[person], passages[film]],
            "gold + 2 namesakes": [
                passages[alike[0]],
                passages[person],
                passages[alike[1]],
                passages[film],
            ],
            "1 namesake alone": [passages[alike[0]], passages[film]],
            "closed-book": [],
        }
        for label, context in contexts.items():
            step, least = second_step(model, tokenizer, question, context)
            cases.setdefault(label, []).append(
                (f" {question.answer} " in f" {step} ", least >= 0.9)
            )
    print(f"\n{'second step from':<22} {'n':>4} {'gold year':>10} {'every token p >= 0.9':>21}")
    for label, rows in cases.items():
        right = sum(r for r, _ in rows) / len(rows)
        sure = sum(s for _, s in rows) / len(rows)
        print(f"{label:<22} {len(rows):>4} {right:>10.3f} {sure:>21.3f}")


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
    namesake_rows(model, tokenizer, world)
    print(f"\n({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
