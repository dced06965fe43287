"""Comparisons from scratch: the toy model's shape with and without the year-order circuit.

Each example is a practice-world comparison ("Who was born first, A or B?") in the graphs'
prompt format, with both people's passages and one other passage as context and the gold
chain of thought as the target (loss on the answer only). Three arms start from
``build_model`` with the default shape and
seed: ``plain`` (the reading circuit only), ``set`` (the order circuit set at
initialisation, then free) and ``held`` (set again after every step, as the shipped run
does for its first half). Same data, same optimiser. Reported: on fresh comparisons with
the gold chain of thought given up to "So the answer is", the share whose most likely
next token is the earlier-born person's given name (chance 0.5), at each checkpoint, and
each arm's ratio to ``plain`` measured in the same run.

Usage: ``python benchmarks/toy_order_circuit.py [--steps N] [--every K]``.
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
from langchain_adaptive_rag.toyworld.corpus import build_corpus
from langchain_adaptive_rag.toyworld.questions import ToyQuestion, iter_questions
from langchain_adaptive_rag.toyworld.world import PRACTICE_POOLS, generate_world
from toyworld_training.data import PRACTICE_SIZES, qa_example
from toyworld_training.train import TrainConfig, _build, _encode, order_layout

Case = tuple[list[int], list[int], int, int]
"""Token ids, labels, index of the answer token "is", id of the right given name."""


class Comparisons:
    """Comparison examples over fresh practice worlds."""

    def __init__(self, tokenizer: object, seed: int) -> None:
        self.tokenizer = tokenizer
        self.rng = random.Random(seed)
        self.world_seed = 50_000 + seed * 1000

    def _world(self) -> tuple[list[ToyQuestion], dict[str, str]]:
        self.world_seed += 1
        world = generate_world(
            self.world_seed, sizes=PRACTICE_SIZES, pools=PRACTICE_POOLS, id_prefix="cmp-"
        )
        passages = {d.id or "": d.page_content for d in build_corpus(world)}
        return [q for q in iter_questions(world) if q.type == "comparison"], passages

    def cases(self, count: int) -> list[Case]:
        result: list[Case] = []
        while len(result) < count:
            questions, passages = self._world()
            for question in self.rng.sample(questions, min(8, len(questions))):
                gold = [passages[i] for i in question.supporting_ids]
                other = self.rng.choice([t for k, t in passages.items() if k not in gold])
                context = [*gold, other]
                self.rng.shuffle(context)
                example = qa_example(question, context)
                ids, labels = _encode(self.tokenizer, example)
                name: int = self.tokenizer(  # type: ignore[operator]
                    " " + question.answer.split()[0], add_special_tokens=False
                )["input_ids"][0]
                answer = len(ids) - 1 - ids[::-1].index(name)
                result.append((ids, labels, answer - 1, name))
        return result[:count]


def _batch(cases: list[Case], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(c[0]) for c in cases)
    ids = torch.full((len(cases), width), pad)
    labels = torch.full((len(cases), width), -100)
    mask = torch.zeros((len(cases), width), dtype=torch.long)
    for row, (tokens, targets, _, _) in enumerate(cases):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        labels[row, : len(targets)] = torch.tensor(targets)
        mask[row, : len(tokens)] = 1
    return ids, labels, mask


def accuracy(model: torch.nn.Module, cases: list[Case], pad: int) -> float:
    """Share of cases whose next token after "is" is the right given name."""
    model.eval()
    hits = 0
    with torch.no_grad():
        for start in range(0, len(cases), 16):
            chunk = cases[start : start + 16]
            ids, _, mask = _batch(chunk, pad)
            logits = model(input_ids=ids, attention_mask=mask).logits
            for row, (_, _, gate, name) in enumerate(chunk):
                hits += int(logits[row, gate].argmax()) == name
    model.train()
    return hits / len(cases)


def run(config: TrainConfig, tokenizer: object, steps: int, every: int, batch: int) -> list[float]:
    """Train one arm; accuracy at every ``every`` steps."""
    pad = int(tokenizer.pad_token_id)  # type: ignore[attr-defined]
    model, circuit = _build(config, len(tokenizer), order_layout(tokenizer))  # type: ignore[arg-type]
    model.train()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
    )

    def schedule(step: int) -> float:
        warm = min(1.0, (step + 1) / config.warmup_steps)
        return warm * (0.1 + 0.45 * (1 + math.cos(math.pi * step / steps)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    data = Comparisons(tokenizer, seed=0)
    held_out = Comparisons(tokenizer, seed=1).cases(96)
    result = []
    for step in range(1, steps + 1):
        ids, labels, mask = _batch(data.cases(batch), pad)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if circuit is not None and step <= config.order_hold * steps:
            circuit.hold(model, recalibrate=step % config.order_recalibrate == 0)
        if step % every == 0:
            result.append(accuracy(model, held_out, pad))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps per arm")
    parser.add_argument("--every", type=int, default=100, help="steps between measurements")
    parser.add_argument("--batch", type=int, default=16, help="examples per step")
    args = parser.parse_args()
    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(str(TOY_MODEL_PATH))
    default = TrainConfig()
    arms = {
        "plain": dataclasses.replace(default, order_circuit=False),
        "set": dataclasses.replace(default, order_hold=0.0),
        "held": dataclasses.replace(default, order_hold=1.0),
    }
    results: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for name, config in arms.items():
        start = time.perf_counter()
        results[name] = run(config, tokenizer, args.steps, args.every, args.batch)
        seconds[name] = time.perf_counter() - start
    print(
        f"Comparisons with gold passages, batch {args.batch}, lr {default.learning_rate}: "
        "share answering the earlier-born person's given name (chance 0.5)"
    )
    header = " | ".join(f"step {(i + 1) * args.every}" for i in range(len(results["plain"])))
    print(f"| arm | {header} | seconds |")
    print("|---|" + "---:|" * (len(results["plain"]) + 1))
    for name, values in results.items():
        cells = " | ".join(f"{v:.3f}" for v in values)
        print(f"| {name} | {cells} | {seconds[name]:.0f} |")
    for name in ("set", "held"):
        ratios = " | ".join(
            f"{a / max(p, 1e-9):.2f}x" for a, p in zip(results[name], results["plain"], strict=True)
        )
        print(f"| {name} / plain | {ratios} | |")


if __name__ == "__main__":
    main()
