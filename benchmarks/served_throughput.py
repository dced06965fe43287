"""Questions per second of ``adaptive-rag eval`` on a served model: llama.cpp's server.

The real model's GGUF file (Gemma 3 270M, Q4_K_M) is served by llama.cpp's
OpenAI-compatible server (``llama-cpp-python[server]``) on 127.0.0.1; ``adaptive-rag eval
--model openai:gemma-3-270m --base-url ...`` answers the first ``--limit`` HotpotQA
questions with the method at each ``--concurrency`` (the first one is the baseline the
others' ratios are against), and the answers of each run are compared with the
baseline's. The same questions then run in-process (``ChatTransformers`` on the
dequantized weights, the batched decoder) at the highest concurrency, for scale.

Run: ``python benchmarks/served_throughput.py --limit 16 --concurrency 1,8``
(``--data-dir`` defaults to ``../shared/data``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from langchain_adaptive_rag.pretrained import get_gemma_3_270m, get_gemma_3_270m_gguf
from langchain_adaptive_rag.served.llama_cpp_server import serve_llama_cpp

DATA = "hotpotqa/hotpotqa_adarag_dev500_ctx.jsonl"


def answers(out: Path) -> dict[str, str]:
    """Each question's answer in a run directory (``None`` for a failure)."""
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {row["id"]: row["prediction"] if row["error"] is None else None for row in rows}


def run(model: list[str], args: argparse.Namespace, concurrency: int, out: Path) -> float:
    """Wall seconds of one ``adaptive-rag eval`` run (fresh run directory)."""
    command = [sys.executable, "-m", "langchain_adaptive_rag.cli", "eval"]
    command += ["--method", args.method, "--dataset", "hotpotqa"]
    command += ["--data", str(args.data_dir / DATA), *model, "--prompts", "default"]
    command += ["--limit", str(args.limit), "--concurrency", str(concurrency)]
    command += ["--config", f"generate_max_length={args.max_length}"]
    command += ["--no-progress", "--out", str(out)]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=16, help="questions")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated; first: baseline")
    parser.add_argument("--method", default="flare")
    parser.add_argument("--max-length", type=int, default=48, help="generate_max_length")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--no-in-process", action="store_true", help="skip ChatTransformers")
    parser.add_argument("--out", type=Path, help="keep the run directories here (default: none)")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    rows: list[tuple[str, int, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.out or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        with serve_llama_cpp(get_gemma_3_270m_gguf(), root) as base_url:
            served = ["--model", "openai:gemma-3-270m", "--base-url", base_url]
            for level in levels:
                seconds = run(served, args, level, root / f"served-{level}")
                rows.append(("llama.cpp server", level, seconds))
                print(f"llama.cpp server, concurrency {level}: {seconds:.1f} s", file=sys.stderr)
        if not args.no_in_process:
            level = max(levels)
            local = ["--model", str(get_gemma_3_270m())]
            seconds = run(local, args, level, root / f"local-{level}")
            rows.append(("in-process", level, seconds))
        baseline = answers(root / f"served-{levels[0]}")
        base_seconds = rows[0][2]
        print(f"{args.method} on {args.limit} HotpotQA questions, Gemma 3 270M\n")
        print("| model | concurrency | s | questions/s | vs first | same answers |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, level, seconds in rows:
            kind = "served" if name.startswith("llama") else "local"
            got = answers(root / f"{kind}-{level}")
            same = sum(got.get(q) == a for q, a in baseline.items())
            print(
                f"| {name} | {level} | {seconds:.1f} | {args.limit / seconds:.3f} | "
                f"{base_seconds / seconds:.2f}x | {same}/{len(baseline)} |"
            )


if __name__ == "__main__":
    main()
