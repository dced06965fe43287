"""The ``adaptive-rag`` command line."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from langchain_adaptive_rag.chat_models import ChatTransformers
from langchain_adaptive_rag.generation import GenerationTrace
from langchain_adaptive_rag.signals import aggregate_words, merge_tokens_into_words

__all__ = ["main"]

DEMO_PROMPT = "Question: When was the director of film Blue Harbour born?\nAnswer:"


def _demo_model_dir() -> Path:
    from langchain_adaptive_rag.testing import create_tiny_model

    path = Path(tempfile.gettempdir()) / "langchain-adaptive-rag-demo" / "tiny-llama"
    if not (path / "config.json").exists():
        create_tiny_model(path, architecture="llama", hidden_size=64, num_layers=2, seed=0)
    return path


def _signal_table(trace: GenerationTrace) -> str:
    """One line per word: entropy (mean over its tokens) and attention it received."""
    words = merge_tokens_into_words(trace.tokens)
    entropy = aggregate_words(trace.entropies, words, "mean")
    logprob = aggregate_words(trace.logprobs, words, "sum")
    received = np.zeros(trace.num_tokens)
    if trace.attention is not None:
        start = trace.num_prompt_tokens
        generated = trace.attention[:, start : start + trace.num_tokens]
        received = np.tril(generated, k=-1).max(axis=0)  # max over later tokens
    attention = aggregate_words(received, words, "sum")
    lines = [f"{'word':<20} {'tokens':>6} {'logprob':>8} {'entropy':>8} {'attn':>6}"]
    for word, h, lp, a in zip(words, entropy, logprob, attention, strict=True):
        shown = repr(word.text)[1:-1][:20] or "·"
        lines.append(f"{shown:<20} {word.end - word.start:>6} {lp:>8.3f} {h:>8.3f} {a:>6.3f}")
    return "\n".join(lines)


def _demo(args: argparse.Namespace) -> int:
    model_path = args.model or str(_demo_model_dir())
    print(f"Loading {model_path} (eager attention) ...")
    chat = ChatTransformers(
        model=model_path,
        attn_implementation="eager",
        max_new_tokens=args.max_new_tokens,
        use_chat_template=False,
    )
    print(f"Prompt: {args.prompt!r}")
    trace = chat.generate_trace(
        args.prompt,
        min_new_tokens=args.max_new_tokens,
        attention=True,
        hidden=True,
        hidden_layer=chat.num_layers // 2,
    )[0]
    print(f"Generated {trace.num_tokens} tokens ({trace.finish_reason}): {trace.text!r}\n")
    print(_signal_table(trace))
    if trace.hidden is not None:
        print(
            f"\nHidden state at layer {chat.num_layers // 2}: {trace.hidden.shape[0]} features,"
            f" norm {float(np.linalg.norm(trace.hidden)):.3f}"
        )
    _graph_demo(chat, args.max_new_tokens)
    if args.model is None:
        print(
            "\nThe demo model is a tiny randomly initialised Llama built locally: its words "
            "are noise, its signals are real. Pass --model PATH for a model of your own."
        )
    return 0


DEMO_PASSAGES = (
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Anna Berg (born 1931) is a Swedish film director.",
    "Carl Lind was born in Oslo in 1902.",
    "Maria Holm was born in 1899 in Bergen.",
)


def _graph_demo(chat: ChatTransformers, budget: int) -> None:
    """Run the DRAGIN graph over a four-passage BM25 index and show its retrievals."""
    from langchain_adaptive_rag.graphs import create_dragin_graph
    from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
    from langchain_adaptive_rag.retrievers import create_bm25_retriever

    graph = create_dragin_graph(
        chat,
        create_bm25_retriever(list(DEMO_PASSAGES)),
        config=DRAGINConfig(generate_max_length=budget, query_top_n=6),
    )
    question = "When was the director of film Blue Harbour born?"
    result = graph.invoke({"question": question})
    counts = result["counts"]
    print(f"\nDRAGIN graph, question {question!r}:")
    print(
        f"  {counts['retrievals']} retrievals, {counts['llm_calls']} LLM calls, "
        f"{counts['generated_tokens']} generated tokens; answer {result['answer']!r}"
    )
    for event in result["retrievals"]:
        print(
            f"  step {event['step']}: trigger {event['trigger_word']!r} "
            f"s={event['score']:.2f} > theta={event['threshold']}; query {event['query']!r} "
            f"-> {event['doc_ids']}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(prog="adaptive-rag", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="generate with ChatTransformers and show its signals")
    demo.add_argument("--model", help="hub id or local model directory (default: a tiny model)")
    demo.add_argument("--prompt", default=DEMO_PROMPT, help="completion prompt")
    demo.add_argument("--max-new-tokens", type=int, default=16, help="tokens to generate")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
