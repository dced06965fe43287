"""The ``eval``, ``merge``, ``compare`` and ``calibrate`` commands of ``adaptive-rag``.

``evaluation.cli_args.add_eval_commands`` adds them to an ``argparse`` sub-command
set (importing this module only when a command runs); each sets ``handler`` on the
parsed namespace, so the main program runs ``args.handler(args)``::

    parser = argparse.ArgumentParser(prog="adaptive-rag")
    commands = parser.add_subparsers(dest="command", required=True)
    add_eval_commands(commands)
    args = parser.parse_args(argv)
    return args.handler(args)

Usage (one command per entry)::

    adaptive-rag eval --method dragin --dataset hotpotqa --data hotpot_dev.json
        --model meta-llama/Llama-2-7b-hf --limit 500 --config theta=0.8 --out runs/dragin
    adaptive-rag eval ... --shard 2/4 --out runs/dragin-2   (one shard per machine)
    adaptive-rag merge runs/dragin-1 runs/dragin-2 runs/dragin-3 runs/dragin-4
        --out runs/dragin
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

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.agreement import compare_results
from langchain_adaptive_rag.evaluation.calibration import (
    THRESHOLD_FIELDS,
    calibrate_threshold,
    calibration_rows,
    choose_threshold,
)
from langchain_adaptive_rag.evaluation.datasets import Example
from langchain_adaptive_rag.evaluation.merge import merge_shards
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
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.options import TraceModel
from langchain_adaptive_rag.served.loading import is_served_spelling, load_served_model

__all__ = [
    "choose_attention_kernels",
    "run_calibrate_command",
    "run_compare_command",
    "run_eval_command",
]


def choose_attention_kernels(device: str | None, *, cudnn: bool) -> None:
    """On CUDA, turn torch's cuDNN attention off for this process unless ``cudnn``.

    The command line owns its process, so it may change this torch setting; the library
    does not (see ``langchain_adaptive_rag.engine.kernels`` for why and what it measured).

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
        shard=getattr(args, "shard", None),  # eval's option; calibrate has none
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


def run_merge_command(args: argparse.Namespace) -> int:
    """``adaptive-rag merge``: join the shards of one run, then print its summary.

    Args:
        args: Parsed arguments.

    Returns:
        0, or 2 when the directories are not the finished shards of one run.
    """
    try:
        out = merge_shards(args.shards, args.out)
        row = summarize(out)
    except AdaptiveRAGError as exc:
        return _error(str(exc))
    print(f"merged {len(args.shards)} shards into {out}\n")
    print(format_table([row], "markdown"), end="")
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
