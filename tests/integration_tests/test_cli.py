"""The demo command runs on a tiny local model and prints its signals."""

from __future__ import annotations

from pathlib import Path

import pytest

from langchain_adaptive_rag.cli import main


def test_demo_prints_word_signals(llama_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", str(llama_dir), "--max-new-tokens", "6"]) == 0
    out = capsys.readouterr().out
    assert "Generated 6 tokens (length)" in out
    header = next(line for line in out.splitlines() if line.startswith("word"))
    assert header.split() == ["word", "tokens", "logprob", "entropy", "attn"]
    assert "Hidden state at layer 1: 64 features" in out
    assert "DRAGIN graph, question 'When was the director of film Blue Harbour born?'" in out
    assert "retrievals," in out
