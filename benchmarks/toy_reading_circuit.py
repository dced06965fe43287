"""Associative recall from scratch: the toy model's shape with and without the reading circuit.

Each example lists ``--facts`` sentences "First Last was born in YEAR." about random people
of the practice name pools (the toy tokenizer's whole-word tokens), then repeats every
sentence once in shuffled order; only the repeated years are trained and scored. This is
the lookup that reading a passage needs (which year follows *this* name). Both arms start
from ``build_model`` with the default shape and
seed, one with ``reading_offsets=0`` (plain random weights), one with the default reading
circuit; same data, same optimiser. Reported: accuracy on the years of fresh examples at
each checkpoint, and the circuit arm's ratio to the plain arm measured in the same run.

Usage: ``python benchmarks/toy_reading_circuit.py [--steps N] [--every K] [--facts F]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import sys
import time
from pathlib import Path

# the training code (toyworld_training/) lives in the checkout, not in the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from transformers import AutoTokenizer

from langchain_adaptive_rag.toyworld import TOY_MODEL_PATH
from langchain_adaptive_rag.toyworld.world import PRACTICE_POOLS, YEARS
from toyworld_training.train import TrainConfig, build_model


class Facts:
    """Token ids of the recall examples."""

    def __init__(self, tokenizer: object, facts: int) -> None:
        def token(word: str) -> int:
            ids: list[int] = tokenizer(" " + word, add_special_tokens=False)["input_ids"]  # type: ignore[operator]
            if len(ids) != 1:
                msg = f"{word!r} is not one token of the toy tokenizer: {ids}"
                raise ValueError(msg)
            return ids[0]

        self.facts = facts
        self.first = [token(w) for w in PRACTICE_POOLS.first_names]
        self.last = [token(w) for w in PRACTICE_POOLS.last_names]
        self.years = [token(str(y)) for y in YEARS]
        self.template = [token("was"), token("born"), token("in")]
        self.dot = tokenizer(".", add_special_tokens=False)["input_ids"][0]  # type: ignore[operator]
        self.newline = tokenizer("\n", add_special_tokens=False)["input_ids"][-1]  # type: ignore[operator]
        self.bos = int(tokenizer.bos_token_id)  # type: ignore[attr-defined]

    def example(self, rng: random.Random) -> tuple[list[int], list[int]]:
        """Ids and labels (-100 except on the repeated years)."""
        people = list(
            zip(
                rng.sample(self.first, self.facts),
                [rng.choice(self.last) for _ in range(self.facts)],
                rng.sample(self.years, self.facts),
                strict=True,
            )
        )
        ids, labels = [self.bos], [-100]
        for first, last, year in people:
            sentence = [first, last, *self.template, year, self.dot]
            ids += sentence
            labels += [-100] * len(sentence)
        ids.append(self.newline)
        labels.append(-100)
        rng.shuffle(people)
        for first, last, year in people:
            ids += [first, last, *self.template, year, self.dot]
            labels += [-100] * 5 + [year, -100]
        return ids, labels

    def batch(self, rng: random.Random, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        rows = [self.example(rng) for _ in range(size)]
        return torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows])


def accuracy(model: torch.nn.Module, data: Facts, examples: int) -> float:
    """Greedy accuracy on the years of ``examples`` fresh examples (fixed seed)."""
    model.eval()
    with torch.no_grad():
        ids, labels = data.batch(random.Random(99), examples)
        predicted = model(input_ids=ids).logits[:, :-1].argmax(-1)
        target = labels[:, 1:]
        scored = target != -100
        value = float((predicted[scored] == target[scored]).float().mean())
    model.train()
    return value


def run(
    config: TrainConfig, data: Facts, steps: int, every: int, batch: int, vocab: int
) -> list[float]:
    """Train one arm; accuracy at every ``every`` steps."""
    model = build_model(config, vocab)
    model.train()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
    )

    def schedule(step: int) -> float:
        warm = min(1.0, (step + 1) / config.warmup_steps)
        return warm * (0.1 + 0.45 * (1 + math.cos(math.pi * step / steps)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    rng = random.Random(0)
    result = []
    for step in range(1, steps + 1):
        ids, labels = data.batch(rng, batch)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if step % every == 0:
            result.append(accuracy(model, data, 64))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="training steps per arm")
    parser.add_argument("--every", type=int, default=50, help="steps between measurements")
    parser.add_argument("--facts", type=int, default=8, help="facts per example")
    parser.add_argument("--batch", type=int, default=32, help="examples per step")
    args = parser.parse_args()
    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(str(TOY_MODEL_PATH))
    data = Facts(tokenizer, args.facts)
    vocab = len(tokenizer)
    default = TrainConfig()
    arms = {"plain": dataclasses.replace(default, reading_offsets=0), "circuit": default}
    results: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for name, config in arms.items():
        start = time.perf_counter()
        results[name] = run(config, data, args.steps, args.every, args.batch, vocab)
        seconds[name] = time.perf_counter() - start
    print(
        f"Recall of {args.facts} 'First Last was born in YEAR.' facts, batch {args.batch}, "
        f"lr {default.learning_rate}, chance about {1 / args.facts:.3f}"
    )
    header = " | ".join(f"step {(i + 1) * args.every}" for i in range(len(results["plain"])))
    print(f"| arm | {header} | seconds |")
    print("|---|" + "---:|" * (len(results["plain"]) + 1))
    for name, values in results.items():
        cells = " | ".join(f"{v:.3f}" for v in values)
        print(f"| {name} | {cells} | {seconds[name]:.0f} |")
    ratios = " | ".join(
        f"{c / max(p, 1e-9):.1f}x"
        for c, p in zip(results["circuit"], results["plain"], strict=True)
    )
    print(f"| circuit / plain | {ratios} | |")


if __name__ == "__main__":
    main()
