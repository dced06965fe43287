"""``adaptive-rag eval``, ``compare`` and ``calibrate`` end to end on a tiny local Llama."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_adaptive_rag.cli import main
from tests.helpers.hotpot import HOTPOT


def cli(argv: list[str]) -> int:
    return main(argv)  # the installed ``adaptive-rag`` entry point


def test_eval_resume_compare_and_calibrate(
    llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "hotpot_dev.json"
    data.write_text(json.dumps(HOTPOT))
    out = tmp_path / "dragin"
    common = ["--dataset", "hotpotqa", "--data", str(data), "--model", str(llama_dir)]

    def dragin(*config: str) -> list[str]:
        # --prompts default: the tiny model's 1,024 positions do not hold HotpotQA's 8 shots
        options = ["--prompts", "default", "--no-progress", "--out", str(out)]
        settings = ["--config", "generate_max_length=12", "attention_mode=inline", *config]
        return ["eval", "--method", "dragin", *common, *settings, *options]

    argv = dragin()
    assert cli(argv) == 0
    printed = capsys.readouterr().out
    assert "dragin on hotpotqa: 3 questions" in printed and "5 passages" in printed
    assert "3 answered now, 0 earlier, 0 failed" in printed
    assert "| run | method | dataset | n | errors | em | f1 |" in printed
    assert "| dragin | DRAGIN | hotpotqa | 3 | 0 |" in printed

    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["h1", "h2", "h3"]
    for record in records:
        assert record["error"] is None
        assert record["counts"]["llm_calls"] >= 1
        assert set(record["metrics"]) >= {"em", "f1", "precision", "recall"}
        for event in record["retrievals"]:
            assert set(event["doc_ids"]) <= {"h1-0", "h1-1", "h2-0", "h2-1", "h3-1"}
    settings = json.loads((out / "run.json").read_text())
    assert settings["method"] == "dragin" and settings["dataset"] == "hotpotqa"
    assert settings["config"]["attention_mode"] == "inline"
    assert settings["config"]["generate_max_length"] == 12
    assert settings["prompts"] == "default" and settings["model"] == str(llama_dir.resolve())
    assert (out / "summary.md").exists() and (out / "summary.csv").exists()

    # the same command again resumes: nothing is answered twice
    assert cli(argv) == 0
    assert "every question is already answered" in capsys.readouterr().out
    assert len((out / "results.jsonl").read_text().splitlines()) == 3

    # other settings in the same directory are refused, naming the difference
    assert cli(dragin("theta=2")) == 2
    assert "config.theta: stored 1.0, now 2.0" in capsys.readouterr().err

    sweep = tmp_path / "flare-theta"
    calibrate = ["calibrate", "--method", "flare", *common, "--prompts", "default"]
    calibrate += ["--limit", "2", "--values", "0.05,0.9", "--config", "generate_max_length=8"]
    assert cli([*calibrate, "--no-progress", "--out", str(sweep)]) == 0
    printed = capsys.readouterr().out
    assert "| theta | em | f1 | retrievals_per_q | n | errors |" in printed
    assert "chosen theta=" in printed
    assert (sweep / "theta=0.05" / "results.jsonl").exists()
    assert (sweep / "calibration.csv").exists()

    assert cli(["compare", str(out), str(sweep / "theta=0.9")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2].startswith("| dragin | DRAGIN | hotpotqa | 3 |")
    assert table[3].startswith("| theta=0.9 | FLARE | hotpotqa | 2 |")

    # the same run with three questions at once gives the same results, question by
    # question (texts, documents, decisions, counts; scores to rounding)
    together = [*dragin(), "--concurrency", "3"]
    together[together.index("--out") + 1] = str(tmp_path / "dragin-3")
    assert cli(together) == 0
    capsys.readouterr()
    assert cli(["compare", str(out), str(tmp_path / "dragin-3"), "--questions"]) == 0
    assert capsys.readouterr().out.startswith("3 questions: ")
    assert cli(["compare", str(out), str(sweep / "theta=0.9"), "--questions"]) == 1
    printed = capsys.readouterr().out
    assert "questions only in the first run" in printed and "h1: " in printed
    assert cli(["compare", str(out), "--questions"]) == 2


def _passages_file(path: Path) -> Path:
    lines = []
    for question in HOTPOT:
        for i, (title, sentences) in enumerate(question["context"]):  # type: ignore[misc]
            passage = {"id": f"{question['_id']}-{i}", "title": title, "text": " ".join(sentences)}
            lines.append(json.dumps(passage))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_index_then_eval_from_the_index_equals_eval_from_the_corpus(
    llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "hotpot_dev.json"
    data.write_text(json.dumps(HOTPOT))
    corpus = _passages_file(tmp_path / "passages.jsonl")
    index = tmp_path / "index"
    assert cli(["index", str(corpus), "--out", str(index), "--no-progress"]) == 0
    assert "indexed 6 passages" in capsys.readouterr().out
    assert json.loads((index / "manifest.json").read_text())["num_passages"] == 6

    def run(source: list[str], out: Path) -> list[dict[str, object]]:
        argv = ["eval", "--method", "flare", "--dataset", "hotpotqa", "--data", str(data)]
        argv += ["--model", str(llama_dir), "--prompts", "default", *source, "--no-progress"]
        # beta=0: a random model's tokens are all improbable, and a masked query would be empty
        argv += ["--config", "generate_max_length=8", "theta=0.9", "beta=0.0", "--out", str(out)]
        assert cli(argv) == 0
        lines = (out / "results.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    from_index = run(["--index", str(index)], tmp_path / "from-index")
    assert f"6 passages (BM25 index {index.resolve()})" in capsys.readouterr().out
    from_corpus = run(["--corpus", str(corpus)], tmp_path / "from-corpus")
    assert any(record["retrievals"] for record in from_index)
    for a, b in zip(from_index, from_corpus, strict=True):
        assert (a["id"], a["prediction"]) == (b["id"], b["prediction"])
        assert [e["doc_ids"] for e in a["retrievals"]] == [e["doc_ids"] for e in b["retrievals"]]


def test_index_and_eval_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["index", str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "ix")]) == 2
    assert "missing.tsv' does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.tsv"
    bad.write_text("id\ttext\ttitle\n1\tCarl Lind was born in Oslo.\tCarl Lind\n2\tno title\n")
    assert cli(["index", str(bad), "--out", str(tmp_path / "ix"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "bad.tsv" in err and "line 3" in err and "2 tab-separated columns" in err
    assert not (tmp_path / "ix").exists()
    taken = tmp_path / "taken"
    taken.write_text("a file")
    good = _passages_file(tmp_path / "p.jsonl")
    assert cli(["index", str(good), "--out", str(taken), "--no-progress"]) == 2
    assert "is a file" in capsys.readouterr().err
    data = tmp_path / "hotpot_dev.json"
    data.write_text(json.dumps(HOTPOT))
    argv = ["eval", "--method", "dragin", "--dataset", "hotpotqa", "--data", str(data)]
    argv += ["--model", "unused", "--out", str(tmp_path / "run")]
    assert cli([*argv, "--index", str(tmp_path / "nowhere")]) == 2
    assert "BM25 index directory" in capsys.readouterr().err
    assert cli([*argv, "--index", str(tmp_path), "--corpus", str(good)]) == 2
    assert "both --corpus and --index" in capsys.readouterr().err
