"""Shared prompts: SeaKR-shaped calls with one copy of each prompt against a copy per sample.

Each call decodes its greedy step and ``k`` samples (``k + 1`` rows) of one prompt, as
SeaKR's steps do; ``--calls`` of them decode together (concurrent calls in one loop).
The same calls run twice per round, alternately: every sample holding its own copy of
the prompt's keys and values (``share_prompts=False``, the previous behaviour) and the
samples reading one shared copy (the default). Printed per prompt length: seconds per
run (median of the rounds) both ways and the ratio, the most memory the keys and values
took (the loop's cache plus the shared prompts, measured from the buffers), how many
rows decoded the same tokens both ways, and the largest signal difference (over each
row's tokens up to the first that differs). In float32 every row agrees; in bfloat16
the two ways round differently (the shared route's softmax is float32, a fused kernel's
is not), so sampled rows of a random model drift apart after a few tokens. A randomly
initialised Llama of ``--size`` gives the shapes of a real model; every row decodes
``--tokens`` tokens.

Run: ``python benchmarks/shared_prompts.py [--size 8m|20m|110m] [--calls 8] [--k 8]
[--prompts 256,1024] [--tokens 24] [--rounds 3]`` (on a GPU: ``--device cuda --dtype
bfloat16``, and ``--size 7b`` or ``8b`` for the shapes of Llama-2-7B and Llama-3-8B).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import torch
from random_llama import SIZES, build_random_llama

from langchain_adaptive_rag.engine import runner as decoding_loop
from langchain_adaptive_rag.engine.request import DecodeRequest
from langchain_adaptive_rag.engine.runner import decode_together
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions

CAPTURE = CaptureOptions(hidden=True, hidden_site="mlp", hidden_at="eos")  # SeaKR's signal


class PeakBytes:
    """The most bytes the loop's cache and shared prompts' buffers held at a step."""

    def __init__(self) -> None:
        self.peak = 0
        self._step = decoding_loop.BatchRunner._step

    def __enter__(self) -> PeakBytes:
        step = self._step

        def watched(loop: Any, tokens: list[int]) -> None:
            step(loop, tokens)
            held = 0
            for cache in (loop.cache, loop.prompts.cache):
                for layer in getattr(cache, "layers", None) or []:
                    for buffer in (layer._key_buffer, layer._value_buffer):
                        if buffer is not None:
                            held += buffer.numel() * buffer.element_size()
            self.peak = max(self.peak, held)

        decoding_loop.BatchRunner._step = watched  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        decoding_loop.BatchRunner._step = self._step  # type: ignore[method-assign]


def run(
    model: Any, tokenizer: Any, prompts: list[list[int]], args: argparse.Namespace, share: bool
) -> tuple[float, int, list[DecodeRequest]]:
    """Decode every call once; seconds, peak key/value bytes and the decoders."""
    options = DecodingOptions(
        max_new_tokens=args.tokens,
        min_new_tokens=args.tokens,
        do_sample=True,
        temperature=1.0,
        top_k=50,
        top_p=0.9,
    )
    decoders = [
        DecodeRequest(
            model,
            tokenizer,
            ids,
            n=args.k,
            include_greedy=True,
            decoding=DecodingOptions(**{**options.__dict__, "seed": 100 + i}),
            capture=CAPTURE,
        )
        for i, ids in enumerate(prompts)
    ]
    with PeakBytes() as peak:
        start = time.perf_counter()
        list(decode_together(model, decoders, capture=CAPTURE, share_prompts=share))
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    return seconds, peak.peak, decoders


def agree(a: list[DecodeRequest], b: list[DecodeRequest]) -> tuple[int, int, float]:
    """Rows whose tokens all agree, rows, and the largest signal difference.

    Signals are compared over each row's tokens up to the first that differs (after it
    the two rows read different text).
    """
    equal, rows, diff = 0, 0, 0.0
    for x, y in zip(a, b, strict=True):
        for s, t in zip(x.traces, y.traces, strict=True):
            rows += 1
            mine, theirs = s.token_ids.tolist(), t.token_ids.tolist()
            equal += mine == theirs
            common = next(
                (i for i, (p, q) in enumerate(zip(mine, theirs, strict=False)) if p != q),
                min(len(mine), len(theirs)),
            )
            gap = np.abs(s.logprobs[:common] - t.logprobs[:common])
            diff = max(diff, float(gap.max(initial=0.0)))
            if mine == theirs and s.hidden is not None and t.hidden is not None:
                diff = max(diff, float(np.abs(s.hidden - t.hidden).max()))
    return equal, rows, diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="8m")
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--k", type=int, default=8, help="samples per call (plus a greedy one)")
    parser.add_argument("--prompts", default="256,1024", help="prompt lengths, in tokens")
    parser.add_argument("--tokens", type=int, default=24, help="tokens each row decodes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    args = parser.parse_args()
    torch.set_num_threads(2)
    model, tokenizer = build_random_llama(args.size, args.device, getattr(torch, args.dtype))
    rows = args.calls * (args.k + 1)
    print(
        f"random Llama {args.size} ({model.num_parameters() / 1e6:.0f}M, {args.dtype}) "
        f"on {model.device}, "
        f"{args.calls} calls x {args.k + 1} rows = {rows} rows, {args.tokens} tokens each, "
        f"median of {args.rounds} rounds\n"
    )
    print(
        "| prompt tokens | s, a copy per sample | s, shared | speed-up | "
        "KV MiB, copies | KV MiB, shared | rows with equal tokens | max signal diff |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    generator = torch.Generator().manual_seed(0)
    for length in (int(n) for n in args.prompts.split(",")):
        prompts = [
            torch.randint(5, len(tokenizer), (length,), generator=generator).tolist()
            for _ in range(args.calls)
        ]
        run(model, tokenizer, prompts[:1], args, True)  # warm-up
        times: dict[bool, list[float]] = {False: [], True: []}
        peaks: dict[bool, int] = {}
        results: dict[bool, list[DecodeRequest]] = {}
        for _ in range(args.rounds):
            for share in (False, True):
                seconds, peaks[share], results[share] = run(model, tokenizer, prompts, args, share)
                times[share].append(seconds)
        copies, shared = (statistics.median(times[s]) for s in (False, True))
        equal, rows, diff = agree(results[False], results[True])
        print(
            f"| {length} | {copies:.2f} | {shared:.2f} | {copies / shared:.2f}x | "
            f"{peaks[False] / 2**20:.0f} | {peaks[True] / 2**20:.0f} | "
            f"{equal}/{rows} | {diff:.1e} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
