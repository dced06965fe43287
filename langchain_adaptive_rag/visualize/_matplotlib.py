"""matplotlib is optional: only the drawings need it (the ``plots`` extra)."""

from __future__ import annotations

import importlib

__all__ = ["PLOTS_INSTALL", "require_matplotlib"]

PLOTS_INSTALL = 'pip install "langchain-adaptive-rag[plots]"'
"""The command that installs what the drawings need."""


def require_matplotlib(caller: str) -> None:
    """Fail with an install hint unless matplotlib can be imported.

    Args:
        caller: What needs it, named in the error (e.g. ``"tokens_figure"``).

    Raises:
        ImportError: matplotlib is not installed.
    """
    try:
        importlib.import_module("matplotlib")
    except ImportError as error:
        msg = (
            f"{caller} draws with matplotlib, which is not installed (expected "
            f'matplotlib>=3.8, the "plots" extra). Fix: {PLOTS_INSTALL}'
        )
        raise ImportError(msg) from error
