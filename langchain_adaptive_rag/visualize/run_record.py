"""A recorded run with its notebook display."""

from __future__ import annotations

from dataclasses import dataclass

from langchain_adaptive_rag.visualize.html_view import default_signal, tokens_html
from langchain_adaptive_rag.visualize.record import RecordedRun

__all__ = ["RunRecord"]


@dataclass(frozen=True, repr=False)
class RunRecord(RecordedRun):
    """A whole run as plain data, shown in a notebook as its tokens coloured by signal.

    ``record_run`` makes one; ``to_json`` and ``RunRecord.from_json`` save and load it.
    Its ``repr`` is one line (method, question, answer, counts); the rounds and their
    tokens are in ``rounds``, drawn by ``_repr_html_`` in a notebook.
    """

    def __repr__(self) -> str:
        retrieved = sum(r.retrieval is not None for r in self.rounds)
        return (
            f"RunRecord(method={self.method!r}, question={self.question!r}, "
            f"answer={self.answer!r}, counts={self.counts!r}, "
            f"recorded_rounds={len(self.rounds)} "
            f"({retrieved} retrieved), events={len(self.events)})"
        )

    def _repr_html_(self) -> str:
        """Notebook display: the tokens coloured by the method's main signal."""
        return tokens_html(self, default_signal(self))
