"""Test helper: traces that must agree, token for token and signal for signal."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from langchain_adaptive_rag import GenerationTrace

SIGNALS = ("attention", "attention_head_max", "hidden")


def assert_same_traces(
    got: Sequence[GenerationTrace],
    want: Sequence[GenerationTrace],
    atol: float = 1e-5,
    *,
    captured: Sequence[str] = (),
) -> None:
    """Each pair has the same tokens, and the same captured signals to ``atol``.

    A signal one side captured the other must have captured too; those named in
    ``captured`` both must have.
    """
    assert len(got) == len(want)
    for ours, theirs in zip(got, want, strict=True):
        assert ours.token_ids.tolist() == theirs.token_ids.tolist()
        for name in captured:
            assert getattr(ours, name) is not None and getattr(theirs, name) is not None, name
        for name in SIGNALS:
            mine, reference = getattr(ours, name), getattr(theirs, name)
            assert (mine is None) == (reference is None), name
            if mine is not None:
                np.testing.assert_allclose(mine, reference, atol=atol, err_msg=name)
