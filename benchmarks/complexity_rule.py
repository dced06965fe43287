"""How Adaptive-RAG's rule classifier routes the paper's six datasets.

Adaptive-RAG (Jeong et al., NAACL 2024) evaluates on 500-question samples of three
single-hop datasets (NQ, TriviaQA, SQuAD) and three multi-hop ones (MuSiQue, HotpotQA,
2WikiMultihopQA); its classifier's training labels fall back on exactly that split
(single-hop: single-step, B; multi-hop: multi-step, C). This prints, for each sample, the
share of questions ``rule_complexity`` sends to the route the dataset's kind calls for,
next to the baseline of sending every question multi-step (all C), measured in the same
run, and the balanced accuracy of both. No model is loaded; it takes a second.

    python benchmarks/complexity_rule.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from langchain_adaptive_rag.graphs.complexity import rule_complexity

SAMPLES: dict[str, tuple[str, str]] = {
    "NQ": ("nq/nq_adarag_dev500_qa.jsonl", "B"),
    "TriviaQA": ("triviaqa/triviaqa_adarag_dev500_qa.jsonl", "B"),
    "SQuAD": ("squad/squad_adarag_dev500_qa.jsonl", "B"),
    "MuSiQue": ("musique/musique_adarag_dev500_qa.jsonl", "C"),
    "HotpotQA": ("hotpotqa/hotpotqa_adarag_dev500_ctx.jsonl", "C"),
    "2WikiMultihopQA": ("2wikimultihopqa/2wiki_adarag_dev500_ctx.jsonl", "C"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    args = parser.parse_args()
    started = time.perf_counter()
    rows: list[tuple[str, int, str, float, float]] = []
    for name, (path, expected) in SAMPLES.items():
        lines = (args.data / path).read_text(encoding="utf-8").splitlines()
        questions = [json.loads(line)["question"] for line in lines if line.strip()]
        rule = sum(rule_complexity(q) == expected for q in questions) / len(questions)
        always_c = 1.0 if expected == "C" else 0.0
        rows.append((name, len(questions), expected, rule, always_c))
    print("| dataset | questions | route its kind calls for | rule | all multi-step |")
    print("|---|---|---|---|---|")
    for name, count, expected, rule, always_c in rows:
        print(f"| {name} | {count} | {expected} | {rule:.3f} | {always_c:.3f} |")
    balanced_rule = sum(r[3] for r in rows) / len(rows)
    balanced_c = sum(r[4] for r in rows) / len(rows)
    print(
        f"\nbalanced accuracy: rule {balanced_rule:.3f}, all multi-step {balanced_c:.3f} "
        f"(ratio {balanced_rule / balanced_c:.2f}x); "
        f"{time.perf_counter() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
