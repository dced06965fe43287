"""Test helper: every integer field of one method's config at a huge value, on the toy world.

Run as ``python -m tests.helpers.config_fuzz METHOD[,METHOD...] [VALUE]`` (a separate
process, so that a run that allocates without bound dies alone). The process caps its own address
space (``MEMORY_CAP_BYTES``) and gives each run ``SECONDS`` of wall time; for each
integer field it sets the field to ``VALUE`` (default ``10**9``), first in the config the
graph is built with, then as a per-call ``context`` override of a graph built with the
toy defaults, and prints one JSON line per attempt: the field, where it was set, the
outcome (``"error"``: an ``AdaptiveRAGError`` or ``PromptTooLongError`` with its message;
``"ran"``: the run finished; ``"timeout"``, ``"memory"`` or ``"crash"`` otherwise) and the
seconds it took.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import signal
import sys
import time
import typing
from typing import Any

MEMORY_CAP_BYTES = 6 * 1024**3
"""Address space the process may hold (the toy model and torch need about 2 GB)."""
SECONDS = 60
"""Wall time each run may take."""


class _TimeoutError(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _TimeoutError


def integer_fields(config_type: type) -> list[str]:
    """The config's fields annotated ``int`` (or ``int | None``), not ``bool``."""
    hints = typing.get_type_hints(config_type)
    return [
        f.name
        for f in dataclasses.fields(config_type)
        if "int" in str(hints[f.name]) and "bool" not in str(hints[f.name])
    ]


def _attempt(run: Any) -> dict[str, Any]:
    from langchain_adaptive_rag.errors import AdaptiveRAGError

    start = time.time()
    signal.alarm(SECONDS)
    try:
        run()
        outcome, message = "ran", ""
    except AdaptiveRAGError as error:  # PromptTooLongError is one
        outcome, message = "error", str(error)
    except _TimeoutError:
        outcome, message = "timeout", ""
    except MemoryError as error:
        outcome, message = "memory", repr(error)
    except RuntimeError as error:
        memory = "alloc" in str(error).lower() or "memory" in str(error).lower()
        outcome, message = ("memory" if memory else "crash"), repr(error)[:300]
    except Exception as error:  # every other failure is a finding
        outcome, message = "crash", repr(error)[:300]
    finally:
        signal.alarm(0)
    return {"outcome": outcome, "message": message, "seconds": round(time.time() - start, 2)}


def main() -> None:
    methods = sys.argv[1].split(",")
    value = int(sys.argv[2]) if len(sys.argv) > 2 else 10**9
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))
    signal.signal(signal.SIGALRM, _alarm)
    from langchain_adaptive_rag.toyworld import load_toy_model, toy_questions, toy_retriever

    model = load_toy_model()
    retriever = toy_retriever()
    question = toy_questions()[0].question
    for method in methods:
        _fuzz(method, value, model, retriever, question)


def _fuzz(method: str, value: int, model: Any, retriever: Any, question: str) -> None:
    from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
    from langchain_adaptive_rag.toyworld import TOY_PROMPTS
    from langchain_adaptive_rag.toyworld.comparison import toy_config

    base = toy_config(method)
    for name in integer_fields(type(base)):

        def built(field: str = name) -> None:
            config = dataclasses.replace(base, **{field: value})
            graph = create_adaptive_rag_graph(
                model, retriever, method, config=config, prompts=TOY_PROMPTS
            )
            graph.invoke({"question": question})

        def per_call(field: str = name) -> None:
            graph = create_adaptive_rag_graph(
                model, retriever, method, config=base, prompts=TOY_PROMPTS
            )
            graph.invoke({"question": question}, context={field: value})

        for where, run in (("config", built), ("context", per_call)):
            result = {"method": method, "field": name, "where": where, **_attempt(run)}
            sys.stdout.write(json.dumps(result) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
