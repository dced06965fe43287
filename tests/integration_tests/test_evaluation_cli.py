"""``adaptive-rag eval``, ``compare`` and ``calibrate`` end to end on a tiny local Llama."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_adaptive_rag.cli import main

HOTPOT = [
    {
        "_id": "h1",
        "question": "When was the director of film Blue Harbour born?",
        "answer": "1931",
        "supporting_facts": [["Blue Harbour", 0], ["Anna Berg", 0]],
        "context": [
            ["Blue Harbour", ["Blue Harbour is a 1962 film directed by Anna Berg."]],
            ["Anna Berg", ["Anna Berg (born 1931) is a Swedish film director."]],
        ],
        "type": "bridge",
        "level": "easy",
    },
    {
        "_id": "h2",
        "question": "Who was born first, Carl Lind or Maria Holm?",
        "answer": "Maria Holm",
        "supporting_facts": [["Carl Lind", 0], ["Maria Holm", 0]],
        "context": [
            ["Carl Lind", ["Carl Lind was born in Oslo in 1902."]],
            ["Maria Holm", ["Maria Holm was born in 1899 in Bergen."]],
        ],
        "type": "comparison",
        "level": "medium",
    },
    {
        "_id": "h3",
        "question": "In which city was Carl Lind born?",
        "answer": "Oslo",
        "supporting_facts": [["Carl Lind", 0]],
        "context": [
            ["Carl Lind", ["Carl Lind was born in Oslo in 1902."]],
            ["Paris", ["The capital of France is Paris."]],
        ],
        "type": "bridge",
        "level": "hard",
    },
]


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
    assert "| dragin | dragin | hotpotqa | 3 | 0 |" in printed

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
    assert table[2].startswith("| dragin | dragin | hotpotqa | 3 |")
    assert table[3].startswith("| theta=0.9 | flare | hotpotqa | 2 |")
