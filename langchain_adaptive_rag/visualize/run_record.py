"""A recorded run with its notebook display."""

from __future__ import annotations

from dataclasses import dataclass

from langchain_adaptive_rag.visualize.html_view import default_signal, tokens_html
from langchain_adaptive_rag.visualize.record import RecordedRun

__all__ = ["RunRecord"]


@dataclass(frozen=True)
class RunRecord(RecordedRun):
    """A whole run as plain data, shown in a notebook as its tokens coloured by signal.

    ``record_run`` makes one; ``to_json`` and ``RunRecord.from_json`` save and load it.
    """

    def _repr_html_(self) -> str:
        """Notebook display: the tokens coloured by the method's main signal."""
        return tokens_html(self, default_signal(self))
