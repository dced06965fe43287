"""What one decoding step's KV append costs the host: ``RoomyLayer`` against ``DynamicLayer``.

Every decoding step appends one token's keys and values to every layer. transformers'
``DynamicLayer`` concatenates (two ``torch.cat``, copying the whole layer); the decoding
loop's ``RoomyLayer`` writes into spare room (two
copies of the new column) and hands out views. On a GPU a 7B model's step is bound by
the host launching about 1,500 kernels (see docs/benchmarks.md, "On a GPU"), so what
matters there is the host's time per append, not the bytes copied: this measures it on
the CPU with one head of 16 (the copies are negligible) over ``--steps`` appends after a
``--prompt``-token prefill, interleaved over ``--rounds`` rounds, and counts the aten
operators each append dispatches (each one a kernel launch on a GPU, views excepted).

Run: ``python benchmarks/cache_append.py [--prompt 512] [--steps 64] [--rounds 30]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers.cache_utils import DynamicLayer

from langchain_adaptive_rag.engine.kv_cache import RoomyLayer

LAYERS: dict[str, type[Any]] = {"DynamicLayer": DynamicLayer, "RoomyLayer": RoomyLayer}


class CountingOperators(TorchDispatchMode):
    """Counts the aten operators dispatched in this thread while entered, by name.

    ``written`` sums the bytes of every output that is not a view of an input: the
    memory the operators wrote (and allocated, on a device). ``not_views`` counts the
    operators that are not views (on a GPU, each launches a kernel, or allocates).
    """

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.not_views = 0
        self.written = 0

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self.ops[str(func.overloadpacket.__name__)] += 1
        self.not_views += not func.is_view
        out = func(*args, **(kwargs or {}))
        inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        for tensor in out if isinstance(out, tuple | list) else (out,):
            if (
                isinstance(tensor, torch.Tensor)
                and tensor.untyped_storage().data_ptr() not in inputs
            ):
                self.written += tensor.numel() * tensor.element_size()
        return out


def _prefilled(layer_class: type[Any], prompt: int) -> Any:
    layer = layer_class()
    states = torch.randn(1, 1, prompt, 16)
    layer.update(states, states)
    return layer


def microseconds_per_append(layer_class: type[Any], prompt: int, steps: int) -> float:
    """Mean host time of one append over ``steps`` appends after a prefill."""
    layer = _prefilled(layer_class, prompt)
    token = torch.randn(1, 1, 1, 16)
    start = time.perf_counter()
    for _ in range(steps):
        layer.update(token, token)
    return (time.perf_counter() - start) / steps * 1e6


def operators_per_append(layer_class: type[Any], prompt: int) -> Counter[str]:
    """The aten operators one append (with room) dispatches."""
    layer = _prefilled(layer_class, prompt)
    token = torch.randn(1, 1, 1, 16)
    layer.update(token, token)
    with CountingOperators() as count:
        layer.update(token, token)
    return count.ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    times: dict[str, list[float]] = {name: [] for name in LAYERS}
    for _ in range(args.rounds):
        for name, layer_class in LAYERS.items():
            times[name].append(microseconds_per_append(layer_class, args.prompt, args.steps))
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians["DynamicLayer"]
    print(
        f"one layer's append, {args.prompt}-token prompt, {args.steps} steps, median of "
        f"{args.rounds} rounds (1 head of 16, CPU: host time)\n"
    )
    print("| layer | microseconds per append | / DynamicLayer | operators dispatched |")
    print("|---|---:|---:|---|")
    for name, layer_class in LAYERS.items():
        ops = operators_per_append(layer_class, args.prompt)
        listed = ", ".join(f"{op} x{n}" for op, n in sorted(ops.items()))
        print(f"| {name} | {medians[name]:.2f} | {medians[name] / base:.2f}x | {listed} |")


if __name__ == "__main__":
    main()
