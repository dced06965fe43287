"""Shards of a run (``eval --shard I/N``) and their merge into one run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from langchain_adaptive_rag.cli import main
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation import (
    Shard,
    merge_shards,
    parse_shard,
    run_evaluation,
    summarize,
)
from langchain_adaptive_rag.evaluation.results import read_run
from tests.unit_tests.test_evaluation_runner import (
    EXAMPLES,
    REPLIES,
    SETTINGS,
    KeyedModel,
    graph_of,
)


def test_a_shard_is_every_nth_question() -> None:
    assert parse_shard("2/4") == Shard(2, 4) and parse_shard(" 1 / 1 ").label == "1/1"
    assert Shard(2, 3).select(list(range(8))) == [1, 4, 7]
    shards = [Shard(i, 3).select(list(range(8))) for i in (1, 2, 3)]
    assert sorted(x for shard in shards for x in shard) == list(range(8))
    for bad in ("0/4", "5/4", "2", "a/b", "-1/2"):
        with pytest.raises(AdaptiveRAGError, match=rf"Received shard '{bad}'. Expected I/N"):
            parse_shard(bad)


def test_shards_share_the_runs_fingerprint_but_resume_only_themselves(tmp_path: Path) -> None:
    one = dataclasses.replace(SETTINGS, shard="1/2", shard_questions=3)
    assert one.fingerprint == SETTINGS.fingerprint
    assert one.to_json()["shard"] == "1/2" and "shard" not in SETTINGS.to_json()
    out = tmp_path / "shard-1"
    run_evaluation(graph_of(KeyedModel(REPLIES)), EXAMPLES[0::2], out, settings=one)
    two = dataclasses.replace(SETTINGS, shard="2/2", shard_questions=2)
    with pytest.raises(AdaptiveRAGError, match="shard: stored '1/2', now '2/2'"):
        run_evaluation(graph_of(KeyedModel(REPLIES)), EXAMPLES[1::2], out, settings=two)


def _shards(tmp_path: Path, total: int, *, stop_after: int | None = None) -> list[Path]:
    dirs = []
    for number in range(1, total + 1):
        shard = Shard(number, total)
        questions = shard.select(EXAMPLES)
        settings = dataclasses.replace(SETTINGS, shard=shard.label, shard_questions=len(questions))
        out = tmp_path / f"shard-{number}"
        answered = questions if stop_after is None else questions[:stop_after]
        run_evaluation(graph_of(KeyedModel(REPLIES)), answered, out, settings=settings)
        dirs.append(out)
    return dirs


def test_merged_shards_are_the_unsharded_run(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    run_evaluation(graph_of(KeyedModel(REPLIES)), EXAMPLES, whole, settings=SETTINGS)
    merged = merge_shards(list(reversed(_shards(tmp_path, 3))), tmp_path / "merged")
    settings, records = read_run(merged)
    whole_settings, whole_records = read_run(whole)
    assert "shard" not in settings and settings["fingerprint"] == whole_settings["fingerprint"]
    assert sorted(r["id"] for r in records) == [e.id for e in EXAMPLES]
    by_id = {r["id"]: r for r in whole_records}
    for record in records:
        mine = {k: v for k, v in record.items() if k != "seconds"}
        theirs = {k: v for k, v in by_id[record["id"]].items() if k != "seconds"}
        assert mine == theirs
    keys = ("n", "errors", "em", "f1", "retrievals_per_q", "llm_calls_per_q", "tokens_per_q")
    a, b = summarize(merged), summarize(whole)
    assert [a[k] for k in keys] == [b[k] for k in keys]  # type: ignore[literal-required]


def test_a_merge_refuses_what_is_not_one_finished_run(tmp_path: Path) -> None:
    first, second, third = _shards(tmp_path / "a", 3)
    with pytest.raises(AdaptiveRAGError, match=r"Shards 3/3 are missing"):
        merge_shards([first, second], tmp_path / "m1")
    with pytest.raises(AdaptiveRAGError, match=r"Shard 2/3 is given twice"):
        merge_shards([first, second, second, third], tmp_path / "m2")
    unfinished = _shards(tmp_path / "b", 2, stop_after=1)
    with pytest.raises(AdaptiveRAGError, match=r"Shard 1/2 .* holds 1 of its 3 questions"):
        merge_shards(unfinished, tmp_path / "m3")
    other = tmp_path / "other"
    settings = dataclasses.replace(SETTINGS, model="other", shard="3/3", shard_questions=1)
    run_evaluation(graph_of(KeyedModel(REPLIES)), EXAMPLES[2::3], other, settings=settings)
    with pytest.raises(AdaptiveRAGError, match=r"(?s)different settings.*model: None in shard 1/3"):
        merge_shards([first, second, other], tmp_path / "m4")
    halves = _shards(tmp_path / "c", 2)
    with pytest.raises(AdaptiveRAGError, match=r"split the run in different ways"):
        merge_shards([first, *halves], tmp_path / "m5")
    with pytest.raises(AdaptiveRAGError, match=r"is not a shard: its run.json has no 'shard'"):
        whole = tmp_path / "whole"
        run_evaluation(graph_of(KeyedModel(REPLIES)), EXAMPLES, whole, settings=SETTINGS)
        merge_shards([whole], tmp_path / "m6")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("")
    with pytest.raises(AdaptiveRAGError, match=r"exists and is not empty"):
        merge_shards([first, second, third], taken)


def test_the_command_line_takes_a_shard_and_merges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["merge", str(tmp_path / "none"), "--out", str(tmp_path / "m")]) == 2
    assert "which has no run.json: not a run directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "--method", "dragin", "--dataset", "hotpotqa", "--data", "x", "--model",
              "m", "--shard", "3/2", "--out", str(tmp_path / "o")])  # fmt: skip
    assert "Received shard '3/2'. Expected I/N" in capsys.readouterr().err
    first, second = _shards(tmp_path, 2)
    assert main(["merge", str(first), str(second), "--out", str(tmp_path / "m")]) == 0
    printed = capsys.readouterr().out
    assert "merged 2 shards into" in printed and "| 5 | 0 |" in printed
    stored = json.loads((tmp_path / "m" / "run.json").read_text())
    assert stored["fingerprint"] == SETTINGS.fingerprint
