"""Attention rows on fast kernels: capture on sdpa against plain sdpa ``generate``.

A randomly initialised Llama generates 64 tokens, greedy, four ways, interleaved over
several rounds, each round starting one way further on (only ratios measured in the same
run are reported: the medians of the rounds, then each way's fastest round, the measure
that a noisy host disturbs least, since noise can only add time to the same work):

(a) plain ``model.generate`` on sdpa (the baseline);
(b) ``generate_trace`` on sdpa with attention rows of the middle layer + one hidden state
    (the captured layer's rows recomputed from its query and key states);
(c) the same capture on an eager copy of the model (every layer eager, as before);
(d) ``generate_trace`` on sdpa, logprobs and entropies only.

Run: ``python benchmarks/attention_capture.py [--size 20m|110m] [--prompt-lengths 512 2048]``
(on a GPU: ``--device cuda --dtype bfloat16``, and ``--size 7b`` or ``8b`` for the shapes of
Llama-2-7B and Llama-3-8B). Target: b/a <= 1.05 at prompts 512 and 2048. ``--size host32``
(32 layers 64 wide) measures on a CPU what each way costs the host a step, the part of a
GPU's step that launching kernels does not hide.

``--profile`` then runs a, b and d once more under ``torch.profiler`` at the first prompt
length, decoding in the calling thread, and prints per token what each launched and
waited for (kernel launches, host synchronisations, device time, and reads back to the
host counted as ``.cpu``/``.tolist``/``.item``/``bool`` calls, on any device), the operators
dispatched and those of them that are not views (on any device: on a GPU each of those
launches a kernel or allocates) and b's busiest operators: where a GPU run's b/a comes from.

After the table it prints how far b's attention rows are from c's (eager's own weights,
from the warm-up calls): the rows b times must be the rows eager gives (about 1e-9 in
float32; in half precision eager's weights carry the dtype's rounding).

``--parts`` adds (e) attention rows only and (f) the hidden state only: what each of b's
two captures costs apart. ``--new-tokens 16`` against the default 64 separates what capture
costs once a call (setting the hooks up, the extra forward pass) from what it costs a token.

``--cudnn off`` takes torch's cuDNN attention out of every run (a GPU's default picks it
on Hopper, and it builds a plan for each new key length and batch shape: see
docs/benchmarks.md, "On a GPU").
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from cache_append import CountingOperators
from random_llama import SIZES, build_random_llama
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList
from torch.profiler import ProfilerActivity, profile

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.options import CaptureOptions

NEW_TOKENS = 64


def build(
    size: str, device: str, dtype: torch.dtype, new_tokens: int = NEW_TOKENS
) -> tuple[ChatTransformers, ChatTransformers]:
    """The same random weights twice: every layer sdpa, and every layer eager."""
    chats = []
    for kernel in ("sdpa", "eager"):
        model, tokenizer = build_random_llama(size, device, dtype, attn_implementation=kernel)
        chats.append(
            ChatTransformers(
                model=model,
                tokenizer=tokenizer,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                prefix_cache_mib=0,  # every call prefills its whole prompt, as generate does
            )
        )
    return chats[0], chats[1]


def variants(
    sdpa: ChatTransformers, eager: ChatTransformers, prompt: list[int], parts: bool = False
) -> dict[str, Callable[[], object]]:
    """The ways a, b, c and d (with ``parts``, also e and f: b's two captures apart)."""
    new_tokens = sdpa.max_new_tokens
    inputs = torch.tensor([prompt], device=sdpa.hf_model.device)
    layer = sdpa.num_layers // 2
    capture = CaptureOptions(attention=True, attention_layer=layer, hidden=True, hidden_layer=layer)
    rows_only = CaptureOptions(attention=True, attention_layer=layer)
    hidden_only = CaptureOptions(hidden=True, hidden_layer=layer)

    def plain() -> object:
        with torch.inference_mode():
            return sdpa.hf_model.generate(
                inputs,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=0,
            )

    ways: dict[str, Callable[[], object]] = {
        "a": plain,
        "b": lambda: sdpa.generate_trace(prompt, capture=capture),
        "c": lambda: eager.generate_trace(prompt, capture=capture),
        "d": lambda: sdpa.generate_trace(prompt),
    }
    if parts:
        ways["e"] = lambda: sdpa.generate_trace(prompt, capture=rows_only)
        ways["f"] = lambda: sdpa.generate_trace(prompt, capture=hidden_only)
    return ways


def rows_difference(ours: object, eager: object) -> str:
    """How far b's attention rows are from eager's (c), for the same greedy tokens.

    In half precision eager's own weights are rounded through the model's dtype, so
    differences of about 1e-3 are eager's rounding, not the recomputed rows'.
    """
    assert isinstance(ours, list) and isinstance(eager, list)
    b, c = ours[0], eager[0]
    ids_b, ids_c = b.token_ids.tolist(), c.token_ids.tolist()
    if ids_b != ids_c:
        pairs = enumerate(zip(ids_b, ids_c, strict=False))
        first = next((i for i, (x, y) in pairs if x != y), min(len(ids_b), len(ids_c)))
        return f"tokens part at token {first} (a near tie)"
    return f"{float(abs(b.attention - c.attention).max()):.1e}"


READS = ("cpu", "tolist", "item", "__bool__")
"""Tensor methods that read a value back to the host (on an accelerator: wait for it)."""


@contextmanager
def counting_reads(counts: list[int]) -> Iterator[None]:
    """Count calls of ``READS`` from Python while inside (one more per call)."""
    originals = {name: getattr(torch.Tensor, name) for name in READS}

    def counted(original: Callable[..., object]) -> Callable[..., object]:
        def read(self: torch.Tensor, *args: object, **kwargs: object) -> object:
            counts.append(1)
            return original(self, *args, **kwargs)

        return read

    for name, original in originals.items():
        setattr(torch.Tensor, name, counted(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC")
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def device_time(events: EventList) -> float:
    """Microseconds the device spent on the profiled run's kernels and copies.

    The profiler lists each kernel twice: as an event of its own (on the device) and in
    the device time of the operator that launched it; only the former are summed, as
    torch's own tables do.
    """
    return sum(
        e.self_device_time_total
        for e in events
        if e.device_type != DeviceType.CPU and not e.is_user_annotation
    )


def profiled(sdpa: ChatTransformers, runs: dict[str, Callable[[], object]]) -> None:
    """Print what a, b and d launch and wait for per token, and b's busiest operators."""
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available() and sdpa.hf_model.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    tokens = sdpa.max_new_tokens
    threaded = sdpa.batch_concurrent_calls
    sdpa.batch_concurrent_calls = False  # decode in this thread: its operators are recorded
    print(
        "\n| run | kernel launches / token | host syncs / token | device ms / token "
        "| host reads / token | operators / token | not views / token |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    tables = {}
    averages: dict[str, EventList] = {}
    try:
        for key in ("a", "b", "d"):
            runs[key]()
            reads: list[int] = []
            with counting_reads(reads), profile(activities=activities) as prof:
                runs[key]()
            with CountingOperators() as operators:
                runs[key]()
            events = prof.key_averages()
            launches = sum(e.count for e in events if e.key in LAUNCHES)
            syncs = sum(e.count for e in events if e.key in SYNCS)
            device_us = device_time(events)
            print(
                f"| {key} | {launches / tokens:.0f} | {syncs / tokens:.1f} "
                f"| {device_us / 1000 / tokens:.2f} | {len(reads) / tokens:.1f} "
                f"| {sum(operators.ops.values()) / tokens:.0f} "
                f"| {operators.not_views / tokens:.1f} |"
            )
            averages[key] = events
            tables[key] = events.table(
                sort_by="cpu_time_total", row_limit=20, max_name_column_width=48
            )
    finally:
        sdpa.batch_concurrent_calls = threaded
    print(f"\nb's operators by CPU time ({tokens} tokens):\n")
    print(tables["b"])
    print(capture_operators(averages["b"], averages["d"], tokens))


def capture_operators(b: EventList, d: EventList, tokens: int) -> str:
    """What b runs beyond d, per token, with d scaled to b's number of forward passes.

    Both runs decode the same tokens, and b feeds its last token once more for that token's
    own attention row: scaling d's operators by b's passes over d's (counted by
    ``aten::embedding``, once a pass) leaves the operators of the captures themselves.
    Only calls and device time are compared: one run's host times per operator vary by
    more than the captures cost.

    Returns:
        A markdown table of the operators b adds (calls and device microseconds a token,
        each operator's own kernels), most device time first, with their totals, and the
        device time of all of b's operators over d's and of one forward pass.
    """

    def per_key(events: EventList) -> dict[str, tuple[int, float]]:
        return {
            e.key: (e.count, e.self_device_time_total)
            for e in events
            if e.key.startswith("aten::") or e.key in LAUNCHES
        }

    ours, theirs = per_key(b), per_key(d)
    passes_b = ours.get("aten::embedding", (1, 0.0))[0]
    passes_d = theirs.get("aten::embedding", (1, 0.0))[0]
    scale = passes_b / passes_d
    rows = []
    for key, (count, device) in ours.items():
        calls, time = theirs.get(key, (0, 0.0))
        extra_calls = count - calls * scale
        if extra_calls >= 0.5 * tokens:  # at least once every other token
            rows.append((key, extra_calls / tokens, (device - time * scale) / tokens))
    rows.sort(key=lambda row: (-row[2], -row[1]))
    all_device = sum(v[1] for v in ours.values()) - sum(v[1] for v in theirs.values()) * scale
    lines = [
        f"\nb's own operators beyond d, a token (d scaled by b's {passes_b} forward passes over "
        f"its {passes_d}):\n",
        "| operator | calls / token | device us / token |",
        "|---|---:|---:|",
    ]
    lines += [f"| {key} | {calls:.1f} | {device:.1f} |" for key, calls, device in rows]
    lines.append(
        f"| all above (calls: operators) | {sum(r[1] for r in rows if r[0] not in LAUNCHES):.1f} "
        f"| {sum(r[2] for r in rows):.1f} |"
    )
    pass_device = sum(v[1] for v in theirs.values()) / passes_d
    lines.append(
        f"\nEvery operator of b over scaled d: {all_device / tokens:.1f} device us a token; "
        f"one forward pass of d: {pass_device / 1000:.2f} device ms (b runs "
        f"{passes_b - passes_d} more a call)."
    )
    return "\n".join(lines)


WAYS = "abcdef"


def fastest_row(length: int, times: dict[str, list[float]]) -> str:
    """One table row of each way's fastest round and its ratio to a's fastest.

    Args:
        length: The prompt's length in tokens.
        times: Each way's seconds a call, one a round, keyed by the way's letter.

    Returns:
        The row, in the column order of ``times``.
    """
    best = {key: min(values) for key, values in times.items()}
    seconds = " | ".join(f"{best[key]:.3f}" for key in times)
    ratio = " | ".join(f"{best[key] / best['a']:.3f}" for key in times if key != "a")
    return f"| {length} | {seconds} | {ratio} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=list(SIZES), default="20m")
    parser.add_argument("--prompt-lengths", type=int, nargs="+", default=[512, 2048])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--new-tokens", type=int, default=NEW_TOKENS, help="tokens a call generates (64)"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    parser.add_argument("--profile", action="store_true", help="profile a, b and d (see above)")
    parser.add_argument(
        "--parts", action="store_true", help="also e: attention rows only, f: hidden state only"
    )
    parser.add_argument(
        "--cudnn", choices=["allowed", "off"], default="allowed", help="torch's cuDNN attention"
    )
    args = parser.parse_args()
    torch.backends.cuda.enable_cudnn_sdp(args.cudnn == "allowed")
    torch.set_num_threads(torch.get_num_threads())
    sdpa, eager = build(args.size, args.device, getattr(torch, args.dtype), args.new_tokens)
    kernels = f", cuDNN attention {args.cudnn}" if args.device.startswith("cuda") else ""
    print(
        f"Llama {args.size} ({sdpa.num_layers} layers, {args.dtype}), "
        f"{args.new_tokens} new tokens, greedy, device {args.device}{kernels}, "
        f"medians of {args.rounds} interleaved rounds\n"
    )
    extra = " e: rows only | f: hidden only |" if args.parts else ""
    ratios = " e/a | f/a |" if args.parts else ""
    print(
        "| prompt | a: sdpa generate (s) | b: sdpa + capture | c: eager + capture "
        f"| d: sdpa, entropy only |{extra} b/a | c/a | d/a |{ratios}"
    )
    print("|---:" * (8 + 4 * args.parts) + "|")
    checks: list[str] = []
    fastest = [
        "| prompt | "
        + " | ".join(f"{key} (s)" for key in WAYS[: 4 + 2 * args.parts])
        + " | "
        + " | ".join(f"{key}/a" for key in WAYS[1 : 4 + 2 * args.parts])
        + " |",
        "|---:" * (8 + 4 * args.parts) + "|",
    ]
    for length in args.prompt_lengths:
        prompt = [int(i) for i in torch.randint(10, len(sdpa.hf_tokenizer), (length,))]
        runs = variants(sdpa, eager, prompt, parts=args.parts)
        warm = {key: run() for key, run in runs.items()}  # warm-up
        checks.append(f"{length} tokens: {rows_difference(warm['b'], warm['c'])}")
        times: dict[str, list[float]] = {key: [] for key in runs}
        order = list(runs)
        for round_ in range(args.rounds):
            # Each round starts one way further on, so no way always follows the same one.
            shift = round_ % len(order)
            for key in order[shift:] + order[:shift]:
                run = runs[key]
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                start = time.perf_counter()
                run()
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                times[key].append(time.perf_counter() - start)
        m = {key: statistics.median(values) for key, values in times.items()}
        seconds = " | ".join(f"{m[key]:.3f}" for key in runs)
        ratio = " | ".join(f"{m[key] / m['a']:.3f}" for key in runs if key != "a")
        print(f"| {length} | {seconds} | {ratio} |", flush=True)
        fastest.append(fastest_row(length, times))
    print(
        f"\nThe fastest of the {args.rounds} rounds (a call does the same work every round, "
        "so a slower round is the machine's noise, which can only add time):\n"
    )
    print("\n".join(fastest))
    print(f"\nb's rows against c's (eager), largest difference: {'; '.join(checks)}")
    if args.profile:
        prompt = [
            int(i) for i in torch.randint(10, len(sdpa.hf_tokenizer), (args.prompt_lengths[0],))
        ]
        profiled(sdpa, variants(sdpa, eager, prompt))


if __name__ == "__main__":
    main()
