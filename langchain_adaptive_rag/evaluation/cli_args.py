"""The arguments of the evaluation commands: light to import.

[`add_eval_commands`][] adds ``eval``, ``merge``, ``compare`` and ``calibrate`` to an
``argparse`` sub-command set; each sets ``handler``, which loads
``langchain_adaptive_rag.evaluation.cli`` (and the model stack) only when the command
runs, so ``--help`` and argument errors answer at once.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence

from langchain_adaptive_rag.catalogue import (
    DEFAULT_TOLERANCE,
    METHOD_NAMES,
    PACKAGE_PROMPTS,
    PROMPT_SETS,
    THRESHOLD_FIELDS,
    method_id,
)
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.datasets.example import (
    DATASET_NAMES,
    canonical_dataset_name,
)
from langchain_adaptive_rag.evaluation.shards import Shard, parse_shard

__all__ = ["add_eval_commands"]

Handler = Callable[[argparse.Namespace], int]
"""A command's function: parsed arguments in, exit status out."""


def _handler(name: str) -> Handler:
    """The function ``name`` of ``evaluation.cli``, imported when the command runs."""

    def run(args: argparse.Namespace) -> int:
        module = importlib.import_module("langchain_adaptive_rag.evaluation.cli")
        status: int = getattr(module, name)(args)
        return status

    run.__name__ = name
    return run


# --------------------------------------------------------------------------------------
# Argument types


def _dataset_name(text: str) -> str:
    try:
        return canonical_dataset_name(text)
    except AdaptiveRAGError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        msg = f"received {text!r}; expected an integer >= 0"
        raise argparse.ArgumentTypeError(msg)
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value < 1:
        msg = f"received {text!r}; expected an integer >= 1"
        raise argparse.ArgumentTypeError(msg)
    return value


def _float_list(text: str) -> list[float]:
    values: list[float] = []
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            values.append(float(part))
        except ValueError:
            msg = f"received {part.strip()!r} in {text!r}; expected comma-separated numbers"
            raise argparse.ArgumentTypeError(msg) from None
    if not values:
        msg = f"received {text!r}; expected comma-separated numbers such as 0.2,0.4,0.6"
        raise argparse.ArgumentTypeError(msg)
    return values


def _shard(text: str) -> Shard:
    try:
        return parse_shard(text)
    except AdaptiveRAGError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _method(text: str) -> str:
    """``--method``: a method's id or papers' name, read by ``catalogue.method_id``."""
    try:
        return method_id(text)
    except AdaptiveRAGError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _add_run_arguments(parser: argparse.ArgumentParser, methods: Sequence[str]) -> None:
    """The options ``eval`` and ``calibrate`` share."""
    parser.add_argument(
        "--method",
        required=True,
        type=_method,
        choices=list(methods),
        metavar="METHOD",
        help=f"the method: one of {', '.join(methods)}, or the papers' name in any case",
    )
    parser.add_argument(
        "--dataset",
        required=True,
        type=_dataset_name,
        metavar="NAME",
        help=f"dataset name, one of: {', '.join(DATASET_NAMES)}",
    )
    parser.add_argument("--data", required=True, metavar="FILE", help="dataset file")
    parser.add_argument(
        "--corpus",
        metavar="FILE",
        help=(
            "passages to retrieve from (DPR TSV or JSON lines); default: the passages the "
            "data file gives with its questions (HotpotQA/2Wiki paragraphs), pooled"
        ),
    )
    parser.add_argument(
        "--index",
        metavar="DIR",
        help="a saved BM25 index to retrieve from (built by: adaptive-rag index CORPUS --out DIR)",
    )
    parser.add_argument(
        "--aliases", metavar="FILE", help="2WikiMultihopQA id_aliases.json (more gold answers)"
    )
    parser.add_argument(
        "--model",
        required=True,
        metavar="ID_OR_PATH",
        help=(
            "hub id or local model directory (transformers' default kernel, no chat "
            "template), or a served model as provider:model (openai:NAME with --base-url "
            "for vLLM, SGLang, llama.cpp or Ollama's /v1; ollama:NAME)"
        ),
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="a served model's OpenAI-compatible root, e.g. http://localhost:8000/v1",
    )
    parser.add_argument(
        "--endpoint",
        choices=["chat", "completions"],
        default="chat",
        help=(
            "a served model's endpoint: chat (/v1/chat/completions) or completions "
            "(/v1/completions: a base model reads the prompt as written)"
        ),
    )
    parser.add_argument(
        "--top-logprobs",
        type=_non_negative,
        default=5,
        metavar="K",
        help="a served model's alternatives per token (entropies are top-K lower bounds)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="a served model's time limit per request in seconds (default: 120)",
    )
    parser.add_argument(
        "--request-retries",
        type=_non_negative,
        default=3,
        metavar="N",
        help=(
            "a served model's retries of a failed request, with backoff from 1 s doubling "
            "(default: 3); a question still failing is recorded, --retry-errors redoes it"
        ),
    )
    parser.add_argument("--device", help="torch device, e.g. cuda (default: CPU)")
    parser.add_argument(
        "--cudnn-attention",
        action="store_true",
        help=(
            "with --device cuda, let torch run cuDNN's attention (default: off for this "
            "process; it builds a plan for each new key length, which decoding meets at "
            "every step)"
        ),
    )
    parser.add_argument(
        "--dtype", choices=["auto", "float32", "float16", "bfloat16"], help="weights dtype"
    )
    parser.add_argument(
        "--prefix-cache-mib",
        type=_non_negative,
        default=512,
        metavar="MIB",
        help=(
            "memory for recent prompts' keys and values, so prompts that start alike "
            "(few-shot exemplars) prefill only the rest (default: 512; 0: off)"
        ),
    )
    parser.add_argument("--limit", type=_non_negative, metavar="N", help="first N questions")
    parser.add_argument(
        "--config",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="method config values, e.g. theta=1.2 query_top_n=35 attention_mode=inline",
    )
    parser.add_argument(
        "--prompts",
        choices=[*PROMPT_SETS, PACKAGE_PROMPTS],
        help=(
            "few-shot prompt set (default: the dataset's own when it has one; "
            f"'{PACKAGE_PROMPTS}': the package's two demonstrations)"
        ),
    )
    parser.add_argument(
        "--k", type=_positive, metavar="K", help="documents per retrieval (retrieve_topk)"
    )
    parser.add_argument(
        "--concurrency", type=_positive, default=1, metavar="N", help="questions at once"
    )
    parser.add_argument(
        "--max-batch-rows",
        type=_positive,
        metavar="N",
        help=(
            "most sequences decoded together (default: room for every concurrent "
            "question's call, at least 64: --concurrency times the method's sequences per "
            "call, k + 1 for SeaKR); lower it when the keys and values of that many "
            "sequences do not fit in memory"
        ),
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--out", required=True, metavar="DIR", help="run directory")


def add_eval_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``eval``, ``merge``, ``compare`` and ``calibrate`` to a sub-command set.

    Each parser sets ``handler`` (a function of the parsed namespace returning the exit
    status), so the main program dispatches with ``args.handler(args)``.

    Args:
        subparsers: What ``parser.add_subparsers(...)`` returned.
    """
    evaluate = subparsers.add_parser(
        "eval",
        help="run a method over a QA dataset (resumable) and summarise it",
        description=(
            "Answer every question with the method, appending one JSON line per question "
            "to OUT/results.jsonl; rerunning with the same --out resumes."
        ),
    )
    _add_run_arguments(evaluate, METHOD_NAMES)
    evaluate.add_argument(
        "--shard",
        type=_shard,
        metavar="I/N",
        help=(
            "answer the I-th of every N questions (after --limit) into OUT, one shard per "
            "machine; join the shards with adaptive-rag merge"
        ),
    )
    evaluate.add_argument(
        "--retry-errors", action="store_true", help="answer again questions that failed"
    )
    evaluate.add_argument(
        "--fail-fast", action="store_true", help="stop at the first question that fails"
    )
    evaluate.set_defaults(handler=_handler("run_eval_command"))

    merge = subparsers.add_parser(
        "merge",
        help="join the shards of one run (eval --shard I/N) into one run directory",
        description=(
            "Check that the directories are the N finished shards of one run (same "
            "settings, each question once) and write them as one run, then summarise it."
        ),
    )
    merge.add_argument("shards", nargs="+", metavar="SHARD_DIR", help="the shards' run dirs")
    merge.add_argument("--out", required=True, metavar="DIR", help="the merged run directory")
    merge.set_defaults(handler=_handler("run_merge_command"))

    compare = subparsers.add_parser(
        "compare", help="summarise run directories side by side", description="Compare runs."
    )
    compare.add_argument("dirs", nargs="+", metavar="DIR", help="run directories")
    compare.add_argument(
        "--format", choices=["markdown", "csv"], default="markdown", help="table format"
    )
    compare.add_argument(
        "--out", metavar="FILE", help="also write the table (CSV if the name ends in .csv)"
    )
    compare.add_argument(
        "--questions",
        action="store_true",
        help=(
            "with two run directories: check question by question that they gave the same "
            "results (texts, documents, decisions and counts equal; scores to --tolerance); "
            "exit status 1 when they differ"
        ),
    )
    compare.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        metavar="X",
        help=f"how far scores may differ with --questions (default {DEFAULT_TOLERANCE:g})",
    )
    compare.set_defaults(handler=_handler("run_compare_command"))

    calibrate = subparsers.add_parser(
        "calibrate",
        help="sweep a retrieval threshold (FLARE/DRAGIN theta, SeaKR delta) and pick one",
        description=(
            "Run the method once per threshold value (each in OUT/<field>=<value>, "
            "resumable) and choose the value with the highest F1 (ties: fewer retrievals "
            "per question), or the highest EM, optionally within a retrieval budget."
        ),
    )
    _add_run_arguments(calibrate, sorted(THRESHOLD_FIELDS))
    calibrate.add_argument(
        "--values",
        required=True,
        type=_float_list,
        metavar="V1,V2,...",
        help="threshold values to try (negative ones: --values=-8,-6,-4)",
    )
    calibrate.add_argument(
        "--rule", choices=["best_f1", "best_em"], default="best_f1", help="how to choose"
    )
    calibrate.add_argument(
        "--max-retrievals",
        type=float,
        metavar="R",
        help="only values with at most R retrievals per question compete",
    )
    calibrate.set_defaults(handler=_handler("run_calibrate_command"))
