"""Every method on the toy world through the evaluation harness, thresholds calibrated.

1. The 230 toy questions become evaluation examples (``toy_examples``) and are split
   into dev and test with each category's share kept (``split_dev_test``, seed 0).
2. On dev, the thresholds of FLARE (``theta``), DRAGIN (``theta``), SeaKR (``delta``),
   ETC (``theta``) and the margin gate (``threshold``; the toy model's margins lie
   between 11 and 13 nats) are swept with ``calibrate_threshold`` and one value is
   chosen by the stated rule (``choose_threshold``: best F1, ties to fewer retrievals);
   the curves are printed.
3. On test, every method runs with ``evaluate_method`` (its own resumable run directory),
   the calibrated methods with their chosen value, the others with ``TOY_CONFIGS``, and
   one table compares them: EM, F1, EM per category, retrievals, LLM calls, tokens and
   seconds per question.

Every run writes as it goes under ``--out``: run the command again and it resumes.
``--concurrency N`` answers N questions at a time, their model calls decoded together
(the same answers; a question's seconds then include the time it decodes beside others).

Run:
    python benchmarks/toy_methods.py [--out runs/toy] [--dev-limit N] [--test-limit N]
        [--methods ircot,dragin] [--concurrency 8] [--model DIR]
        [--threshold dragin=0.25 ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

import torch

from langchain_adaptive_rag.evaluation import RunSettings, evaluate_method, summarize
from langchain_adaptive_rag.evaluation.calibration import (
    THRESHOLD_FIELDS,
    calibrate_threshold,
    choose_threshold,
)
from langchain_adaptive_rag.evaluation.datasets import Example
from langchain_adaptive_rag.evaluation.results import read_results
from langchain_adaptive_rag.evaluation.setup import batch_rows
from langchain_adaptive_rag.graphs import display_name
from langchain_adaptive_rag.toyworld import (
    TOY_PROMPTS,
    load_toy_model,
    toy_corpus,
    toy_questions,
    toy_retriever,
)
from langchain_adaptive_rag.toyworld.benchmark import split_dev_test, toy_examples
from langchain_adaptive_rag.toyworld.comparison import TOY_CONFIGS, TOY_METHODS
from langchain_adaptive_rag.toyworld.questions import QuestionCategory

SWEEPS: dict[str, tuple[float, ...]] = {
    "flare": (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99),
    "dragin": (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0),
    "seakr": (-8.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0),
    "etc": (0.1, 0.3, 0.5, 0.8, 1.0, 1.3, 1.6, 2.0, 3.0),
    "uncertainty_gate": (11.0, 11.5, 11.8, 12.0, 12.2, 12.4, 12.6, 13.0),
}
"""Candidate thresholds per calibrated method."""

CATEGORIES: tuple[str, ...] = get_args(QuestionCategory)


def _balanced(examples: Sequence[Example], limit: int) -> list[Example]:
    """The first ``limit`` examples taking categories in turn (all when ``limit`` is 0)."""
    if not limit:
        return list(examples)
    by_category = {c: [e for e in examples if e.extra["category"] == c] for c in CATEGORIES}
    chosen: list[Example] = []
    while len(chosen) < limit and any(by_category.values()):
        for items in by_category.values():
            if items and len(chosen) < limit:
                chosen.append(items.pop(0))
    return chosen


def _em_by_category(run_dir: Path, examples: Sequence[Example]) -> dict[str, float]:
    category = {e.id: str(e.extra["category"]) for e in examples}
    scores: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    for record in read_results(run_dir):
        metrics = record.get("metrics") or {}
        em = float(metrics.get("em", 0.0)) if isinstance(metrics, dict) else 0.0
        scores[category[str(record["id"])]].append(em)
    return {c: sum(v) / len(v) for c, v in scores.items() if v}


def _given_thresholds(pairs: Sequence[str]) -> dict[str, float]:
    """``--threshold METHOD=VALUE`` options as a mapping, checked."""
    given: dict[str, float] = {}
    for pair in pairs:
        method, _, value = pair.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if method not in SWEEPS or math.isnan(number):
            msg = (
                f"Received --threshold {pair!r}; expected METHOD=VALUE with METHOD one of "
                f"{', '.join(SWEEPS)} and a number, e.g. --threshold dragin=0.25."
            )
            raise SystemExit(msg)
        given[method] = number
    return given


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/toy", help="directory of every run (resumable)")
    parser.add_argument("--dev-limit", type=int, default=0, help="dev questions (0: all)")
    parser.add_argument("--test-limit", type=int, default=0, help="test questions (0: all)")
    parser.add_argument(
        "--methods",
        default=",".join(TOY_METHODS),
        help="comma-separated (default: all the toy model runs)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=1, help="questions answered at once (default 1)"
    )
    parser.add_argument(
        "--model", default=None, help="a toy model directory (default: the shipped one)"
    )
    parser.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METHOD=VALUE",
        help="run METHOD at VALUE instead of calibrating it (repeatable)",
    )
    args = parser.parse_args()
    methods = args.methods.split(",")
    given = _given_thresholds(args.threshold)
    torch.set_num_threads(2)
    out = Path(args.out)
    model = load_toy_model(args.model, batch_concurrent_calls=args.concurrency > 1)
    model.max_batch_rows = max(batch_rows(TOY_CONFIGS[m], args.concurrency) for m in methods)
    retriever = toy_retriever(k=3)
    dev, test = split_dev_test(toy_examples(toy_questions(), toy_corpus()))
    dev, test = _balanced(dev, args.dev_limit), _balanced(test, args.test_limit)
    settings = RunSettings(
        method="dragin", dataset="toyworld", model=f"toy model ({args.model or 'shipped'})"
    )
    print(f"toy world: {len(dev)} dev and {len(test)} test questions, BM25 top-3\n")

    chosen: dict[str, float] = dict(given)
    for method, values in SWEEPS.items():
        if method not in methods or method in given:
            continue
        start = time.time()
        points = calibrate_threshold(
            method,  # type: ignore[arg-type]
            dev,
            model,
            retriever,
            values,
            out_dir=out / "calibration" / method,
            config=TOY_CONFIGS[method],
            prompts=TOY_PROMPTS,
            settings=settings,
            concurrency=args.concurrency,
        )
        best = choose_threshold(points)
        chosen[method] = best.threshold
        name = THRESHOLD_FIELDS[method]
        label = display_name(method)
        print(f"{label} {name} on dev ({time.time() - start:.0f}s): chosen {best.threshold:g}")
        print(f"| {name} | EM | F1 | retrievals/q |")
        print("|---:|---:|---:|---:|")
        for p in points:
            mark = " *" if p.threshold == best.threshold else ""
            print(
                f"| {p.threshold:g}{mark} | {p.em:.3f} | {p.f1:.3f} | "
                f"{p.retrievals_per_question:.2f} |"
            )
        print()

    print(f"every method on test ({len(test)} questions):\n")
    header = (
        "| method | EM | F1 | EM known | EM known-then-unknown | EM unknown | "
        "retrievals/q | LLM calls/q | tokens/q | s/q |"
    )
    print(header)
    print("|---|" + "---:|" * 9)
    for method in methods:
        config = TOY_CONFIGS[method]
        if method in chosen:
            config = dataclasses.replace(config, **{THRESHOLD_FIELDS[method]: chosen[method]})  # type: ignore[arg-type]
        run_dir = out / "test" / method
        evaluate_method(
            model,
            retriever,
            method,  # type: ignore[arg-type]
            test,
            run_dir,
            config=config,
            prompts=TOY_PROMPTS,
            settings=settings,
            progress=False,
            concurrency=args.concurrency,
        )
        row = summarize(run_dir)
        by_category = _em_by_category(run_dir, test)
        cells = [f"{by_category.get(c, float('nan')):.3f}" for c in CATEGORIES]
        print(
            f"| {display_name(method)} | {row['em']:.3f} | {row['f1']:.3f} | "
            f"{' | '.join(cells)} | "
            f"{row['retrievals_per_q']:.2f} | {row['llm_calls_per_q']:.1f} | "
            f"{row['tokens_per_q']:.0f} | {row['seconds_per_q']:.2f} |"
        )


if __name__ == "__main__":
    main()
