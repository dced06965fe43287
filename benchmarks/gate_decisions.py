"""The uncertainty gates' and the semantic-entropy router's decisions on RetrievalQA.

Gemma 3 270M answers the first ``--limit`` questions of the RetrievalQA subset (all 250
need retrieval) once closed-book with the ``simple_qa`` prompt, greedy, with ``--samples``
sampled answers decoded in the same call; every gate estimator
(``uncertainty_gate.gate_uncertainty``) scores that answer, and semantic entropy scores
the samples (the router's ``"semantic_entropy"`` classifier). A score's job is to tell the
questions the model gets wrong alone (they need the documents) from those it gets right,
so per score this prints:

- AUROC of the score for "the closed-book answer is wrong" (0.5: no better than chance),
  with a 95% bootstrap interval;
- at the estimator's starting threshold (``GATE_THRESHOLDS``; the router's τ_C) and at
  the threshold that retrieves for half the questions: the share that retrieves (Wilson
  95% interval), and of the questions answered right closed-book, the share kept from
  retrieving;
- with ``--with-documents RUN`` (an ``adaptive-rag eval --method single_round`` run on
  the same questions, whose answers are the gate's answers after retrieving), the match
  of the gate's answers at that threshold.

One call per question: the gates' numbers come from the same closed-book answer the
``uncertainty_gate`` method drafts. Each question's scores are written to ``--out`` as
they come (JSON lines); a rerun skips the questions already there. Run: ``python
benchmarks/gate_decisions.py --limit 100 [--with-documents
runs/gemma/retrievalqa-single_round]``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any, get_args

import numpy as np

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.evaluation.datasets import load_retrievalqa
from langchain_adaptive_rag.evaluation.metrics import answer_match, normalize_answer
from langchain_adaptive_rag.exemplars import dataset_prompts
from langchain_adaptive_rag.graphs.complexity_estimates import CLASSIFIER_THRESHOLDS
from langchain_adaptive_rag.graphs.uncertainty_gate import (
    GATE_DIRECTIONS,
    GATE_THRESHOLDS,
    GateEstimator,
    gate_uncertainty,
)
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions
from langchain_adaptive_rag.pretrained import get_gemma_3_270m
from langchain_adaptive_rag.prompts import build_prompt, extract_answer
from langchain_adaptive_rag.signals import semantic_entropy

SEED = 0


def wilson(hits: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a proportion."""
    if n == 0:
        return (math.nan, math.nan)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties counting half."""
    pos, neg = scores[positive], scores[~positive]
    if pos.size == 0 or neg.size == 0:
        return math.nan
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (pos.size * neg.size))


def auroc_interval(scores: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    rng = np.random.default_rng(SEED)
    values = []
    for _ in range(1000):
        pick = rng.integers(0, scores.size, scores.size)
        values.append(auroc(scores[pick], positive[pick]))
    finite = [v for v in values if not math.isnan(v)]
    if not finite:  # every answer right, or every one wrong
        return (math.nan, math.nan)
    return float(np.quantile(finite, 0.025)), float(np.quantile(finite, 0.975))


def shares(retrieve: np.ndarray, right: np.ndarray) -> str:
    """Retrieved share [CI] and, among the right answers, the share kept from retrieving."""
    n = retrieve.size
    lo, hi = wilson(retrieve.sum(), n)
    kept = ~retrieve[right]
    klo, khi = wilson(kept.sum(), kept.size)
    kept_share = kept.mean() if kept.size else math.nan
    return f"{retrieve.mean():.2f} [{lo:.2f}, {hi:.2f}] | {kept_share:.2f} [{klo:.2f}, {khi:.2f}]"


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """The questions already scored, by id."""
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {str(r["id"]): r for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--budget", type=int, default=32, help="tokens of each answer")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--with-documents", type=Path, help="a single_round run's directory")
    parser.add_argument("--model", type=Path, help="model directory (default: Gemma 3 270M)")
    parser.add_argument("--out", type=Path, default=Path("runs/gate_decisions.jsonl"))
    args = parser.parse_args()
    data = args.data_dir / "retrievalqa" / "retrievalqa_gpt4.jsonl"
    examples = load_retrievalqa(data, limit=args.limit)
    chat = ChatTransformers(model=str(args.model or get_gemma_3_270m()), use_chat_template=False)
    prompts = dataset_prompts("simple_qa")
    decoding = DecodingOptions(
        max_new_tokens=args.budget,
        stop=tuple(prompts.stop),
        do_sample=True,
        temperature=1.0,
        top_k=50,
        top_p=0.9,
        seed=SEED,
        top_logprobs=2,
    )
    estimators: list[GateEstimator] = list(get_args(GateEstimator))
    done = _read(args.out)
    start = time.time()
    fresh = 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as sink:
        for example in examples:
            if example.id in done:
                continue
            prompt = build_prompt(prompts, example.question)
            traces = chat.generate_trace(
                prompt,
                decoding=decoding,
                capture=CaptureOptions(logprobs=True),
                n=args.samples,
                include_greedy=True,
            )
            greedy, samples = traces[0], list(traces[1:])
            answer = extract_answer(greedy.text, prompts.answer_marker) or greedy.text.strip()
            row: dict[str, Any] = {
                "id": example.id,
                "right": answer_match(answer, example.answers) > 0,
                "scores": {e: gate_uncertainty(e, greedy, samples) for e in estimators},
            }
            keys = [
                normalize_answer(extract_answer(t.text, prompts.answer_marker) or t.text.strip())
                for t in samples
            ]
            row["scores"]["semantic_entropy"] = semantic_entropy(keys)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            done[example.id] = row
            fresh += 1
    seconds = (time.time() - start) / max(fresh, 1)
    rows = [done[e.id] for e in examples if e.id in done]
    ids = [str(r["id"]) for r in rows]
    right = [bool(r["right"]) for r in rows]
    scores: dict[str, list[float]] = {
        name: [float(r["scores"][name]) for r in rows] for name in [*estimators, "semantic_entropy"]
    }
    correct = np.array(right)
    wrong = ~correct
    with_docs: dict[str, float] = {}
    if args.with_documents is not None:
        path = args.with_documents / "results.jsonl"
        for line in path.read_text().splitlines():
            row: dict[str, Any] = json.loads(line)
            with_docs[str(row["id"])] = float((row.get("metrics") or {}).get("match", 0.0))
    print(
        f"RetrievalQA, {len(rows)} of the first {len(examples)} questions; Gemma 3 270M, greedy, "
        f"{args.samples} samples; right alone: {correct.sum()} ({correct.mean():.2f}); "
        f"{seconds:.1f} s a question\n"
    )
    header = (
        "| score | AUROC for a wrong answer [95% CI] | threshold | retrieved [95% CI] "
        "| kept when right [95% CI] | match |"
    )
    print(header)
    print("|---|---|---:|---|---|---:|")
    for name, values in scores.items():
        array = np.array(values, dtype=np.float64)
        direction = GATE_DIRECTIONS.get(name, "above")
        unsure = -array if direction == "below" else array
        unsure = np.where(np.isfinite(unsure), unsure, np.nanmax(unsure[np.isfinite(unsure)]) + 1)
        area = auroc(unsure, wrong)
        lo, hi = auroc_interval(unsure, wrong)
        starting = (
            CLASSIFIER_THRESHOLDS["semantic_entropy"][1]
            if name == "semantic_entropy"
            else GATE_THRESHOLDS[name]
        )
        half = float(np.median(array))
        for label, threshold in (("start", starting), ("median", half)):
            retrieve = array < threshold if direction == "below" else array > threshold
            retrieve = retrieve | ~np.isfinite(array)
            match = "-"
            if with_docs:
                picked = [
                    with_docs.get(q, 0.0) if r else float(c)
                    for q, r, c in zip(ids, retrieve, correct, strict=True)
                ]
                match = f"{np.mean(picked):.3f}"
            print(
                f"| {name} ({label}) | {area:.3f} [{lo:.3f}, {hi:.3f}] | {threshold:.3g} | "
                f"{shares(retrieve, correct)} | {match} |"
            )


if __name__ == "__main__":
    main()
