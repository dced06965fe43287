"""The ``eval``, ``compare`` and ``calibrate`` commands of ``adaptive-rag``.

``add_eval_commands`` adds them to an ``argparse`` sub-command set; each sets
``handler`` on the parsed namespace, so the main program runs ``args.handler(args)``::

    parser = argparse.ArgumentParser(prog="adaptive-rag")
    commands = parser.add_subparsers(dest="command", required=True)
    add_eval_commands(commands)
    args = parser.parse_args(argv)
    return args.handler(args)

Usage (one command per entry)::

    adaptive-rag eval --method dragin --dataset hotpotqa --data hotpot_dev.json
        --model meta-llama/Llama-2-7b-hf --limit 500 --config theta=0.8 --out runs/dragin
    adaptive-rag compare runs/dragin runs/flare [--format csv] [--out table.md]
    adaptive-rag compare runs/flare-c1 runs/flare-c8 --questions [--tolerance 1e-4]
    adaptive-rag calibrate --method flare --values 0.2,0.4,0.6 --dataset hotpotqa
        --data dev.json --model PATH --limit 100 --out runs/flare-theta
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.agreement import DEFAULT_TOLERANCE, compare_results
from langchain_adaptive_rag.evaluation.calibration import (
    THRESHOLD_FIELDS,
    calibrate_threshold,
    calibration_rows,
    choose_threshold,
)
from langchain_adaptive_rag.evaluation.datasets import (
    DATASET_NAMES,
    Example,
    canonical_dataset_name,
)
from langchain_adaptive_rag.evaluation.paths import (
    check_input_file,
    check_output_dir,
    check_output_file,
)
from langchain_adaptive_rag.evaluation.results import (
    check_run_dir,
    read_run,
)
from langchain_adaptive_rag.evaluation.run_lock import run_dir_holder
from langchain_adaptive_rag.evaluation.runner import run_evaluation
from langchain_adaptive_rag.evaluation.setup import (
    PACKAGE_PROMPTS,
    EvalSetup,
    batch_rows,
    check_device,
    load_chat_model,
    prepare_evaluation,
)
from langchain_adaptive_rag.evaluation.summary import (
    compare_runs,
    format_table,
    summarize,
    write_table,
)
from langchain_adaptive_rag.exemplars import PromptDataset
from langchain_adaptive_rag.graphs import AVAILABLE_METHODS, create_adaptive_rag_graph
from langchain_adaptive_rag.policy import TraceModel
from langchain_adaptive_rag.served.loading import is_served_spelling, load_served_model

__all__ = [
    "add_eval_commands",
    "choose_attention_kernels",
    "run_calibrate_command",
    "run_compare_command",
    "run_eval_command",
]

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


def _add_run_arguments(parser: argparse.ArgumentParser, methods: Sequence[str]) -> None:
    """The options ``eval`` and ``calibrate`` share."""
    parser.add_argument("--method", required=True, choices=list(methods), help="the method")
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
        choices=[*get_args(PromptDataset), PACKAGE_PROMPTS],
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
    """Add ``eval``, ``compare`` and ``calibrate`` to a sub-command set.

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
    _add_run_arguments(evaluate, AVAILABLE_METHODS)
    evaluate.add_argument(
        "--retry-errors", action="store_true", help="answer again questions that failed"
    )
    evaluate.add_argument(
        "--fail-fast", action="store_true", help="stop at the first question that fails"
    )
    evaluate.set_defaults(handler=run_eval_command)

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
    compare.set_defaults(handler=run_compare_command)

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
    calibrate.set_defaults(handler=run_calibrate_command)


def choose_attention_kernels(device: str | None, *, cudnn: bool) -> None:
    """On CUDA, turn torch's cuDNN attention off for this process unless ``cudnn``.

    The command line owns its process, so it may change this torch setting; the library
    does not (see ``langchain_adaptive_rag.kernels`` for why and what it measured).

    Args:
        device: ``--device`` (``None``: the CPU).
        cudnn: ``--cudnn-attention``: leave torch's choice as it is.
    """
    if cudnn or device is None or not device.startswith("cuda"):
        return
    import torch

    torch.backends.cuda.enable_cudnn_sdp(False)


def _check_arguments(args: argparse.Namespace) -> None:
    """The checks that need no data and no model: device, --out, the input files.

    Raises:
        AdaptiveRAGError: One of them is unusable (the message names the option).
    """
    check_device(args.device)
    out = check_output_dir(args.out, option="--out")
    check_input_file(args.data, what="dataset file", option="--data")
    if args.corpus is not None:
        check_input_file(args.corpus, what="corpus file", option="--corpus")
    if args.aliases is not None:
        check_input_file(args.aliases, what="aliases file", option="--aliases")
    busy = run_dir_holder(out) if out.is_dir() else None
    if busy is not None:
        raise busy


def _load_model(args: argparse.Namespace, setup: EvalSetup) -> TraceModel:
    """The in-process model (a directory or hub id) or the served one (``provider:model``).

    A served model's graphs send ``--concurrency`` requests at once, which the server
    batches.
    """
    if is_served_spelling(args.model):
        return load_served_model(
            args.model,
            base_url=args.base_url,
            endpoint=args.endpoint,
            top_logprobs=args.top_logprobs,
            timeout_s=args.request_timeout,
            retries=args.request_retries,
        )
    if args.base_url is not None:
        msg = (
            f"Received --base-url with --model {args.model!r}, which is not a served model. "
            "Expected --model provider:model (e.g. openai:NAME) with --base-url. Fix: spell "
            "the model as openai:NAME, or drop --base-url for a local model."
        )
        raise AdaptiveRAGError(msg)
    choose_attention_kernels(args.device, cudnn=args.cudnn_attention)
    return load_chat_model(
        args.model,
        device=args.device,
        dtype=args.dtype,
        concurrency=args.concurrency,
        prefix_cache_mib=args.prefix_cache_mib,
        max_batch_rows=args.max_batch_rows or batch_rows(setup.config, args.concurrency),
    )


def _prepare(args: argparse.Namespace, *, threshold_field: str | None = None) -> EvalSetup:
    return prepare_evaluation(
        args.method,
        args.dataset,
        args.data,
        model=args.model,
        corpus=args.corpus,
        index=args.index,
        aliases=args.aliases,
        limit=args.limit,
        overrides=args.config,
        prompts=args.prompts,
        k=args.k,
        threshold_field=threshold_field,
    )


def _all_answered(out: str, examples: Sequence[Example], *, retry_errors: bool) -> bool:
    """Whether the run directory already holds a result for every question.

    ``False`` also when ``run.json`` is missing or torn, or results of other settings are
    there: the run then repairs the file, or refuses the directory with the reason.
    """
    try:
        _, records = read_run(out)
    except (AdaptiveRAGError, OSError):
        return False
    answered = {
        str(record["id"])
        for record in records
        if not (retry_errors and record.get("error") is not None)
    }
    return all(example.id in answered for example in examples)


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


# --------------------------------------------------------------------------------------
# Handlers


def _describe_setup(setup: EvalSetup) -> None:
    settings = setup.settings
    print(
        f"{setup.method} on {settings.dataset}: {len(setup.examples)} questions from "
        f"{settings.data_file}; {setup.retriever.index.size} passages ({settings.corpus}); "
        f"prompts {settings.prompts}; model {settings.model}"
    )
    config = ", ".join(f"{key}={value}" for key, value in settings.config.items())
    print(f"config: {config}")


def run_eval_command(args: argparse.Namespace) -> int:
    """``adaptive-rag eval``: run, resume, then print the summary table.

    Args:
        args: Parsed arguments.

    Arguments, the output directory and the input files are checked first, then the data
    and corpus are loaded and the run directory checked, and only then the model loaded.

    Returns:
        0 when every question was answered (failed questions are recorded and counted),
        130 when Ctrl-C stopped the run, 2 for bad input.
    """
    try:
        _check_arguments(args)
        setup = _prepare(args)
        done = check_run_dir(args.out, setup.settings)
        _describe_setup(setup)
        if done:
            print(f"resuming {args.out}: {done} results already there")
        if _all_answered(args.out, setup.examples, retry_errors=args.retry_errors):
            print("every question is already answered; the model is not loaded")
            report = None
        else:
            retriever = setup.retriever
            model = _load_model(args, setup)
            graph = create_adaptive_rag_graph(
                model, retriever, setup.method, config=setup.config, prompts=setup.prompts
            )
            report = run_evaluation(
                graph,
                setup.examples,
                args.out,
                settings=setup.settings,
                concurrency=args.concurrency,
                progress=not args.no_progress,
                retry_errors=args.retry_errors,
                fail_fast=args.fail_fast,
            )
        row = summarize(args.out)
    except AdaptiveRAGError as exc:
        return _error(str(exc))
    if report is None:
        print(format_table([row], "markdown"), end="")
        return 0
    for repair in report.repairs:
        print(f"note: {repair}", file=sys.stderr)
    print(
        f"\n{report.new} answered now, {report.skipped} earlier, {report.errors} failed; "
        f"results in {Path(args.out) / 'results.jsonl'}\n"
    )
    print(format_table([row], "markdown"), end="")
    if report.first_error is not None:
        print(f"\nfirst failure: {report.first_error}", file=sys.stderr)
    if report.interrupted:
        print(
            f"\nInterrupted: {report.remaining} questions left. Run the same command again "
            "to resume."
        )
        return 130
    return 0


def run_compare_command(args: argparse.Namespace) -> int:
    """``adaptive-rag compare``: print (and optionally write) the table of several runs.

    Args:
        args: Parsed arguments.

    With ``--questions``, compare two runs question by question instead.

    Returns:
        0, 1 when ``--questions`` found the runs to differ, or 2 when a directory is not
        a run directory.
    """
    if args.questions:
        return _compare_questions(args)
    try:
        if args.out is not None:
            check_output_file(args.out, what="table file", option="--out")
        rows = compare_runs(args.dirs)
        if args.out is not None:
            write_table(rows, args.out)
    except AdaptiveRAGError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"could not write the table {args.out!r}: {exc.strerror or exc}.")
    print(format_table(rows, args.format), end="")
    return 0


def _compare_questions(args: argparse.Namespace) -> int:
    """``adaptive-rag compare A B --questions``: the runs' agreement, and what differs."""
    if len(args.dirs) != 2:
        return _error(
            f"--questions compares two run directories; received {len(args.dirs)}. "
            "Fix: adaptive-rag compare RUN_A RUN_B --questions."
        )
    try:
        agreement = compare_results(args.dirs[0], args.dirs[1], tolerance=args.tolerance)
    except AdaptiveRAGError as exc:
        return _error(str(exc))
    print(agreement.describe())
    for difference in agreement.differences[:_SHOWN]:
        print(
            f"  {difference.question_id}: {difference.field}: {difference.first!r:.120} "
            f"!= {difference.second!r:.120}"
        )
    if len(agreement.differences) > _SHOWN:
        print(f"  ... and {len(agreement.differences) - _SHOWN} more")
    return 0 if agreement.agree else 1


_SHOWN = 20
"""Differences printed by ``compare --questions``."""


def run_calibrate_command(args: argparse.Namespace) -> int:
    """``adaptive-rag calibrate``: sweep the threshold, print the table and the choice.

    Args:
        args: Parsed arguments.

    Returns:
        0, 130 when Ctrl-C stopped the sweep, 2 for bad input.
    """
    field = THRESHOLD_FIELDS[args.method]
    try:
        _check_arguments(args)
        setup = _prepare(args, threshold_field=field)
        _describe_setup(setup)
        retriever = setup.retriever
        model = _load_model(args, setup)
        points = calibrate_threshold(
            setup.method,
            setup.examples,
            model,
            retriever,
            args.values,
            out_dir=args.out,
            config=setup.config,
            prompts=setup.prompts,
            settings=setup.settings,
            concurrency=args.concurrency,
            progress=not args.no_progress,
        )
        chosen = choose_threshold(points, rule=args.rule, max_retrievals=args.max_retrievals)
    except KeyboardInterrupt:
        print("\nInterrupted. Run the same command again to resume the sweep.", file=sys.stderr)
        return 130
    except AdaptiveRAGError as exc:
        return _error(str(exc))
    print()
    print(format_table(calibration_rows(points, field), "markdown"), end="")
    budget = "" if args.max_retrievals is None else f" within {args.max_retrievals:g} retrievals"
    rule = "highest F1, ties to fewer retrievals" if args.rule == "best_f1" else "highest EM"
    print(
        f"\nchosen {field}={chosen.threshold:g} ({rule}{budget}): EM {chosen.em:.3f}, "
        f"F1 {chosen.f1:.3f}, {chosen.retrievals_per_question:.2f} retrievals per question"
    )
    return 0
