"""When torch may run cuDNN's attention, what the chat model says, and what the CLI sets."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.engine import kernels, local_model
from langchain_adaptive_rag.evaluation.cli import choose_attention_kernels


def _model(device: str = "cuda:0", dtype: torch.dtype = torch.bfloat16, kernel: str = "sdpa"):
    return SimpleNamespace(
        device=torch.device(device),
        dtype=dtype,
        config=SimpleNamespace(_attn_implementation=kernel),
    )


@pytest.fixture
def cudnn_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.cuda, "cudnn_sdp_enabled", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)


@pytest.mark.usefixtures("cudnn_on")
def test_cudnn_may_run_only_for_half_precision_sdpa_on_cuda() -> None:
    assert kernels.cudnn_attention_may_run(_model())
    assert kernels.cudnn_attention_may_run(_model(dtype=torch.float16))
    assert not kernels.cudnn_attention_may_run(_model(device="cpu"))
    assert not kernels.cudnn_attention_may_run(_model(dtype=torch.float32))
    assert not kernels.cudnn_attention_may_run(_model(kernel="eager"))
    assert not kernels.cudnn_attention_may_run(_model(kernel="flash_attention_2"))
    assert not kernels.cudnn_attention_may_run(SimpleNamespace(device="cuda"))


def test_cudnn_may_not_run_when_torch_has_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cuda, "cudnn_sdp_enabled", lambda: False)
    assert not kernels.cudnn_attention_may_run(_model())
    monkeypatch.setattr(torch.backends.cuda, "cudnn_sdp_enabled", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: False)
    assert not kernels.cudnn_attention_may_run(_model())


def test_advice_names_the_model_and_the_fix() -> None:
    advice = kernels.cudnn_advice(_model())
    assert "cuda:0" in advice and "bfloat16" in advice
    assert "torch.backends.cuda.enable_cudnn_sdp(False)" in advice
    assert "--cudnn-attention" in advice


def test_chat_model_logs_the_advice_once_at_its_first_call(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    chat = ChatTransformers(model=str(llama_dir), max_new_tokens=2)
    seen: list[object] = []

    def may_run(model: object) -> bool:
        seen.append(model)
        return True

    monkeypatch.setattr(local_model, "cudnn_attention_may_run", may_run)
    with caplog.at_level(logging.WARNING, logger="langchain_adaptive_rag.engine.local_model"):
        chat.invoke("Hello")
        chat.generate_trace("Hello")
    assert seen == [chat.hf_model]
    warnings = [r for r in caplog.records if r.name == "langchain_adaptive_rag.engine.local_model"]
    assert len(warnings) == 1
    assert "enable_cudnn_sdp(False)" in warnings[0].getMessage()


def test_chat_model_on_the_cpu_says_nothing(
    llama_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chat = ChatTransformers(model=str(llama_dir), max_new_tokens=2)
    with caplog.at_level(logging.WARNING, logger="langchain_adaptive_rag.engine.local_model"):
        chat.invoke("Hello")
    assert not [r for r in caplog.records if r.name == "langchain_adaptive_rag.engine.local_model"]


@pytest.mark.parametrize(
    ("device", "cudnn", "turned_off"),
    [
        ("cuda", False, True),
        ("cuda:1", False, True),
        ("cuda", True, False),
        ("cpu", False, False),
        (None, False, False),
    ],
)
def test_the_command_line_turns_cudnn_attention_off_on_cuda(
    monkeypatch: pytest.MonkeyPatch, device: str | None, cudnn: bool, turned_off: bool
) -> None:
    calls: list[bool] = []
    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", calls.append)
    choose_attention_kernels(device, cudnn=cudnn)
    assert calls == ([False] if turned_off else [])


@pytest.mark.parametrize("command", ["eval", "calibrate"])
def test_eval_and_calibrate_choose_the_kernels_before_loading_the_model(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_adaptive_rag.cli import main
    from langchain_adaptive_rag.errors import AdaptiveRAGError
    from langchain_adaptive_rag.evaluation import cli as eval_cli

    data = tmp_path / "dev.json"
    data.write_text(
        json.dumps(
            [
                {
                    "_id": "q1",
                    "question": "In which city was Carl Lind born?",
                    "answer": "Oslo",
                    "supporting_facts": [["Carl Lind", 0]],
                    "context": [["Carl Lind", ["Carl Lind was born in Oslo in 1902."]]],
                    "type": "bridge",
                    "level": "easy",
                }
            ]
        )
    )
    switched: list[bool] = []
    at_load: list[list[bool]] = []

    def load(*args: object, **kwargs: object) -> None:
        at_load.append(list(switched))
        raise AdaptiveRAGError("stopped before loading")

    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", switched.append)
    monkeypatch.setattr(eval_cli, "check_device", lambda device: None)
    monkeypatch.setattr(eval_cli, "load_chat_model", load)
    common = ["--method", "flare", "--dataset", "hotpotqa", "--data", str(data)]
    common += ["--model", "some/model", "--device", "cuda"]
    if command == "calibrate":
        common += ["--values", "0.2,0.4"]
    assert main([command, *common, "--out", str(tmp_path / "a")]) == 2
    assert at_load == [[False]]
    assert main([command, *common, "--cudnn-attention", "--out", str(tmp_path / "b")]) == 2
    assert at_load == [[False], [False]]  # nothing switched the second time
