"""Test helpers: count what would wait for an accelerator, or launch on it, on the CPU."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

READS = ("cpu", "tolist", "item")
"""Tensor methods that read values back to the host (on an accelerator: a wait)."""


def count_host_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the name of each ``READS`` call from now on (until ``undo``)."""
    reads: list[str] = []
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counted(self: torch.Tensor, *args: Any, _f: Any = original, _n: str = name) -> Any:
            reads.append(_n)
            return _f(self, *args)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return reads


def count_tensors_from_lists(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the calling function of each ``torch.tensor`` call from now on.

    A tensor made from Python data on an accelerator is a blocking copy to it, which
    waits for the device like a read does.
    """
    made: list[str] = []
    make = torch.tensor

    def tensor(*args: Any, **options: Any) -> torch.Tensor:
        made.append(sys._getframe(1).f_code.co_name)
        return make(*args, **options)

    monkeypatch.setattr(torch, "tensor", tensor)
    return made


class DispatchedOperators(TorchDispatchMode):
    """Record the name of each operator dispatched in this thread while entered.

    On a GPU each one that is not a view launches a kernel, whose launch the host pays.
    ``sizes`` holds the elements of each operator's largest tensor output.
    """

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.sizes: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.seen.append(str(func.overloadpacket.__name__))
        out = func(*args, **(kwargs or {}))
        outputs = out if isinstance(out, tuple | list) else (out,)
        sizes = [t.numel() for t in outputs if isinstance(t, torch.Tensor)]
        self.sizes.append(max(sizes, default=0))
        return out
