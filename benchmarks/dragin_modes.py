"""DRAGIN wall time per question: inline attention against the reference forward pass.

The same ChatTransformers model (a randomly initialised Llama, eager attention), the same
BM25 retriever and questions; each question runs once per mode per round, interleaved,
and the report is the ratio of medians measured in this run.

Run: ``python benchmarks/dragin_modes.py [--rounds 3] [--layers 6] [--width 512]``.
Target: inline <= 0.8x reference.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from langchain_adaptive_rag import (
    ChatTransformers,
    DRAGINConfig,
    create_bm25_retriever,
    create_dragin_graph,
)
from langchain_adaptive_rag.testing import train_tokenizer

QUESTIONS = [
    "When was the director of film Blue Harbour born?",
    "Who was born first, Carl Lind or Maria Holm?",
    "Which city is the capital of France?",
    "What river flows through Paris?",
]
PASSAGES = [
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Anna Berg (born 1931) is a Swedish film director.",
    "Carl Lind was born in Oslo in 1902.",
    "Maria Holm was born in 1899 in Bergen.",
    "The capital of France is Paris. The river Seine flows through the city.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=512)
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as directory:
        tokenizer = train_tokenizer()
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=args.width,
            intermediate_size=args.width * 3,
            num_hidden_layers=args.layers,
            num_attention_heads=8,
            max_position_embeddings=2048,
        )
        LlamaForCausalLM(config).save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        chat = ChatTransformers(
            model=AutoModelForCausalLM.from_pretrained(
                Path(directory), attn_implementation="eager"
            ),
            tokenizer=AutoTokenizer.from_pretrained(Path(directory)),
            min_new_tokens=8,
        )
        retriever = create_bm25_retriever(PASSAGES)
        graphs = {
            mode: create_dragin_graph(
                chat,
                retriever,
                config=DRAGINConfig(generate_max_length=64, theta=1.0, attention_mode=mode),
            )
            for mode in ("reference", "inline")
        }
        times: dict[str, list[float]] = {mode: [] for mode in graphs}
        retrievals: dict[str, int] = dict.fromkeys(graphs, 0)
        for graph in graphs.values():  # warm-up
            graph.invoke({"question": QUESTIONS[0]})
        for _ in range(args.rounds):
            for question in QUESTIONS:
                for mode, graph in graphs.items():
                    start = time.perf_counter()
                    result = graph.invoke({"question": question})
                    times[mode].append(time.perf_counter() - start)
                    retrievals[mode] += result["counts"]["retrievals"]
        parameters = sum(p.numel() for p in chat.hf_model.parameters()) / 1e6
        print(
            f"Llama {parameters:.1f}M, {len(QUESTIONS)} questions x {args.rounds} rounds, "
            f"budget 64 tokens, theta 1.0, {torch.get_num_threads()} threads\n"
        )
        print("| mode | median s / question | retrievals |")
        print("|---|---:|---:|")
        for mode in graphs:
            print(f"| {mode} | {statistics.median(times[mode]):.3f} | {retrievals[mode]} |")
        ratio = statistics.median(times["inline"]) / statistics.median(times["reference"])
        print(f"\ninline / reference: {ratio:.2f}")


if __name__ == "__main__":
    main()
