"""transformers' weight-loading progress bars, hidden for the length of one load."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["weight_loading_bars"]

_lock = threading.Lock()
_hidden_loads = 0
_bars_were_enabled = False


@contextmanager
def weight_loading_bars(shown: bool) -> Iterator[None]:
    """Show or hide transformers' "Loading weights" bars while the block runs.

    transformers has no per-call switch for its loading bars, only a process-wide one.
    With ``shown=False`` this turns that switch off on entry and, when the last of any
    overlapping hidden loads ends, back to what it was before the first began; the
    caller's own setting is never changed for longer than the load. ``shown=True``
    leaves everything as it is.

    Args:
        shown: Whether the bars may print.

    Yields:
        Nothing; the load runs inside the block.
    """
    if shown:
        yield
        return
    from transformers.utils import logging as transformers_logging

    global _hidden_loads, _bars_were_enabled
    with _lock:
        if _hidden_loads == 0:
            _bars_were_enabled = transformers_logging.is_progress_bar_enabled()
            transformers_logging.disable_progress_bar()
        _hidden_loads += 1
    try:
        yield
    finally:
        with _lock:
            _hidden_loads -= 1
            if _hidden_loads == 0 and _bars_were_enabled:
                transformers_logging.enable_progress_bar()
