"""BM25 retrieval quality on real data: recall@k of the gold passages, index and query time.

The corpus is the 41,417-passage mix of ``shared/data/corpus`` (SQuAD, HotpotQA and 2Wiki
paragraphs, DPR wiki passages, RetrievalQA snippets); the gold passages come from its qrels.
Each question is the query. Two recalls per k: ``recall@k`` is the mean fraction of a
question's gold passages in its top k; ``all@k`` is the fraction of questions with every
gold passage in the top k (a multi-hop question needs both of its paragraphs). The same
corpus is indexed twice in one run, without and with English stemming (PyStemmer), and
the R@3 ratio stemmed / unstemmed is printed for each dataset.

Run:
    python benchmarks/retrieval_recall.py [--data ../shared/data] [--squad-limit 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from langchain_adaptive_rag.evaluation import iter_passages, load_dataset, load_qrels
from langchain_adaptive_rag.retrievers import BM25Analyzer, BM25Retriever, create_bm25_retriever

KS = (1, 2, 3, 5, 10, 20)
SETS = (
    ("hotpotqa", "hotpotqa/hotpotqa_adarag_dev500_ctx.jsonl", "hotpotqa"),
    ("2wikimultihopqa", "2wikimultihopqa/2wiki_adarag_dev500_ctx.jsonl", "2wikimultihopqa"),
    ("squad", "squad/squad_v1.1_dev_qa.jsonl", "squad_v1.1_dev"),
)


def _data_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    env = os.environ.get("ADAPTIVE_RAG_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the shared data folder (default: ../shared/data)")
    parser.add_argument("--squad-limit", type=int, default=2000, help="SQuAD questions used")
    parser.add_argument("--no-title", action="store_true", help="index the text without title")
    args = parser.parse_args()
    data = _data_dir(args.data)
    corpus_file = data / "corpus" / "wiki_passages_mixed.jsonl"
    if not corpus_file.exists():
        raise SystemExit(f"{corpus_file} not found: pass --data or set ADAPTIVE_RAG_DATA.")

    start = time.perf_counter()
    passages = list(iter_passages(corpus_file))
    loaded = time.perf_counter() - start
    sets = []
    for name, path, qrels_name in SETS:
        qrels = load_qrels(data / "corpus" / _qrels_file(qrels_name), dataset=qrels_name)
        limit = args.squad_limit if name == "squad" else None
        examples = [e for e in load_dataset(name, data / path, limit=limit) if e.id in qrels]
        sets.append((name, examples, qrels))
    print(
        f"corpus: {len(passages):,} passages ({'text' if args.no_title else 'title + text'}), "
        f"read in {loaded:.1f} s; BM25 (bm25s, Lucene idf, k1 1.2, b 0.75)\n"
    )
    at3: dict[str, dict[str, float]] = {}
    for label, analyzer in (
        ("no stemming", BM25Analyzer(stemmer=None)),
        ("English stemming", BM25Analyzer(stemmer="english")),
    ):
        start = time.perf_counter()
        retriever = create_bm25_retriever(
            passages, k=max(KS), analyzer=analyzer, index_title=not args.no_title
        )
        indexed = time.perf_counter() - start
        print(f"### {label} (indexed in {indexed:.1f} s)\n")
        at3[label] = _table(retriever, sets)
    print("R@3 English stemming / no stemming:")
    for name, _, _ in SETS:
        base, stemmed = at3["no stemming"][name], at3["English stemming"][name]
        print(f"  {name}: {stemmed:.3f} / {base:.3f} = {stemmed / base:.3f}x")


def _table(retriever: BM25Retriever, sets: list) -> dict[str, float]:
    header = " | ".join(f"R@{k}" for k in KS) + " | " + " | ".join(f"all@{k}" for k in KS)
    print(f"| dataset | questions | golds/q | {header} | query p50 ms | p95 ms |")
    print("|---|---|---|" + "---|" * (2 * len(KS) + 2))
    at3 = {}
    for name, examples, qrels in sets:
        recall = {k: 0.0 for k in KS}
        complete = {k: 0 for k in KS}
        times = []
        for example in examples:
            gold = set(qrels[example.id])
            begin = time.perf_counter()
            docs = retriever.invoke(example.question, k=max(KS))
            times.append((time.perf_counter() - begin) * 1000)
            ids = [str(d.metadata.get("id")) for d in docs]
            for k in KS:
                found = gold & set(ids[:k])
                recall[k] += len(found) / len(gold)
                complete[k] += found == gold
        n = len(examples)
        golds = statistics.mean(len(qrels[e.id]) for e in examples)
        cells = " | ".join(f"{recall[k] / n:.3f}" for k in KS)
        cells += " | " + " | ".join(f"{complete[k] / n:.3f}" for k in KS)
        p50 = statistics.median(times)
        p95 = statistics.quantiles(times, n=20)[-1]
        print(f"| {name} | {n} | {golds:.1f} | {cells} | {p50:.1f} | {p95:.1f} |")
        at3[name] = recall[3] / n
    print()
    return at3


def _qrels_file(dataset: str) -> str:
    if dataset.startswith("squad"):
        return "qrels_squad_v1.1_dev.jsonl"
    return "qrels_supporting_hotpot_2wiki.jsonl"


if __name__ == "__main__":
    main()
