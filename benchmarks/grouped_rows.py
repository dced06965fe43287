"""Attention rows of grouped-query models: keys read once per key head, not copied per head.

A decoding step that captures attention rows on a fast kernel recomputes the captured
layer's newest row from its query and key states
(``langchain_adaptive_rag.engine.attention_rows.attention_rows``). Llama-3-8B, Qwen2 and
Mistral share each key head among several query heads (32 query heads over 8 key heads
in Llama-3-8B). The baseline repeats every key head for its query heads before the
product (``repeat_interleave``, as transformers' eager attention does with
``repeat_kv``): a float32 copy of the whole layer's keys per query head, at every step.
``attention_rows`` instead multiplies each key head's group of queries as one matrix
against the key head's keys.

For each shape this prints the time of one step's rows (medians of interleaved rounds,
one CPU thread), the bytes the operators write (outputs of every non-view operator,
counted by a dispatch mode: the memory traffic and transient allocations a GPU would
see) and the largest difference between the two ways' rows.

Run: ``python benchmarks/grouped_rows.py [--rounds 30]`` (on a GPU: ``--device cuda``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from cache_append import CountingOperators

from langchain_adaptive_rag.engine.attention_rows import attention_rows

SHAPES = [  # (rows in the batch, query heads, key heads, head dim, keys)
    (1, 32, 8, 128, 512),
    (1, 32, 8, 128, 2048),
    (16, 32, 8, 128, 2048),
    (16, 28, 4, 128, 2048),  # Qwen2-7B
]


def repeated_keys_rows(query: torch.Tensor, key: torch.Tensor, scaling: float) -> torch.Tensor:
    """The baseline: every key head repeated for its query heads, then one product."""
    groups = query.shape[1] // key.shape[1]
    keys = key.float().repeat_interleave(groups, dim=1)
    scores = torch.matmul(query.float(), keys.transpose(-1, -2)) * scaling
    return torch.softmax(scores, dim=-1)


def timed(run: Callable[[], torch.Tensor], device: torch.device) -> float:
    """Seconds ``run`` takes, the device's queue drained before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dtype = getattr(torch, args.dtype)
    device = torch.device(args.device)
    print(
        f"One decoding step's attention rows, keys in {args.dtype}, device {device} "
        f"(1 CPU thread), medians of {args.rounds} interleaved rounds\n"
    )
    print(
        "| rows | heads / key heads | keys | repeated keys (ms) | grouped (ms) | time ratio "
        "| repeated keys MiB written | grouped MiB written | max difference |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for batch, heads, kv_heads, dim, length in SHAPES:
            query = torch.randn(batch, heads, 1, dim, generator=generator).to(device, dtype)
            key = torch.randn(batch, kv_heads, length, dim, generator=generator).to(device, dtype)
            scaling = dim**-0.5
            ways = {
                "repeated": lambda q=query, k=key, s=scaling: repeated_keys_rows(q, k, s),
                "grouped": lambda q=query, k=key, s=scaling: attention_rows(q, k, None, scaling=s),
            }
            difference = (ways["repeated"]() - ways["grouped"]()).abs().max().item()
            written = {}
            for name, run in ways.items():
                with CountingOperators() as counted:
                    run()
                written[name] = counted.written / 2**20
            times: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(args.rounds):
                for name, run in ways.items():
                    times[name].append(timed(run, device))
            m = {name: statistics.median(values) * 1e3 for name, values in times.items()}
            print(
                f"| {batch} | {heads} / {kv_heads} | {length} | {m['repeated']:.2f} "
                f"| {m['grouped']:.2f} | **{m['repeated'] / m['grouped']:.2f}x** "
                f"| {written['repeated']:.1f} | {written['grouped']:.1f} | {difference:.1e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
