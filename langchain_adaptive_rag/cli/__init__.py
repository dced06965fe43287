"""The ``adaptive-rag`` command line: entry point, commands, demo, index and console.

This module stays light: torch, transformers and the commands load inside [`main`][],
so Ctrl-C at any point of start-up ends in one line, not a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Every failure the user can fix ends in one line, ``error: ...`` with the fix, and a
    non-zero status (2 for bad input, 1 for a file the system refused to read or write);
    Ctrl-C ends in one line and status 130. Neither prints a traceback.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    try:
        from langchain_adaptive_rag.cli import commands  # torch and transformers load here

        return commands.run(argv)
    except KeyboardInterrupt:
        print("\nInterrupted (Ctrl-C).", file=sys.stderr)
        return 130
    except AdaptiveRAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
