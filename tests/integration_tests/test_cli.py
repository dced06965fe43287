"""The command line: the signals of any model, and the toy-world demo."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from langchain_adaptive_rag.cli import demo as cli_module
from langchain_adaptive_rag.cli import main


def test_signals_prints_word_signals(llama_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["signals", "--model", str(llama_dir), "--max-new-tokens", "6"]) == 0
    out = capsys.readouterr().out
    assert "Generated 6 tokens (length)" in out
    header = next(line for line in out.splitlines() if line.startswith("word"))
    assert header.split() == ["word", "tokens", "logprob", "entropy", "attn"]
    assert "Hidden state at layer 1: 64 features" in out
    assert "DRAGIN graph, question 'When was the director of film Blue Harbour born?'" in out
    assert "retrievals," in out


def test_signals_without_a_model_never_loads_one_planted_in_the_shared_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the shared temp directory
    planted = tmp_path / "langchain-adaptive-rag-demo" / "tiny-llama"  # where it used to be
    planted.mkdir(parents=True)
    (planted / "config.json").write_text('{"model_type": "llama", "planted": true}')
    (planted / "model.safetensors").write_bytes(b"planted by another user")
    loaded: list[tuple[Path, int, int]] = []
    load = cli_module.load_chat_model

    def spy(model: str, **options: object) -> object:
        folder = Path(model).parent
        loaded.append((Path(model), stat.S_IMODE(folder.stat().st_mode), folder.stat().st_uid))
        return load(model, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(cli_module, "load_chat_model", spy)
    assert main(["signals", "--max-new-tokens", "4"]) == 0
    ((model, mode, owner),) = loaded
    assert planted not in model.parents and model.parent.parent == tmp_path
    assert model.parent.name.startswith("adaptive-rag-signals-")
    assert mode == 0o700 and owner == os.getuid()  # private to this user
    assert not model.parent.exists()  # removed once loaded
    out = capsys.readouterr().out
    assert "Generated 4 tokens" in out and "Hidden state at layer 1: 64 features" in out
    assert (planted / "model.safetensors").read_bytes() == b"planted by another user"


def test_demo_runs_the_toy_world(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.html"
    args = ["demo", "--methods", "no_retrieval,dragin", "--per-category", "1", "--html"]
    assert main([*args, str(report)]) == 0
    captured = capsys.readouterr()
    out = captured.out
    # quiet: the model loads without a progress bar and no library notice is printed
    assert "Loading weights" not in captured.err and "Warning" not in captured.err
    assert "| method | EM | F1 |" in out
    assert "s/q: each method's wall time over its questions, 8 at a time" in out
    assert "| wo-RAG |" in out and "| DRAGIN |" in out and "| no_retrieval |" not in out
    assert "DRAGIN trace (RIND decides when, QFS decides what):" in out
    assert "Answer: " in out and "Gold: " in out
    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64," in page
    assert "DRAGIN: " in page  # the run is headed by the method's name


def test_demo_rejects_an_unknown_method(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:  # argparse's error, before anything loads
        main(["demo", "--methods", "dragin,magic"])
    assert ended.value.code == 2
    assert "method='magic' is unknown" in capsys.readouterr().err


def test_demo_leaves_the_tool_agent_out_without_langchain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_adaptive_rag.toyworld.comparison import TOY_METHODS

    assert cli_module.default_methods() == list(TOY_METHODS)
    found = cli_module.importlib.util.find_spec
    monkeypatch.setattr(
        cli_module.importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "langchain" else found(name, *rest),
    )
    assert cli_module.default_methods() == [m for m in TOY_METHODS if m != "tool_agent"]
