"""Test helper: SeaKR's scripted steps, hidden states of known uncertainty, and its config."""

from __future__ import annotations

import numpy as np

from langchain_adaptive_rag.graphs.seakr import SeaKRConfig
from langchain_adaptive_rag.signals import gram_uncertainty
from langchain_adaptive_rag.testing import ScriptedResponse

__all__ = ["APART", "CONFIG", "RATIONALE", "SAME", "U_APART", "U_SAME", "step"]

SAME = ((1.0, 0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
"""Two samples' hidden states: consistent samples."""
APART = ((1.0, 0.0, 0.0, 0.0), (0.0, 1.0, 0.0, 0.0))
"""Two samples' hidden states: inconsistent samples."""
U_SAME = gram_uncertainty(np.array(SAME))
"""The uncertainty of [`SAME`] (below ``CONFIG.delta``)."""
U_APART = gram_uncertainty(np.array(APART))
"""The uncertainty of [`APART`] (above ``CONFIG.delta``)."""
CONFIG = SeaKRConfig(num_samples=2, delta=-2.0, hidden_layer=1)
"""Two samples a step, a threshold between [`U_SAME`] and [`U_APART`], hidden layer 1."""
RATIONALE = " The film was directed by Anna Berg. So the answer is 1931."
"""The answered step that finalize reads as the rationale."""


def step(greedy: str, hidden: tuple[tuple[float, ...], ...]) -> list[ScriptedResponse]:
    """A greedy step and two samples whose hidden states are ``hidden``."""
    return [
        ScriptedResponse(greedy),
        ScriptedResponse(" sample one.", hidden=hidden[0]),
        ScriptedResponse(" sample two.", hidden=hidden[1]),
    ]
