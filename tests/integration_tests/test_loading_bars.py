"""transformers' "Loading weights" bars stay out of scripts, logs and notebooks."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from transformers.utils import logging as transformers_logging

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.engine.loading import weight_loading_bars

BAR = "Loading weights"


@pytest.fixture
def bars_enabled() -> object:
    before = transformers_logging.is_progress_bar_enabled()
    transformers_logging.enable_progress_bar()
    yield
    if not before:
        transformers_logging.disable_progress_bar()


@pytest.mark.usefixtures("bars_enabled")
def test_loading_by_path_prints_no_bar_and_restores_the_setting(
    llama_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ChatTransformers(model=str(llama_dir), local_files_only=True)
    captured = capfd.readouterr()
    assert BAR not in captured.err + captured.out
    assert transformers_logging.is_progress_bar_enabled()


@pytest.mark.usefixtures("bars_enabled")
def test_show_loading_progress_lets_the_bar_print(
    llama_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ChatTransformers(model=str(llama_dir), local_files_only=True, show_loading_progress=True)
    assert BAR in capfd.readouterr().err


def test_a_process_with_bars_off_keeps_them_off() -> None:
    before = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        with weight_loading_bars(shown=False):
            assert not transformers_logging.is_progress_bar_enabled()
        assert not transformers_logging.is_progress_bar_enabled()
    finally:
        if before:
            transformers_logging.enable_progress_bar()


@pytest.mark.usefixtures("bars_enabled")
def test_overlapping_loads_restore_the_bars_after_the_last_one() -> None:
    first_inside = threading.Event()
    second_done = threading.Event()
    seen_during_first: list[bool] = []

    def first() -> None:
        with weight_loading_bars(shown=False):
            first_inside.set()
            second_done.wait(5)
            seen_during_first.append(transformers_logging.is_progress_bar_enabled())

    worker = threading.Thread(target=first)
    worker.start()
    first_inside.wait(5)
    with weight_loading_bars(shown=False):
        pass
    second_done.set()
    worker.join(5)
    assert seen_during_first == [False]  # the second load's end did not turn bars back on
    assert transformers_logging.is_progress_bar_enabled()
