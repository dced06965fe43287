"""Prompt prefix reuse: methods on DRAGIN-format few-shot prompts, prefix cache on vs off.

Every prompt of the papers' setups opens with the same few-shot exemplars (2WikiMultihopQA:
6 chain-of-thought demonstrations, about 1,000 tokens here), and a method that continues
an answer after a retrieval re-sends the previous prompt. Each method answers the same
toy questions through the evaluation runner with ``dataset_prompts("2wikimultihopqa")``
and a randomly initialised Llama (the shapes of a small real model; its answers are
noise, the workload is real: prompt lengths, calls, retrievals), four ways: concurrency 1
and 8, each with the prefix cache off (``prefix_cache_mib=0``) and on (the default).
Printed per method and concurrency: questions per second off and on, the ratio, the
share of prompt tokens taken from the cache, and whether the answers and retrievals are
the same both ways.

With ``--toy``: the shipped toy model with the toy prompts instead (no exemplars; its
prompts share a prefix only when a retrieval returns the same documents again).

Run: ``python benchmarks/prefix_cache.py [--questions 12] [--methods fix_length,dragin]
[--size 8m|20m] [--toy]`` (``--device cuda`` on a GPU).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from random_llama import SIZES, save_random_llama
from transformers import AutoTokenizer, LlamaForCausalLM

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.evaluation import evaluate_method
from langchain_adaptive_rag.evaluation.results import read_results
from langchain_adaptive_rag.evaluation.setup import batch_rows
from langchain_adaptive_rag.exemplars import dataset_prompts
from langchain_adaptive_rag.graphs import display_name
from langchain_adaptive_rag.toyworld import (
    TOY_MODEL_PATH,
    TOY_PROMPTS,
    toy_corpus,
    toy_questions,
    toy_retriever,
)
from langchain_adaptive_rag.toyworld.benchmark import split_dev_test, toy_examples
from langchain_adaptive_rag.toyworld.comparison import TOY_CONFIGS


def build(directory: Path, size: str, device: str | None) -> tuple[LlamaForCausalLM, object]:
    """A random Llama of ``size`` on sdpa, and its tokenizer."""
    save_random_llama(directory, size)
    model = LlamaForCausalLM.from_pretrained(
        directory, attn_implementation="sdpa", dtype=torch.float32
    ).eval()
    if device:
        model.to(device)
    return model, AutoTokenizer.from_pretrained(directory)


def comparable(out: Path) -> dict[str, tuple[object, ...]]:
    """Each question's answer and retrievals (query, documents), by question id."""
    kept = {}
    for record in read_results(out):
        events = record.get("retrievals") or []
        queries = [(e.get("query"), e.get("doc_ids")) for e in events if isinstance(e, dict)]
        kept[str(record["id"])] = (record.get("prediction"), queries)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--methods", default="fix_length,fix_sentence,dragin,seakr")
    parser.add_argument("--size", choices=sorted(SIZES), default="8m")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--device", default=None)
    parser.add_argument("--toy", action="store_true", help="the shipped toy model and prompts")
    args = parser.parse_args()
    torch.set_num_threads(2)
    prompts = TOY_PROMPTS if args.toy else dataset_prompts("2wikimultihopqa")
    retriever = toy_retriever(k=3)
    dev, test = split_dev_test(toy_examples(toy_questions(), toy_corpus()))
    test = test[: args.questions]
    with tempfile.TemporaryDirectory() as tmp:
        if args.toy:
            model = LlamaForCausalLM.from_pretrained(
                TOY_MODEL_PATH, attn_implementation="eager", dtype=torch.float32
            )
            tokenizer = AutoTokenizer.from_pretrained(TOY_MODEL_PATH)
            if args.device:
                model.to(args.device)
            setup = "the shipped toy model, toy prompts"
        else:
            model, tokenizer = build(Path(tmp) / "model", args.size, args.device)
            setup = f"random {args.size} Llama, 2WikiMultihopQA few-shot prompts"
        print(f"{setup} on {model.device}, {len(test)} toy questions, BM25 top 3\n")
        print(
            "| method | concurrency | q/s cache off | q/s cache on | on / off | "
            "prompt tokens from cache | same answers |"
        )
        print("|---|---:|---:|---:|---:|---:|---|")
        for method in args.methods.split(","):
            for concurrency in (1, args.concurrency):
                rates, records, share = [], [], 0.0
                for budget in (0, 512):  # each after a 2-question warm-up of its own
                    chat = ChatTransformers(
                        model=model,
                        tokenizer=tokenizer,
                        use_chat_template=False,
                        batch_concurrent_calls=True,
                        prefix_cache_mib=budget,
                        max_batch_rows=batch_rows(TOY_CONFIGS[method], concurrency),
                    )
                    out = Path(tmp) / f"{method}-{concurrency}-{budget}"
                    evaluate_method(
                        chat,
                        retriever,
                        method,  # type: ignore[arg-type]
                        dev[:2],
                        Path(tmp) / f"warmup-{out.name}",
                        config=TOY_CONFIGS[method],
                        prompts=prompts,
                        progress=False,
                    )
                    start = time.perf_counter()
                    evaluate_method(
                        chat,
                        retriever,
                        method,  # type: ignore[arg-type]
                        test,
                        out,
                        config=TOY_CONFIGS[method],
                        prompts=prompts,
                        concurrency=concurrency,
                        progress=False,
                    )
                    rates.append(len(test) / (time.perf_counter() - start))
                    records.append(comparable(out))
                    if chat.prefix_cache is not None:
                        share = chat.prefix_cache.stats.reused_share
                    if chat.scheduler is not None:
                        chat.scheduler.close()
                print(
                    f"| {display_name(method)} | {concurrency} | {rates[0]:.2f} | "
                    f"{rates[1]:.2f} | {rates[1] / rates[0]:.2f}x | {share:.0%} | "
                    f"{'yes' if records[0] == records[1] else 'NO'} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
