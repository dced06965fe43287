"""Evaluation throughput: ``--concurrency 8`` against 1 on the toy world, same results.

Each method answers the same toy test questions through the evaluation runner
(``evaluate_method``), with the shipped toy model, BM25 top 3 and the toy configs: once
one question at a time, once eight at a time, whose model calls join one batched decoding
loop (``ChatTransformers`` decodes concurrent calls together), ``--rounds`` times each,
alternately. Printed per method: questions per second both ways (median of the rounds),
the ratio, how many requests the batches held, and how every results file agrees with
the first one at concurrency 1 question by question (``compare_records``: "bit" when
identical to the bit; "rounding" when answers, texts, documents, decisions and counts are
equal and scores within 1e-4; "NO" otherwise); then
what one decoding step costs per row at 1, 9 and ``--max-batch-rows`` rows, the ceiling
of what batching can give.

Run: ``python benchmarks/eval_concurrency.py [--questions 48] [--rounds 3]
[--methods flare,dragin]``
(8 dev questions are run first at both settings, untimed)
(``--device cuda`` on a GPU). Target: concurrency 8 >= 3x the questions per second.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path

import torch

from langchain_adaptive_rag.engine.kv_cache import RoomyCache
from langchain_adaptive_rag.engine.scheduler import Scheduler
from langchain_adaptive_rag.evaluation import (
    RunAgreement,
    RunSettings,
    compare_records,
    evaluate_method,
)
from langchain_adaptive_rag.evaluation.results import read_results
from langchain_adaptive_rag.evaluation.setup import batch_rows
from langchain_adaptive_rag.graphs import AVAILABLE_METHODS, display_name
from langchain_adaptive_rag.toyworld import (
    TOY_PROMPTS,
    load_toy_model,
    toy_corpus,
    toy_questions,
    toy_retriever,
)
from langchain_adaptive_rag.toyworld.benchmark import split_dev_test, toy_examples
from langchain_adaptive_rag.toyworld.comparison import TOY_CONFIGS, TOY_METHODS


def _agreement(agreements: list[RunAgreement]) -> str:
    """ "bit", "rounding (max X)" or "NO", over every run compared with the first."""
    if not all(a.agree for a in agreements):
        return "NO"
    if all(a.bit_identical for a in agreements):
        return "bit"
    return f"rounding (max {max(a.largest_rounding for a in agreements):.0e})"


def _counts(engine: Scheduler | None) -> tuple[int, int]:
    """Loops run and requests decoded so far by the model's engine."""
    if engine is None:
        return 0, 0
    loops = sum(engine.batch_sizes.values())
    started = sum(size * count for size, count in engine.batch_sizes.items())
    return loops, started + engine.joined


def step_costs(model: object, rows: tuple[int, ...], context: int = 300) -> dict[int, float]:
    """Seconds per decoded row of one KV-cache step at each batch size (median of 20).

    The ceiling of what batching gives: a method whose calls already decode ``r`` rows
    (SeaKR: the greedy step and its samples) gains at most ``cost[r] / cost[R]`` from
    batches of ``R`` rows. The cache is the decoding loop's (``RoomyCache``: steps
    append in place).
    """
    hf_model = model.hf_model  # type: ignore[attr-defined]
    vocab = hf_model.config.vocab_size
    costs: dict[int, float] = {}
    with torch.inference_mode():
        for size in rows:
            ids = torch.randint(5, vocab, (size, context), device=hf_model.device)
            cache = RoomyCache()  # the decoding loop's cache: steps append in place
            hf_model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
            token = ids[:, -1:]
            times = []
            for _ in range(20):
                start = time.perf_counter()
                hf_model(input_ids=token, cache=cache, use_cache=True)
                times.append(time.perf_counter() - start)
            costs[size] = statistics.median(times) / size
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=48)
    parser.add_argument("--warmup", type=int, default=8, help="questions run first, untimed")
    parser.add_argument(
        "--methods",
        default=",".join(TOY_METHODS),
        help="comma-separated (default: all the toy model runs)",
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--rounds", type=int, default=1, help="runs at each concurrency, alternately (median)"
    )
    parser.add_argument(
        "--max-batch-rows",
        type=int,
        default=None,
        help="default: room for every question's call, as adaptive-rag eval gives",
    )
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    torch.set_num_threads(2)
    methods = [m for m in args.methods.split(",") if m in AVAILABLE_METHODS]
    model = load_toy_model()
    model.batch_concurrent_calls = True  # on a CPU it is off unless asked for
    model.max_batch_rows = args.max_batch_rows or max(
        batch_rows(TOY_CONFIGS[m], args.concurrency) for m in methods
    )
    if args.device:
        model.hf_model.to(args.device)
    retriever = toy_retriever(k=3)
    dev, test = split_dev_test(toy_examples(toy_questions(), toy_corpus()))
    test = test[: args.questions]
    print(
        f"toy world, {len(test)} test questions, shipped toy model on "
        f"{model.hf_model.device}, concurrency 1 vs {args.concurrency}, at most "
        f"{model.max_batch_rows} sequences decoded together\n"
    )
    print("| method | q/s at 1 | q/s at N | N / 1 | requests per loop (mean) | same results |")
    print("|---|---:|---:|---:|---:|---|")
    ratios = []
    totals = [0.0, 0.0]  # seconds for every method's questions, at 1 and at N
    with tempfile.TemporaryDirectory() as tmp:
        for method in methods:
            for concurrency in (1, args.concurrency):  # warm-up: lazy imports, caches
                evaluate_method(
                    model,
                    retriever,
                    method,  # type: ignore[arg-type]
                    dev[: args.warmup],
                    Path(tmp) / f"warmup-{method}-{concurrency}",
                    config=TOY_CONFIGS[method],
                    prompts=TOY_PROMPTS,
                    concurrency=concurrency,
                    progress=False,
                )
            seconds_at: dict[int, list[float]] = {1: [], args.concurrency: []}
            agreements = []
            first: list[dict[str, object]] | None = None
            loops = requests = 0
            for round_, concurrency in itertools.product(
                range(args.rounds), (1, args.concurrency)
            ):  # alternately, so a slow spell of the machine hits both
                out = Path(tmp) / f"{method}-{concurrency}-{round_}"
                engine = model.scheduler
                before = _counts(engine)
                start = time.perf_counter()
                evaluate_method(
                    model,
                    retriever,
                    method,  # type: ignore[arg-type]
                    test,
                    out,
                    config=TOY_CONFIGS[method],
                    prompts=TOY_PROMPTS,
                    settings=RunSettings(method=method, dataset="toyworld", model="toy"),
                    concurrency=concurrency,
                    progress=False,
                )
                seconds_at[concurrency].append(time.perf_counter() - start)
                got = read_results(out)
                if first is None:
                    first = got
                else:
                    agreements.append(compare_records(first, got))
                after = _counts(model.scheduler)
                if concurrency > 1:
                    loops, requests = after[0] - before[0], after[1] - before[1]
            rates = [len(test) / statistics.median(seconds_at[c]) for c in (1, args.concurrency)]
            for i, c in enumerate((1, args.concurrency)):
                totals[i] += statistics.median(seconds_at[c])
            ratio = rates[1] / rates[0]
            ratios.append(ratio)
            print(
                f"| {display_name(method)} | {rates[0]:.2f} | {rates[1]:.2f} | {ratio:.2f}x | "
                f"{requests / max(loops, 1):.1f} | {_agreement(agreements)} |",
                flush=True,
            )
    print(f"\ngeometric mean N / 1: {statistics.geometric_mean(ratios):.2f}x")
    print(
        f"every method's questions together: {totals[0]:.1f} s at 1, {totals[1]:.1f} s at "
        f"{args.concurrency}: {totals[0] / totals[1]:.2f}x the questions per second"
    )
    sizes = (1, 9, model.max_batch_rows)
    costs = step_costs(model, sizes)
    print("\none decoding step, ms per row, by rows in the batch (300 cached tokens):")
    print("| rows | " + " | ".join(str(n) for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    print("| ms per row | " + " | ".join(f"{costs[n] * 1e3:.2f}" for n in sizes) + " |")
    print(
        f"ceiling of batching for calls of 1 row: {costs[1] / costs[sizes[-1]]:.1f}x; "
        f"of 9 rows (SeaKR, k = 8): {costs[9] / costs[sizes[-1]]:.1f}x"
    )


if __name__ == "__main__":
    main()
