"""A run split into shards and merged equals the unsharded run, on the toy world."""

from __future__ import annotations

from pathlib import Path

from langchain_adaptive_rag.evaluation import (
    RunSettings,
    Shard,
    compare_results,
    evaluate_method,
    merge_shards,
    summarize,
)
from langchain_adaptive_rag.toyworld import (
    TOY_PROMPTS,
    load_toy_model,
    toy_config,
    toy_corpus,
    toy_questions,
    toy_retriever,
)
from langchain_adaptive_rag.toyworld.benchmark import toy_examples


def test_three_merged_shards_are_the_whole_dragin_run(tmp_path: Path) -> None:
    model = load_toy_model()
    retriever = toy_retriever()
    examples = toy_examples(toy_questions(), toy_corpus())[::19][:12]
    settings = RunSettings(method="dragin", dataset="toy", model="toy")

    def run(questions: list, out: Path, base: RunSettings) -> None:  # type: ignore[type-arg]
        evaluate_method(
            model,
            retriever,
            "dragin",
            questions,
            out,
            config=toy_config("dragin"),
            prompts=TOY_PROMPTS,
            settings=base,
            progress=False,
        )

    run(examples, tmp_path / "whole", settings)
    shard_dirs = []
    for number in (3, 1, 2):  # run in any order, on any machine
        shard = Shard(number, 3)
        questions = shard.select(examples)
        base = RunSettings(
            method="dragin",
            dataset="toy",
            model="toy",
            shard=shard.label,
            shard_questions=len(questions),
        )
        run(questions, tmp_path / f"shard-{number}", base)
        shard_dirs.append(tmp_path / f"shard-{number}")
    merged = merge_shards(shard_dirs, tmp_path / "merged")
    agreement = compare_results(tmp_path / "whole", merged)
    assert agreement.agree and agreement.questions == 12, agreement
    whole, joined = summarize(tmp_path / "whole"), summarize(merged)
    for key in ("n", "errors", "em", "f1", "retrievals_per_q", "llm_calls_per_q", "tokens_per_q"):
        assert joined[key] == whole[key], key  # type: ignore[literal-required]
    assert joined["retrievals_per_q"] > 0  # DRAGIN retrieved on some of them
