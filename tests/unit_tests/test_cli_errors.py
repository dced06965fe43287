"""Bad command lines end in one ``error: ...`` line with the fix, before any model loads.

The handlers are called through ``main(argv)`` in this process; the model loaders are
replaced by stand-ins that fail the test if called (or by a scripted model), so no test
here loads a real model except the one whose weights are corrupt.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from langchain_adaptive_rag.cli import demo as top_cli
from langchain_adaptive_rag.cli import main
from langchain_adaptive_rag.evaluation import cli as eval_cli
from langchain_adaptive_rag.evaluation.run_lock import RunDirLock
from langchain_adaptive_rag.evaluation.setup import batch_rows
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
from langchain_adaptive_rag.graphs.seakr import SeaKRConfig
from langchain_adaptive_rag.testing import FakeTraceModel

HOTPOT = [
    {
        "_id": f"h{i}",
        "question": f"Where was person {i} born?",
        "answer": "Oslo",
        "supporting_facts": [[f"P{i}", 0]],
        "context": [[f"P{i}", [f"Person {i} was born in Oslo."]]],
    }
    for i in range(2)
]


def _no_model(*args: object, **kwargs: object) -> object:
    raise AssertionError("a model was loaded although the command line was bad")


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eval_cli, "load_chat_model", _no_model)
    monkeypatch.setattr(top_cli, "load_chat_model", _no_model)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "hotpot_dev.json"
    path.write_text(json.dumps(HOTPOT), encoding="utf-8")
    return path


def eval_argv(data: Path, out: Path, *extra: str, command: str = "eval") -> list[str]:
    method = ["--method", "no_retrieval"] if command == "eval" else ["--method", "flare"]
    values = ["--values", "0.5"] if command == "calibrate" else []
    return [
        command,
        *method,
        "--dataset",
        "hotpotqa",
        "--data",
        str(data),
        "--model",
        str(out.parent / "some-model"),
        "--prompts",
        "default",
        "--no-progress",
        *values,
        *extra,
        "--out",
        str(out),
    ]


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The single line the command printed on stderr (no traceback, no second line)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --------------------------------------------------------------------------------------
# Files, devices and outputs are checked before any model is loaded


@pytest.mark.usefixtures("no_model")
@pytest.mark.parametrize("command", ["eval", "calibrate"])
def test_a_latin1_data_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    latin1 = tmp_path / "hotpot_latin1.json"
    latin1.write_bytes(
        json.dumps(HOTPOT, ensure_ascii=False).replace("Oslo", "Osló").encode("latin-1")
    )
    assert main(eval_argv(latin1, tmp_path / "out", command=command)) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {latin1}, line 1: field 'answer': received the byte 0xF3")
    assert "Fix: re-encode the file as UTF-8" in line
    assert not (tmp_path / "out").exists()


DEVICE_ERRORS = {
    "banana": "which torch does not read as a device",
    "": "which torch does not read as a device",
    "meta": "which holds no weights",
    "cuda:7": "this machine has",
    "mps": "this machine has no usable mps device",
}


@pytest.mark.usefixtures("no_model")
@pytest.mark.parametrize("device", sorted(DEVICE_ERRORS))
def test_a_bogus_or_absent_device(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str], device: str
) -> None:
    if device == "cuda:7" and torch.cuda.is_available() and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has an MPS device")
    assert main(eval_argv(data, tmp_path / "out", "--device", device)) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: Received the device {device!r}")
    assert DEVICE_ERRORS[device] in line and "Fix: " in line
    assert "download" not in line.lower()  # not a model problem
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("no_model")
def test_out_that_is_a_file(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "taken"
    taken.write_text("a file")
    for command in ("eval", "calibrate"):
        assert main(eval_argv(data, taken, command=command)) == 2
        line = one_error_line(capsys)
        assert f"'{taken}', which is a file" in line and "Fix: pick another --out" in line
        assert main(eval_argv(data, taken / "below", command=command)) == 2
        assert f"but '{taken}' on its path is a file" in one_error_line(capsys)
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"id": "p1", "text": "Oslo is in Norway."}\n', encoding="utf-8")
    assert main(["index", str(corpus), "--out", str(taken / "ix"), "--no-progress"]) == 2
    assert "index directory" in one_error_line(capsys)
    assert main(["compare", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "which is a directory; expected a file name" in one_error_line(capsys)
    assert taken.read_text() == "a file"


@pytest.mark.usefixtures("no_model")
def test_missing_input_files_name_their_option(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(eval_argv(tmp_path / "nowhere.json", out)) == 2
    assert "which is missing; expected a file. Fix: check the path given to --data" in (
        one_error_line(capsys)
    )
    assert main(eval_argv(data, out, "--corpus", str(tmp_path))) == 2
    assert "which is a directory" in one_error_line(capsys)
    wiki = eval_argv(data, out, "--aliases", str(tmp_path / "id_aliases.json"))
    wiki[wiki.index("hotpotqa")] = "2wikimultihopqa"
    assert main(wiki) == 2
    assert "given to --aliases" in one_error_line(capsys)


@pytest.mark.usefixtures("no_model")
def test_a_directory_another_run_holds_is_refused_before_the_model(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    with RunDirLock(out):
        assert main(eval_argv(data, out)) == 2
        line = one_error_line(capsys)
    assert f"error: The run directory {out} is in use: another run" in line
    assert "Fix: wait for that run to finish" in line and "(--out)" in line


@pytest.mark.usefixtures("no_model")
def test_demo_checks_its_report_path_and_model_before_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("langchain_adaptive_rag.toyworld.load_toy_model", _no_model)
    taken = tmp_path / "taken"
    taken.write_text("a file")
    assert main(["demo", "--methods", "no_retrieval", "--html", str(taken / "r.html")]) == 2
    assert "report file" in one_error_line(capsys)
    assert main(["demo", "--methods", "no_retrieval", "--model", str(tmp_path)]) == 2
    assert "which is not a model directory (no config.json)" in one_error_line(capsys)
    with pytest.raises(SystemExit) as info:
        main(["demo", "--per-category", "0"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["signals", "--max-new-tokens", "0"])
    assert "expected an integer >= 1" in capsys.readouterr().err


@pytest.mark.usefixtures("no_model")
def test_demo_says_which_method_the_toy_model_cannot_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("langchain_adaptive_rag.toyworld.load_toy_model", _no_model)
    assert main(["demo", "--methods", "adaptive_rag,self_rag"]) == 2
    out = capsys.readouterr().out
    assert "The toy model cannot run ['self_rag']" in out and "reflection tokens" in out


@pytest.fixture
def corrupt_model(tmp_path: Path) -> Path:
    from transformers import LlamaConfig

    folder = tmp_path / "corrupt-model"
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    config.save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"\xff" * 64)  # a header that is not one
    return folder


def test_corrupt_weights(
    tmp_path: Path, data: Path, corrupt_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = eval_argv(data, tmp_path / "out")
    argv[argv.index("--model") + 1] = str(corrupt_model)
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: Could not load the model directory '{corrupt_model}'")
    assert "Fix: its files may be corrupt or cut short" in line
    assert main(["signals", "--model", str(corrupt_model)]) == 2
    assert "Could not load the model directory" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# Ctrl-C anywhere: one line, status 130


def _interrupt(*args: object, **kwargs: object) -> object:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("where", "argv"),
    [
        ("prepare_evaluation", "eval"),
        ("load_chat_model", "eval"),
        ("load_chat_model", "calibrate"),
        ("load_chat_model", "signals"),
        ("check_device", "eval"),
    ],
)
def test_ctrl_c_during_start_up(
    tmp_path: Path,
    data: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
    argv: str,
) -> None:
    module = top_cli if argv == "signals" else eval_cli
    monkeypatch.setattr(module, where, _interrupt)
    command = (
        ["signals", "--model", str(tmp_path)]
        if argv == "signals"
        else eval_argv(data, tmp_path / "out", command=argv)
    )
    assert main(command) == 130
    assert one_error_line(capsys).startswith("Interrupted")


# --------------------------------------------------------------------------------------
# A repaired run directory is reported


def test_eval_reports_a_rewritten_torn_run_json(
    tmp_path: Path,
    data: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    loads: list[str] = []

    def scripted(model: str, **options: object) -> FakeTraceModel:
        loads.append(model)
        return FakeTraceModel([" So the answer is Oslo."] * 2)

    monkeypatch.setattr(eval_cli, "load_chat_model", scripted)
    out = tmp_path / "out"
    assert main(eval_argv(data, out)) == 0
    assert "2 answered now" in capsys.readouterr().out
    (out / "run.json").write_bytes(b'{\n  "format": 1,\n  "meth')  # a crash mid-write
    assert main(eval_argv(data, out)) == 0
    captured = capsys.readouterr()
    assert "0 answered now, 2 earlier" in captured.out
    assert "note: " in captured.err and "run.json was empty or cut short" in captured.err
    assert json.loads((out / "run.json").read_text())["method"] == "no_retrieval"
    assert len(loads) == 2
    assert main(eval_argv(data, out)) == 0  # now healthy: answered without a model
    assert "every question is already answered" in capsys.readouterr().out
    assert len(loads) == 2


def test_a_file_the_system_refuses_is_one_line_and_status_1(
    tmp_path: Path,
    data: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refuse(*args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied", str(data))

    monkeypatch.setattr(eval_cli, "prepare_evaluation", refuse)
    assert main(eval_argv(data, tmp_path / "out")) == 1
    assert one_error_line(capsys) == f"error: [Errno 13] Permission denied: '{data}'"


# --------------------------------------------------------------------------------------
# The prefix cache's budget reaches the model loader; a negative one is refused


@pytest.mark.parametrize("command", ["eval", "calibrate"])
@pytest.mark.parametrize(
    ("option", "keyword", "first_run", "default", "value"),
    [
        # the prefix cache's budget: 512 MiB unless told
        ("--prefix-cache-mib", "prefix_cache_mib", [], 512, 0),
        # room for every concurrent question's call (100 calls of one sequence) unless told
        ("--max-batch-rows", "max_batch_rows", ["--concurrency", "100"], 100, 8),
    ],
)
def test_model_options_reach_the_loader(
    tmp_path: Path,
    data: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    option: str,
    keyword: str,
    first_run: list[str],
    default: int,
    value: int,
) -> None:
    seen: list[object] = []

    def scripted(model: str, **options: object) -> FakeTraceModel:
        seen.append(options[keyword])
        return FakeTraceModel([" So the answer is Oslo."] * 8)

    monkeypatch.setattr(eval_cli, "load_chat_model", scripted)
    assert main(eval_argv(data, tmp_path / "a", *first_run, command=command)) == 0
    assert main(eval_argv(data, tmp_path / "b", option, str(value), command=command)) == 0
    assert seen == [default, value]


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [("--prefix-cache-mib", "-5", "an integer >= 0"), ("--max-batch-rows", "0", "an integer >= 1")],
)
def test_a_model_option_out_of_range_is_refused(
    tmp_path: Path,
    data: Path,
    no_model: None,
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
    expected: str,
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(eval_argv(data, tmp_path / "out", option, value))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert option in err and f"received {value!r}; expected {expected}" in err


# --------------------------------------------------------------------------------------
# The loop's room for sequences: every concurrent question's call by default


def test_batch_rows_make_room_for_every_concurrent_call() -> None:
    assert batch_rows(SeaKRConfig(num_samples=8), 8) == 72  # eight calls of k + 1 = 9
    assert batch_rows(SeaKRConfig(num_samples=20), 1) == 64  # never under the default
    assert batch_rows(DRAGINConfig(), 8) == 64
    assert batch_rows(DRAGINConfig(), 100) == 100
