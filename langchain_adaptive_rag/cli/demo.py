"""``adaptive-rag demo`` and ``adaptive-rag signals``: the toy world, and any model's signals."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from langchain_core.retrievers import BaseRetriever
from tqdm.auto import tqdm

from langchain_adaptive_rag.chat_models import ChatTransformers
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.paths import check_output_file
from langchain_adaptive_rag.evaluation.setup import batch_rows, load_chat_model
from langchain_adaptive_rag.graphs import Method, display_name, policy_class
from langchain_adaptive_rag.options import CaptureOptions, GenerationTrace
from langchain_adaptive_rag.signals import aggregate_words, merge_tokens_into_words

if TYPE_CHECKING:
    from langchain_adaptive_rag.toyworld.comparison import QuestionResult

__all__ = ["run_demo", "run_signals"]


def _load_demo_model(max_new_tokens: int) -> ChatTransformers:
    """Build the tiny random Llama in a private temporary folder, load it, remove the folder.

    The folder is new for each call (``tempfile.TemporaryDirectory``: mode 0o700, a
    random name), so no file another user placed in the shared temporary directory can be
    loaded in its place.
    """
    from langchain_adaptive_rag.testing import create_tiny_model

    with tempfile.TemporaryDirectory(prefix="adaptive-rag-signals-") as folder:
        path = create_tiny_model(
            Path(folder) / "tiny-llama", architecture="llama", hidden_size=64, num_layers=2, seed=0
        )
        return load_chat_model(
            str(path), attn_implementation="eager", max_new_tokens=max_new_tokens
        )


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


def default_methods() -> list[str]:
    """The toy model's methods that run here.

    The tool agent needs ``langchain`` (the ``agents`` extra).
    """
    from langchain_adaptive_rag.toyworld.comparison import TOY_METHODS

    if importlib.util.find_spec("langchain") is None:
        return [m for m in TOY_METHODS if m != "tool_agent"]
    return list(TOY_METHODS)


def run_demo(args: argparse.Namespace) -> int:
    """The toy world: every method on balanced toy questions, then one DRAGIN trace."""
    from langchain_adaptive_rag.toyworld import load_toy_model, toy_questions, toy_retriever
    from langchain_adaptive_rag.toyworld.comparison import (
        TOY_METHODS,
        demo_questions,
        format_comparison,
        format_trace,
        run_method,
        toy_config,
    )

    methods = list(args.methods) if args.methods else default_methods()  # ids, checked
    if not args.methods and len(methods) < len(TOY_METHODS):
        print(
            "The tool agent is left out: it runs LangChain's create_agent, from the package "
            "langchain (pip install 'langchain-adaptive-rag[agents]').\n"
        )
    untrained = [m for m in methods if m not in TOY_METHODS]
    if untrained:
        needs = "; ".join(f"{m}: {policy_class(m).trained_model}" for m in untrained)
        print(f"The toy model cannot run {untrained}: it needs {needs}.")
        return 2
    if args.html:  # fail before the runs, not after them
        from langchain_adaptive_rag.visualize._matplotlib import require_matplotlib

        try:
            require_matplotlib("adaptive-rag demo --html")
        except ImportError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        check_output_file(args.html, what="report file", option="--html")
    if args.model is not None and not (Path(args.model) / "config.json").is_file():
        msg = (
            f"Received --model {args.model!r}, which is not a model directory (no "
            "config.json); expected a toy model directory written by "
            "toyworld_training.train. Fix: point --model at it, or leave --model out for the "
            "shipped toy model."
        )
        raise AdaptiveRAGError(msg)
    try:
        model = load_toy_model(args.model, batch_concurrent_calls=args.concurrency > 1)
    except Exception as exc:  # transformers, safetensors and torch raise many kinds
        which = repr(args.model) if args.model else "shipped with the package"
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        msg = (
            f"Could not load the toy model {which} ({why}). Expected a model directory "
            "whose files load with transformers. Fix: train or copy it again."
        )
        raise AdaptiveRAGError(msg) from None
    # room for every concurrent question's call, SeaKR's k + 1 sequences included
    model.max_batch_rows = max(batch_rows(toy_config(m), args.concurrency) for m in methods)
    retriever = toy_retriever()
    questions = demo_questions(toy_questions(), per_category=args.per_category)
    print(
        f"Toy world: {len(questions)} questions ({args.per_category} known, "
        f"{args.per_category} known-then-unknown, {args.per_category} unknown), "
        f"{len(methods)} methods, model {model.model_name}\n"
    )
    results = {}
    wall: dict[str, float] = {}
    for method in methods:
        label = display_name(method)
        start = time.perf_counter()
        with tqdm(total=len(questions), desc=f"  {label:<8}", leave=False, unit="q") as bar:
            results[method] = run_method(
                model,
                retriever,
                method,
                questions,
                on_result=lambda _: bar.update(),
                concurrency=args.concurrency,
            )
        wall[method] = time.perf_counter() - start
        print(f"  {label:<8} done in {wall[method]:.1f} s")
    print("\n" + format_comparison(results, wall) + "\n")
    print(
        f"(s/q: each method's wall time over its questions, {args.concurrency} at a time; "
        "--concurrency 1 answers them one by one with the same results.)\n"
    )
    by_id = {q.id: q for q in questions}
    traced = _pick_trace(results["dragin"] if "dragin" in results else results[methods[0]])
    if "dragin" in results:
        print("DRAGIN trace (RIND decides when, QFS decides what):")
        print(format_trace(by_id[traced.question_id], traced))
    if args.html:
        _write_report(
            Path(args.html), model, retriever, by_id[traced.question_id].question, results
        )
    return 0


def _write_report(
    path: Path,
    model: ChatTransformers,
    retriever: BaseRetriever,
    question: str,
    results: Mapping[str, Sequence[QuestionResult]],
) -> None:
    """Record the traced question with the adaptive methods and write an HTML report."""
    from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
    from langchain_adaptive_rag.toyworld import TOY_PROMPTS
    from langchain_adaptive_rag.toyworld.comparison import format_comparison, toy_config
    from langchain_adaptive_rag.visualize import record_run, report_html

    wanted: tuple[Method, ...] = ("dragin", "flare", "seakr", "fix_sentence")
    shown = [m for m in wanted if m in results]
    graphs = {
        m: create_adaptive_rag_graph(model, retriever, m, config=toy_config(m), prompts=TOY_PROMPTS)
        for m in shown
    }
    records = [
        record_run(graph, question, attention_model=model if m == "dragin" else None)
        for m, graph in graphs.items()
    ]
    page = report_html(
        records,
        title="Adaptive RAG on the toy world",
        summary_table_markdown=format_comparison(results),
        graphs={m: graphs[m] for m in shown[:1]},
    )
    path.write_text(page, encoding="utf-8")
    print(f"\nReport written to {path} ({len(records)} recorded runs of {question!r}).")


def _pick_trace(results: Sequence[QuestionResult]) -> QuestionResult:
    """A known-then-unknown question DRAGIN retrieved for (preferably answered right)."""

    def rank(r: QuestionResult) -> tuple[bool, bool, bool]:
        return (r.category == "known_first_unknown_second", bool(r.events), r.em == 1.0)

    return max(results, key=rank)


def run_signals(args: argparse.Namespace) -> int:
    """Signals of one generation with any model, then a DRAGIN run over four passages."""
    if args.model is None:
        print("Building a tiny random Llama in a private temporary folder (eager attention) ...")
        chat = _load_demo_model(args.max_new_tokens)
    else:
        print(f"Loading {args.model} (eager attention) ...")
        chat = load_chat_model(
            args.model, attn_implementation="eager", max_new_tokens=args.max_new_tokens
        )
    print(f"Prompt: {args.prompt!r}")
    capture = CaptureOptions(attention=True, hidden=True, hidden_layer=chat.num_layers // 2)
    decoding = replace(chat.decoding, min_new_tokens=chat.decoding.max_new_tokens)
    trace = chat.generate_trace(args.prompt, decoding=decoding, capture=capture)[0]
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
            "\nThe model is a tiny randomly initialised Llama built locally: its words are "
            "noise, its signals are real. Pass --model PATH for a model of your own; "
            "`adaptive-rag demo` runs the trained toy model."
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
