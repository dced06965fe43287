"""Test helper: the prompts that the tests of latent-attention and state-space models decode."""

from __future__ import annotations

__all__ = ["PROMPTS"]

PROMPTS = [
    "Question: Anna Berg was born in 1931 in Oslo and she directed the film Blue Harbour "
    "in 1962. Who directed it?\nAnswer:",
    "Question: Who wrote it?\nAnswer:",
    "Question: Where was the harbour film made, and by whom?\nAnswer:",
]
"""A long prompt, a short one and one between."""
