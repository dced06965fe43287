"""Weight-first linear layers: the same products as ``nn.Linear``, routed only while entered."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from langchain_adaptive_rag.engine import weight_major
from langchain_adaptive_rag.engine.weight_major import (
    WeightMajorLinears,
    padded_rows,
    weight_major_linear,
)


@pytest.mark.parametrize("rows", [1, 2, 6, 7, 8, 12, 32, 33])
@pytest.mark.parametrize("bias", [True, False])
def test_a_weight_first_product_equals_the_layers_own(rows: int, bias: bool) -> None:
    torch.manual_seed(0)
    layer = nn.Linear(48, 80, bias=bias)
    x = torch.randn(rows, 1, 48)  # a decoding step: one token a row
    want = x @ layer.weight.T + (layer.bias if bias else 0)  # the definition, by hand
    got = weight_major_linear(layer, x)
    assert got.shape == (rows, 1, 80) and got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_rows_are_padded_to_two_and_to_multiples_of_eight_from_seven() -> None:
    assert [padded_rows(n) for n in (1, 2, 3, 6)] == [2, 2, 3, 6]
    assert [padded_rows(n) for n in (7, 8, 9, 16, 17, 31, 32)] == [8, 8, 16, 16, 24, 32, 32]


def test_padding_rows_never_reach_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product runs on the padded rows; only the fed rows come back."""
    widths: list[int] = []
    mm = torch.mm

    def seen(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        widths.append(b.shape[1])
        return mm(a, b)

    monkeypatch.setattr(torch, "mm", seen)
    layer = nn.Linear(16, 24, bias=False)
    x = torch.randn(12, 1, 16)
    got = weight_major_linear(layer, x)
    assert widths == [16] and got.shape == (12, 1, 24)
    torch.testing.assert_close(got, x @ layer.weight.T, rtol=1e-5, atol=1e-5)


def _model(*layers: nn.Module) -> nn.Module:
    return nn.Sequential(*layers)


def test_only_plain_float32_layers_of_a_large_model_are_routed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Quantized(nn.Linear):
        pass

    plain, half, sub, hooked = nn.Linear(4, 4), nn.Linear(4, 4), Quantized(4, 4), nn.Linear(4, 4)
    half.half()
    hooked.forward = lambda x: x  # type: ignore[method-assign]  # as accelerate's hooks do
    model = _model(plain, half, sub, hooked)
    assert WeightMajorLinears(model).layers == ()  # 64 bytes: below the size that gains
    monkeypatch.setattr(weight_major, "MIN_MODEL_BYTES", 64)
    assert WeightMajorLinears(model).layers == (plain,)


def test_layers_are_routed_while_entered_and_restored_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(weight_major, "MIN_MODEL_BYTES", 0)
    layer = nn.Linear(4, 3)
    linears = WeightMajorLinears.of(_model(layer))
    x = torch.randn(2, 4)
    before = layer(x)
    with linears.active():
        assert "forward" in vars(layer)
        with linears.active():  # a nested entry (another loop's pass)
            pass
        assert "forward" in vars(layer)  # still routed: the outer entry is running
        torch.testing.assert_close(layer(x), before)
    assert "forward" not in vars(layer)
    torch.testing.assert_close(layer(x), before)


def test_threads_share_one_routing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread leaving does not unroute a layer another thread is still running."""
    monkeypatch.setattr(weight_major, "MIN_MODEL_BYTES", 0)
    layer = nn.Linear(4, 3)
    model = _model(layer)
    entered, leave = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other() -> None:
        with WeightMajorLinears.of(model).active():
            entered.set()
            leave.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    assert entered.wait(5)
    with WeightMajorLinears.of(model).active():
        pass
    seen.append("forward" in vars(layer))
    leave.set()
    thread.join(5)
    assert seen == [True] and "forward" not in vars(layer)
