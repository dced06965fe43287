"""The ``adaptive-rag`` command line: demo, signals, evaluation, index and model commands.

Building the parser loads nothing heavy, so ``--help`` and argument errors answer at
once; a command loads what it needs (the model stack for ``demo``, ``signals``,
``eval`` and ``calibrate``) when it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from langchain_adaptive_rag import __version__
from langchain_adaptive_rag.catalogue import METHOD_NAMES, method_id
from langchain_adaptive_rag.cli.index import add_index_command
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.cli_args import add_eval_commands
from langchain_adaptive_rag.pretrained.cli import add_model_command

__all__ = ["method_list", "run"]

DEMO_PROMPT = "Question: When was the director of film Blue Harbour born?\nAnswer:"
"""The completion prompt ``adaptive-rag signals`` generates from by default."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adaptive-rag", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="every method on the toy world: comparison table and a DRAGIN trace"
    )
    demo.add_argument(
        "--methods",
        type=method_list,
        help=f"comma-separated subset of {','.join(METHOD_NAMES)}, ids or the papers' "
        "names in any case (default: all)",
    )
    demo.add_argument(
        "--per-category", type=_positive, default=4, help="questions per category (default 4)"
    )
    demo.add_argument(
        "--concurrency",
        type=_positive,
        default=8,
        metavar="N",
        help="questions answered at once, their model calls decoded as one batch (default 8)",
    )
    demo.add_argument(
        "--model",
        help="a toy model directory from toyworld_training.train (default: the shipped one)",
    )
    demo.add_argument(
        "--html", metavar="FILE", help="also write an HTML report of the decisions to FILE"
    )
    signals = commands.add_parser(
        "signals", help="generate with any model and show its per-word signals"
    )
    signals.add_argument(
        "--model", help="hub id or local model directory (default: a tiny random Llama)"
    )
    signals.add_argument("--prompt", default=DEMO_PROMPT, help="completion prompt")
    signals.add_argument("--max-new-tokens", type=_positive, default=16, help="tokens to generate")
    add_eval_commands(commands)
    add_index_command(commands)
    add_model_command(commands)
    return parser


def method_list(text: str) -> list[str]:
    """``--methods``: comma-separated method names, each read by ``catalogue.method_id``.

    Raises:
        argparse.ArgumentTypeError: A name no method has (the message offers the nearest).
    """
    try:
        return [method_id(name) for name in text.split(",") if name.strip()]
    except AdaptiveRAGError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"received {text!r}; expected an integer >= 1"
        raise argparse.ArgumentTypeError(msg)
    return value


_LOADS_MODELS = frozenset({"demo", "signals", "eval", "calibrate", "model"})
"""Commands that load transformers: their library notices are turned off first."""


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command in _LOADS_MODELS:
        from langchain_adaptive_rag.cli.console import quiet_model_libraries

        quiet_model_libraries()
    if args.command == "demo":
        from langchain_adaptive_rag.cli.demo import run_demo

        return run_demo(args)
    if args.command == "signals":
        from langchain_adaptive_rag.cli.demo import run_signals

        return run_signals(args)
    handler = getattr(args, "handler", None)
    if handler is not None:
        status: int = handler(args)
        return status
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover
    return 2  # pragma: no cover


def run(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments and run the command ([`cli.main`][] handles its failures).

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    return _run(parser, args)
