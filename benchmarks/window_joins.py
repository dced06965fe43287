"""Sliding-window models at concurrency: the loop's own cache against the model's.

A model with sliding-window layers (Mistral-7B-v0.1: a 4,096-position window) decoding on
the cache the model builds for itself, which keeps only the window, lets calls that
arrive while a loop runs wait for the next one and stores no prompt prefix. The loop's
own cache keeps every key and masks each windowed layer by its window in each row's
positions, which gives the same results: calls join running loops and the few-shot
exemplars come from the prefix cache.

Each method answers the same toy questions through the evaluation runner with DRAGIN's
2WikiMultihopQA prompts (about 1,100 tokens) on a randomly initialised Mistral-shaped
model with a 4,096-position window (its answers are noise, the workload is real), at
concurrency 1 and ``--concurrency``, twice: on the model's own cache (capabilities with
``window=0``) and on the loop's own cache. Printed
per method and concurrency: questions per second both ways, their ratio, and whether
the answers and retrievals agree question by question.

``python benchmarks/window_joins.py [--size 8m] [--questions 16] [--methods
fix_length,dragin] [--concurrency 8] [--device cpu] [--dtype float32]``.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import torch
from random_llama import SIZES, build_random_llama
from real_scale_concurrency import answer

from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.graphs import display_name
from langchain_adaptive_rag.toyworld import toy_corpus, toy_questions
from langchain_adaptive_rag.toyworld.benchmark import split_dev_test, toy_examples

WINDOW = 4096
"""Mistral-7B-v0.1's ``sliding_window``."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="8m")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--methods", default="fix_length,dragin")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    model, tokenizer = build_random_llama(args.size, args.device, dtype, sliding_window=WINDOW)
    within = ModelCapabilities.of(model)
    assert within.window == WINDOW
    own_cache = replace(within, window=0)  # every loop on the model's own cache
    if model.device.type == "cuda":  # as `adaptive-rag eval --device cuda` runs
        torch.backends.cuda.enable_cudnn_sdp(False)
    dev, test = split_dev_test(toy_examples(toy_questions(), toy_corpus()))
    data = (dev, test[: args.questions])
    print(
        f"random {args.size} Mistral (window {WINDOW}, {model.num_parameters() / 1e6:.0f}M,"
        f" {args.dtype}) on {model.device}, 2WikiMultihopQA few-shot prompts,"
        f" {args.questions} toy questions\n"
    )
    print("| method | concurrency | q/s, model's cache | q/s, own cache in window | ratio | same |")
    print("|---|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            for n in (1, args.concurrency):
                rates, answers = [], []
                for before in (True, False):
                    out = Path(tmp) / f"{method}-{n}-{'before' if before else 'now'}"
                    chosen = own_cache if before else within
                    rate, got = answer(model, tokenizer, method, n, data, out, chosen)
                    rates.append(rate)
                    answers.append(got)
                same = "yes" if answers[0] == answers[1] else "no"
                print(
                    f"| {display_name(method)} | {n} | {rates[0]:.2f} | {rates[1]:.2f} |"
                    f" **{rates[1] / rates[0]:.2f}x** | {same} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
