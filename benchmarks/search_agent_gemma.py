"""How often Gemma 3 270M (base) follows a search protocol, zero-shot and with demonstrations.

Each protocol answers the first ``--questions`` HotpotQA dev500 questions with the search
agent (BM25 top 3 over their own paragraphs, ``--concurrency`` questions decoding
together). Printed per protocol: the share of questions whose first turn ends in a
well-formed query (the query's closing tag after an opening one, the query not empty),
the share with at least one search, searches per question, the share whose text gives an
answer in the protocol's form, EM and F1 (as ``adaptive-rag eval`` scores them), and
seconds per question; the row ``same, forced`` is the few-shot protocol with
``force_answer=True``.

``python benchmarks/search_agent_gemma.py [--questions 20] [--concurrency 8]
[--protocols search_o1,search_o1_fewshot] [--data-dir ../shared/data]``.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from search_adherence import HEADER, adherence_row, run_one

from langchain_adaptive_rag import ChatTransformers, create_bm25_retriever
from langchain_adaptive_rag.evaluation import example_passages, load_dataset
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.search_agent import SearchAgentConfig
from langchain_adaptive_rag.pretrained import get_gemma_3_270m

DATA = "hotpotqa/hotpotqa_adarag_dev500_ctx.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--protocols", default="search_o1,search_o1_fewshot")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = parser.parse_args()
    examples = load_dataset("hotpotqa", args.data_dir / DATA, limit=args.questions)
    retriever = create_bm25_retriever(example_passages(examples), k=3)
    chat = ChatTransformers(
        model=str(get_gemma_3_270m()), use_chat_template=False, batch_concurrent_calls=True
    )
    golds = [list(e.answers) for e in examples]
    common = {"generate_max_length": 256, "turn_max_tokens": 96, "max_turns": 4}
    settings = [(p, SearchAgentConfig(protocol=p, **common)) for p in args.protocols.split(",")]
    if "search_o1_fewshot" in args.protocols.split(","):
        forced = SearchAgentConfig(protocol="search_o1_fewshot", force_answer=True, **common)
        settings.append(("search_o1_fewshot, forced", forced))
    print(
        f"Gemma 3 270M, HotpotQA first {len(examples)}, BM25 top 3 over their paragraphs, "
        f"{common}, concurrency {args.concurrency}\n"
    )
    print(HEADER.format(label="protocol"))
    for name, config in settings:
        graph = create_adaptive_rag_graph(chat, retriever, "search_agent", config=config)
        with ThreadPoolExecutor(args.concurrency) as pool:
            runs = list(pool.map(run_one, [graph] * len(examples), [e.question for e in examples]))
        print(adherence_row(name, config, runs, golds), flush=True)


if __name__ == "__main__":
    main()
