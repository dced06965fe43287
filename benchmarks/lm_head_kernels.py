"""Gemma 3 270M's output layer on a few rows: every float32 kernel torch offers on CPU.

A decoding step of ``r`` rows multiplies ``r`` hidden states by the 262,144 x 640 output
layer, two thirds of the model's weights. Batching rows pays only if an ``r``-row
product costs little more than a 1-row one: the weights are read once either way, and
the arithmetic grows with ``r``. This times that product (the model's real weights,
float32, median of ``--repeats`` calls) five ways:

- ``nn.Linear``: ``x @ W.T`` (one row as a matrix-vector product);
- weight-first: ``(W @ x.T).T``, one row fed as two, as the decoding loop runs it
  (``weight_major_linear``);
- MKL packed: the weights packed once for the row count (``torch.ops.mkl._mkl_linear``);
- oneDNN: the layer converted by ``torch.utils.mkldnn.to_mkldnn``;
- Inductor: ``torch.compile`` with maximum autotuning over its C++ micro-kernels and
  frozen, prepacked weights (one compile per row count; ``--no-inductor`` skips it,
  and it is left out where no C++ compiler is found).

Besides, the floors this CPU sets: reading the weights once (the faster of two
reductions over them, a maximum and row sums) and the arithmetic (the rate of a
2048 x 2048 product). Printed: milliseconds a call, the floor, and per row against each
way's own 1-row call: the most batching ``r`` rows can gain on that kernel. Each way's
outputs are checked against a float64 product.

``python benchmarks/lm_head_kernels.py [--rows 1,2,4,8,16] [--repeats 10] [--no-inductor]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.mkldnn
from torch import nn
from torch._inductor import config as inductor_config
from transformers import AutoModelForCausalLM
from weight_major_step import row_counts

from langchain_adaptive_rag.engine.weight_major import weight_major_linear
from langchain_adaptive_rag.pretrained import get_gemma_3_270m

ROW_COUNTS = (1, 2, 4, 8, 16)
Product = Callable[[torch.Tensor], torch.Tensor]


def median_ms(call: Callable[[], Any], repeats: int) -> float:
    """Median milliseconds of ``call`` after two warm-up calls."""
    call()
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def mkl_packed(weight: torch.Tensor, rows: int) -> Product:
    """MKL's product on weights packed once for ``rows`` rows."""
    packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, rows)
    return lambda x: torch.ops.mkl._mkl_linear(x, packed, weight, None, rows)


def one_dnn(layer: nn.Linear) -> Product:
    """The layer as oneDNN runs it."""
    converted = torch.utils.mkldnn.to_mkldnn(nn.Sequential(layer))[0]
    return lambda x: converted(x.to_mkldnn()).to_dense()


def inductor(layer: nn.Linear, rows: int) -> Product:
    """The layer compiled for ``rows`` rows: autotuned C++ micro-kernels, frozen weights."""
    torch._dynamo.reset()
    compiled = torch.compile(layer, dynamic=False)
    with inductor_config.patch(
        max_autotune=True, max_autotune_gemm_backends="CPP,ATEN", freezing=True
    ):
        compiled(torch.zeros(rows, layer.in_features))
    return compiled


def floors_ms(weight: torch.Tensor, repeats: int) -> tuple[float, float]:
    """Milliseconds to read ``weight`` once, and multiply-adds per millisecond."""
    read = min(median_ms(weight.amax, repeats), median_ms(lambda: weight.sum(1), repeats))
    square = torch.randn(2048, 2048)
    rate = 2048**3 / median_ms(lambda: square @ square, repeats)
    return read, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows",
        type=row_counts,
        default=ROW_COUNTS,
        help="comma-separated rows a call, from 1 (default: 1,2,4,8,16)",
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-inductor", action="store_true", help="skip torch.compile")
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(get_gemma_3_270m(), dtype=torch.float32)
    weight = model.get_output_embeddings().weight.detach().contiguous()
    del model
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=False).eval()
    layer.weight = nn.Parameter(weight, requires_grad=False)
    ways: list[str] = ["nn.Linear", "weight-first", "MKL packed", "oneDNN"]
    if not args.no_inductor and shutil.which("g++") is not None:
        ways.append("Inductor")
    generator = torch.Generator().manual_seed(0)
    results: dict[int, list[float]] = {}
    worst = dict.fromkeys(ways, 0.0)
    with torch.no_grad():
        read_ms, macs_per_ms = floors_ms(weight, args.repeats)
        for rows in args.rows:
            x = torch.randn(rows, weight.shape[1], generator=generator)
            exact = (x.double() @ weight.double().T).float()
            products: dict[str, Product] = {
                "nn.Linear": layer,
                "weight-first": lambda x: weight_major_linear(layer, x),
                "MKL packed": mkl_packed(weight, rows),
                "oneDNN": one_dnn(layer),
            }
            if "Inductor" in ways:
                products["Inductor"] = inductor(layer, rows)
            results[rows] = []
            for way in ways:
                product = products[way]
                worst[way] = max(worst[way], (product(x) - exact).abs().max().item())
                results[rows].append(median_ms(lambda p=product, x=x: p(x), args.repeats))
    print(
        f"Gemma 3 270M's output layer ({weight.shape[0]:,} x {weight.shape[1]}, float32, "
        f"{weight.numel() * 4 / 2**30:.2f} GiB) on {torch.get_num_threads()} CPU threads, "
        f"median of {args.repeats} calls. Floors: reading the weights once {read_ms:.1f} ms "
        f"({weight.numel() * 4 / read_ms / 1e6:.1f} GB/s), arithmetic "
        f"{macs_per_ms / 1e6:.1f} G multiply-adds/s (2048 x 2048)\n"
    )
    print(
        "| rows | "
        + " | ".join(f"{w} ms" for w in ways)
        + " | floor ms | per row vs 1 row: "
        + " | ".join(ways)
        + " | floor |"
    )
    print("|---:" * (2 * len(ways) + 4) + "|")
    floor_one = max(read_ms, weight.numel() / macs_per_ms)
    for rows, ms in results.items():
        floor = max(read_ms, rows * weight.numel() / macs_per_ms)
        cells = [f"{m:.1f}" for m in ms] + [f"{floor:.1f}"]
        cells += [f"{rows * one / m:.2f}x" for one, m in zip(results[1], ms, strict=True)]
        cells.append(f"{rows * floor_one / floor:.2f}x")
        print(f"| {rows} | " + " | ".join(cells) + " |")
    print(
        "\nLargest difference from a float64 product: "
        + ", ".join(f"{way} {value:.1e}" for way, value in worst.items())
    )


if __name__ == "__main__":
    main()
