"""Concurrency at real scale: a 7B-shaped model in bfloat16 on the papers' few-shot prompts.

Each method answers the same toy questions through the evaluation runner with DRAGIN's
2WikiMultihopQA prompts (about 1,100 tokens) and a randomly initialised Llama built on the
device (``--size 7b``: Llama-2-7B's body; its answers are noise, the workload is real:
prompt lengths, calls, retrievals), at concurrency 1 and ``--concurrency``. On a GPU each
runs twice, with torch's cuDNN attention allowed and not
(``torch.backends.cuda.enable_cudnn_sdp``): cuDNN builds a plan per thread for each new
shape and stride of the keys (batch rows, key length), which a batched decoding loop,
whose rows and lengths change every step, meets far more often than a single sequence.
Every run uses a new chat model (a new engine thread, as a new process would). Printed per
method: questions per second at 1 and N, N / 1, and whether the answers and retrievals at
N equal those at 1 (in bfloat16 a batch rounds differently, so a random model's sampled or
near-tied tokens may part).

Run on a GPU: ``python benchmarks/real_scale_concurrency.py [--size 7b] [--questions 8]
[--methods fix_length,dragin,seakr] [--concurrency 8]``; ``--device cpu --size 8m --dtype
float32`` checks it on a CPU.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from prefix_cache import comparable
from random_llama import SIZES, build_random_llama

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.evaluation import evaluate_method
from langchain_adaptive_rag.evaluation.setup import batch_rows
from langchain_adaptive_rag.exemplars import dataset_prompts
from langchain_adaptive_rag.graphs import display_name
from langchain_adaptive_rag.toyworld import toy_corpus, toy_questions, toy_retriever
from langchain_adaptive_rag.toyworld.benchmark import split_dev_test, toy_examples
from langchain_adaptive_rag.toyworld.comparison import TOY_CONFIGS


def answer(
    model: Any,
    tokenizer: Any,
    method: str,
    concurrency: int,
    data: tuple[list, list],
    out: Path,
    capabilities: ModelCapabilities | None = None,
) -> tuple[float, dict[str, tuple[object, ...]]]:
    """Questions per second of one run on a new chat model, and its answers.

    ``capabilities``: run the model as one of these (default: what it is).
    """
    dev, test = data
    config = TOY_CONFIGS[method]
    chat = ChatTransformers(
        model=model,
        tokenizer=tokenizer,
        use_chat_template=False,
        batch_concurrent_calls=True,
        max_batch_rows=batch_rows(config, concurrency),
    )
    if capabilities is not None:
        chat.local_model.capabilities = capabilities
    prompts = dataset_prompts("2wikimultihopqa")
    common: dict[str, Any] = {"config": config, "prompts": prompts, "progress": False}
    retriever = toy_retriever(k=3)
    evaluate_method(chat, retriever, method, dev[:1], out.with_name(out.name + "-warm"), **common)  # type: ignore[arg-type]
    start = time.perf_counter()
    evaluate_method(chat, retriever, method, test, out, concurrency=concurrency, **common)  # type: ignore[arg-type]
    rate = len(test) / (time.perf_counter() - start)
    if chat.scheduler is not None:
        chat.scheduler.close()
    return rate, comparable(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="7b")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="bfloat16")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--methods", default="fix_length,dragin,seakr")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--cudnn",
        choices=["both", "allowed", "off"],
        default="both",
        help="on a GPU: torch's cuDNN attention allowed, off, or each in turn",
    )
    args = parser.parse_args()
    model, tokenizer = build_random_llama(args.size, args.device, getattr(torch, args.dtype))
    dev, test = split_dev_test(toy_examples(toy_questions(), toy_corpus()))
    data = (dev, test[: args.questions])
    on_gpu = model.device.type == "cuda"
    chosen = {"both": [True, False], "allowed": [True], "off": [False]}[args.cudnn]
    settings = chosen if on_gpu else [True]
    print(
        f"random {args.size} Llama ({model.num_parameters() / 1e6:.0f}M, {args.dtype}) on "
        f"{model.device}, 2WikiMultihopQA few-shot prompts, {args.questions} toy questions\n"
    )
    print("| method | cuDNN attention | q/s at 1 | q/s at N | N / 1 | same answers at N |")
    print("|---|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            for cudnn in settings:
                if on_gpu:
                    torch.backends.cuda.enable_cudnn_sdp(cudnn)
                runs = [
                    answer(model, tokenizer, method, n, data, Path(tmp) / f"{method}-{cudnn}-{n}")
                    for n in (1, args.concurrency)
                ]
                (one, alone), (many, together) = runs
                label = ("allowed" if cudnn else "off") if on_gpu else "n/a (CPU)"
                print(
                    f"| {display_name(method)} | {label} | {one:.2f} | {many:.2f} | "
                    f"{many / one:.2f}x | {'yes' if alone == together else 'no'} |",
                    flush=True,
                )
    if on_gpu:
        torch.backends.cuda.enable_cudnn_sdp(True)


if __name__ == "__main__":
    main()
