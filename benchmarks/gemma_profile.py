"""Where one DRAGIN question's time goes on Gemma 3 270M, and what this CPU allows.

One HotpotQA question (few-shot prompt, BM25 top 3 over its own paragraphs) is answered by
DRAGIN, or ``--method`` (the real-model settings of ``gemma_concurrency.py``), after one
warm-up question,
with timers on: prefill passes (a forward pass feeding more than one token), decoding
steps (one token per row), DRAGIN's attention pass (the out-of-context forward over the
generated text, ``forward_attention``), the output layer inside both (Gemma's 262,144-word
``lm_head``), and BM25 retrieval; what is left is Python (graph, prompts, sampling, traces).

The limits, measured in the same run: the CPU's float32 matrix-multiply rate (one square
product) against the multiply-adds the question needed (each fed token through the
decoder's weights, plus 640 x 262,144 per token that reaches ``lm_head``); and, for
decoding steps, which feed one token a row and so read every weight once a step, the rate
at which a 1-row product over ``lm_head`` reads its weights as the loop runs it
(weight-first, fed as 2 rows; ``nn.Linear``'s matrix-vector product beside it), which
bounds a step from below at the model's weight bytes over that rate; then ``lm_head`` on
8 rows against 1 (what a step of 8 rows costs the output layer), as ``nn.Linear`` and
weight-first.

``python benchmarks/gemma_profile.py [--question 0] [--method dragin] [--data-dir
../shared/data]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from gemma_concurrency import CONFIGS, DATA
from transformers import AutoModelForCausalLM, AutoTokenizer

from langchain_adaptive_rag import ChatTransformers, create_bm25_retriever
from langchain_adaptive_rag.engine.local_model import LocalModel
from langchain_adaptive_rag.engine.weight_major import weight_major_linear
from langchain_adaptive_rag.evaluation import evaluate_method, example_passages, load_dataset
from langchain_adaptive_rag.exemplars import dataset_prompts
from langchain_adaptive_rag.graphs import config_class
from langchain_adaptive_rag.pretrained import get_gemma_3_270m
from langchain_adaptive_rag.retrievers.bm25 import BM25Retriever


class Timers:
    """Seconds and counts by part, and tokens fed to the model."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.tokens: dict[str, int] = defaultdict(int)
        self.part = "decode"
        self.in_attention_pass = False
        self._started: list[float] = []

    def start(self) -> None:
        self._started.append(time.perf_counter())

    def stop(self, part: str) -> None:
        self.seconds[part] += time.perf_counter() - self._started.pop()
        self.calls[part] += 1


def instrument(model: Any, timers: Timers) -> None:
    """Time the model's forward passes (by kind) and its output layer."""

    def before(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        rows, fed = (int(ids.shape[0]), int(ids.shape[1])) if ids is not None else (1, 1)
        if timers.in_attention_pass:
            timers.part = "attention pass"
        else:
            timers.part = "prefill" if fed > 1 else "decode"
        timers.tokens[timers.part] += rows * fed
        timers.start()

    def after(module: Any, args: Any, kwargs: Any, output: Any) -> None:
        timers.stop(timers.part)

    def head_before(module: Any, args: tuple[Any, ...]) -> None:
        timers.tokens["lm_head"] += int(args[0].shape[0] * args[0].shape[1])
        timers.start()

    def head_after(module: Any, args: Any, output: Any) -> None:
        timers.stop("lm_head")

    model.register_forward_pre_hook(before, with_kwargs=True)
    model.register_forward_hook(after, with_kwargs=True)
    model.lm_head.register_forward_pre_hook(head_before)
    model.lm_head.register_forward_hook(head_after)


def timed(function: Callable[..., Any], timers: Timers, part: str) -> Callable[..., Any]:
    """``function`` timed under ``part``."""

    def run(*args: Any, **kwargs: Any) -> Any:
        timers.start()
        try:
            return function(*args, **kwargs)
        finally:
            timers.stop(part)

    return run


def attention_pass(function: Callable[..., Any], timers: Timers) -> Callable[..., Any]:
    """``LocalModel.attention_weights`` with its forward pass counted as the attention pass."""

    def run(*args: Any, **kwargs: Any) -> Any:
        timers.in_attention_pass = True
        try:
            return function(*args, **kwargs)
        finally:
            timers.in_attention_pass = False

    return run


def matmul_rate(size: int = 2048, repeats: int = 10) -> float:
    """Multiply-adds per second of a float32 square product on this CPU's threads."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return repeats * size**3 / (time.perf_counter() - start)


def read_rate(layer: torch.nn.Linear, rows: int, repeats: int = 10, *, weight_first: bool) -> float:
    """Seconds of one product of ``rows`` rows with ``layer`` (the output layer):
    ``nn.Linear``'s ``x @ W.T``, or weight-first as the decoding loop runs it
    (``weight_major_linear``: one row fed as two)."""
    x = torch.randn(rows, layer.in_features)

    def product() -> torch.Tensor:
        if weight_first:
            return weight_major_linear(layer, x)
        return torch.nn.functional.linear(x, layer.weight)

    with torch.inference_mode():
        product()  # warm
        start = time.perf_counter()
        for _ in range(repeats):
            product()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--question", type=int, default=0)
    parser.add_argument("--method", choices=sorted(CONFIGS), default="dragin")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = parser.parse_args()
    path = get_gemma_3_270m()
    model = AutoModelForCausalLM.from_pretrained(
        path, attn_implementation="sdpa", dtype=torch.float32
    ).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    examples = load_dataset("hotpotqa", args.data_dir / DATA)
    chosen, warm = examples[args.question], examples[args.question + 1]
    retriever = create_bm25_retriever(example_passages([chosen, warm]), k=3)
    chat = ChatTransformers(model=model, tokenizer=tokenizer, use_chat_template=False)
    config = config_class(args.method)(**CONFIGS[args.method])
    common: dict[str, Any] = {
        "config": config,
        "prompts": dataset_prompts("hotpotqa"),
        "progress": False,
    }
    timers = Timers()
    with tempfile.TemporaryDirectory() as tmp:
        evaluate_method(chat, retriever, args.method, [warm], Path(tmp) / "warm", **common)  # type: ignore[arg-type]
        instrument(model, timers)
        LocalModel.attention_weights = attention_pass(  # type: ignore[method-assign]
            LocalModel.attention_weights, timers
        )
        BM25Retriever._get_relevant_documents = timed(  # type: ignore[method-assign]
            BM25Retriever._get_relevant_documents, timers, "retrieval"
        )
        start = time.perf_counter()
        evaluate_method(chat, retriever, args.method, [chosen], Path(tmp) / "run", **common)  # type: ignore[arg-type]
        total = time.perf_counter() - start
    rate = matmul_rate()
    head_layer = model.lm_head
    weight = head_layer.weight
    one_mv, eight = (
        read_rate(head_layer, 1, weight_first=False),
        read_rate(head_layer, 8, weight_first=False),
    )
    one, eight_first = (
        read_rate(head_layer, 1, weight_first=True),
        read_rate(head_layer, 8, weight_first=True),
    )
    bandwidth = weight.numel() * weight.element_size() / one
    mv_bandwidth = weight.numel() * weight.element_size() / one_mv
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    step_floor = weight_bytes / bandwidth
    body = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    head = model.lm_head.weight.numel()
    fed = sum(timers.tokens[k] for k in ("prefill", "decode", "attention pass"))
    need = fed * body + timers.tokens["lm_head"] * head
    forward = sum(timers.seconds[k] for k in ("prefill", "decode", "attention pass"))
    python = total - forward - timers.seconds["retrieval"]
    print(
        f"Gemma 3 270M (float32, sdpa) on {torch.get_num_threads()} CPU threads, one {args.method} "
        f"question (HotpotQA #{args.question}, few-shot prompt, BM25 top 3): {total:.1f} s\n"
    )
    print("| part | seconds | share | passes | tokens fed |")
    print("|---|---:|---:|---:|---:|")
    for part in ("prefill", "decode", "attention pass", "retrieval"):
        print(
            f"| {part} | {timers.seconds[part]:.2f} | {timers.seconds[part] / total:.0%} | "
            f"{timers.calls[part]} | {timers.tokens[part] if part != 'retrieval' else '-'} |"
        )
    print(f"| Python (the rest) | {python:.2f} | {python / total:.0%} | - | - |")
    print(
        f"| of the passes: lm_head | {timers.seconds['lm_head']:.2f} | "
        f"{timers.seconds['lm_head'] / total:.0%} | {timers.calls['lm_head']} | "
        f"{timers.tokens['lm_head']} |"
    )
    print(
        f"\nThis CPU multiplies float32 at {rate / 1e9:.1f} G multiply-adds/s (2048 x 2048); "
        f"the question needed {need / 1e9:.1f} G ({body / 1e6:.0f}M weights per fed token, "
        f"{head / 1e6:.0f}M per lm_head token): at least {need / rate:.1f} s of matrix "
        f"products, {need / rate / total:.0%} of its time."
    )
    steps = timers.calls["decode"]
    print(
        f"A decoding step reads all {weight_bytes / 2**30:.2f} GiB of weights: lm_head's 1-row "
        f"product as the loop runs it (weight-first, fed as 2 rows) reads at "
        f"{bandwidth / 1e9:.1f} GB/s (nn.Linear's matrix-vector product: "
        f"{mv_bandwidth / 1e9:.1f} GB/s), so a step takes at least {step_floor * 1e3:.0f} ms "
        f"({timers.seconds['decode'] / steps * 1e3:.0f} ms measured) and the question's "
        f"{steps} steps {step_floor * steps:.0f} s. lm_head on 8 rows takes "
        f"{eight * 1e3:.0f} ms as nn.Linear and {eight_first * 1e3:.0f} ms weight-first, "
        f"against {one * 1e3:.0f} ms on 1 row weight-first ({one_mv * 1e3:.0f} ms as "
        f"nn.Linear): 8 rows cost {eight_first / one:.1f}x 1 row as the loop runs them."
    )


if __name__ == "__main__":
    main()
