"""Loading a causal LM and its tokenizer by hub id or path, progress bars hidden."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["load_pretrained", "weight_loading_bars"]

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


def load_pretrained(
    name: str,
    *,
    dtype: str | None,
    attn_implementation: str | None,
    revision: str | None,
    local_files_only: bool,
    token: str | None,
    device: str | None,
    show_progress: bool,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM (and its tokenizer unless given) with ``from_pretrained``.

    Args:
        name: Hub id (``"org/name"``) or local directory.
        dtype: Weight dtype (``None``: float32).
        attn_implementation: Attention kernel (``None``: transformers' default).
        revision: Hub revision.
        local_files_only: Never reach the hub.
        token: Hub access token (``None``: the one transformers finds itself).
        device: Device to move the model to (``None``: where it loaded).
        show_progress: Let transformers print its "Loading weights" bars.
        tokenizer: A tokenizer to use instead of loading one.

    Returns:
        The model (in eval mode) and its tokenizer.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with weight_loading_bars(show_progress):
        model = AutoModelForCausalLM.from_pretrained(
            name,
            dtype=dtype or "float32",
            attn_implementation=attn_implementation,
            revision=revision,
            local_files_only=local_files_only,
            token=token,
        )
    if device is not None:
        model.to(device)
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(
            name, revision=revision, local_files_only=local_files_only, token=token
        )
    return model, tokenizer
