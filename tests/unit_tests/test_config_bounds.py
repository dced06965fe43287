"""Every count a config sets is bounded: a value past its range is refused at once, with
the field, the value, the limit and the fix, in Python, per call and on the command line;
a token budget must also fit the model's context."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from pathlib import Path

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.cli_args import add_eval_commands
from langchain_adaptive_rag.graphs import AVAILABLE_METHODS, config_class, create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.policy import TOKENS_CAP
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers.scripted import QUESTION, RecordingRetriever

HUGE = 10**9
NOT_COUNTS = {"seed", "top_k", "attention_layer", "hidden_layer"}
"""Integer fields that size nothing: a seed, the sampler's top-k (capped by the
vocabulary), and layer indexes (checked against the model's depth when it is built)."""
CASES = [
    (method, name)
    for method in AVAILABLE_METHODS
    for name in sorted(config_class(method).all_count_ranges())
]


def _integer_fields(kind: type) -> set[str]:
    hints = typing.get_type_hints(kind)
    return {
        f.name
        for f in dataclasses.fields(kind)
        if "int" in str(hints[f.name]) and "bool" not in str(hints[f.name])
    }


@pytest.mark.parametrize("method", AVAILABLE_METHODS)
def test_every_integer_field_is_a_bounded_count_or_sizes_nothing(method: str) -> None:
    kind = config_class(method)
    assert _integer_fields(kind) == set(kind.all_count_ranges()) | (
        _integer_fields(kind) & NOT_COUNTS
    )


@pytest.mark.parametrize(("method", "name"), CASES)
def test_a_huge_count_is_refused_with_its_limit_and_the_fix(method: str, name: str) -> None:
    kind = config_class(method)
    low, high, _ = kind.all_count_ranges()[name]
    with pytest.raises(AdaptiveRAGError) as caught:
        kind(**{name: HUGE})
    message = str(caught.value)
    assert f"{kind.__name__}.{name}" in message and f"got {HUGE}" in message
    assert f"at most {high}" in message and "Fix:" in message
    with pytest.raises(AdaptiveRAGError, match=f"must be >= {low}, got {low - 1}"):
        kind(**{name: low - 1})


def test_a_per_call_count_is_checked_as_the_config_is() -> None:
    graph = create_adaptive_rag_graph(
        FakeTraceModel([" So the answer is 1931."]), RecordingRetriever(), "seakr"
    )
    with pytest.raises(AdaptiveRAGError, match=r"SeaKRConfig.num_samples must be at most 256"):
        graph.invoke({"question": QUESTION}, context={"num_samples": HUGE})


def test_a_token_budget_must_fit_the_models_context() -> None:
    class Small(FakeTraceModel):
        class capabilities:  # noqa: N801 - the attribute ChatTransformers has
            context_length = 512

    model = Small([" So the answer is 1931."] * 2)
    with pytest.raises(
        AdaptiveRAGError,
        match=r"generate_max_length must fit the model's context of 512 .*got 1024.*at most 512",
    ):
        create_adaptive_rag_graph(
            model,
            RecordingRetriever(),
            "dragin",
            config=config_class("dragin")(generate_max_length=1024),
        )
    graph = create_adaptive_rag_graph(model, RecordingRetriever(), "no_retrieval")
    with pytest.raises(AdaptiveRAGError, match="forced_answer_tokens must fit"):
        graph.invoke({"question": QUESTION}, context={"forced_answer_tokens": 600})
    assert TOKENS_CAP == 2**20


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_eval_commands(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


@pytest.mark.parametrize(("method", "name"), [c for c in CASES if c[0] != "tool_agent"])
def test_the_command_line_refuses_a_huge_count_before_loading_anything(
    method: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "hotpot.json"
    data.write_text(
        json.dumps(
            [
                {
                    "_id": "h1",
                    "question": "Where?",
                    "answer": "Oslo",
                    "supporting_facts": [],
                    "context": [],
                }
            ]
        )
    )
    args = _parse(
        [
            "eval", "--method", method, "--dataset", "hotpotqa", "--data", str(data),
            "--model", str(tmp_path / "no-model"), "--config", f"{name}={HUGE}",
            "--out", str(tmp_path / "out"),
        ]
    )  # fmt: skip
    assert args.handler(args) == 2
    assert f".{name} must be at most" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_methods_page_lists_every_range_as_the_code_has_it() -> None:
    page = (Path(__file__).parents[2] / "docs" / "methods.md").read_text()
    listed = set()
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`") and cells[0].endswith("Config`"):
            low, high = cells[3].split(" (")[0].replace(",", "").split(" to ")
            listed.add((cells[0].strip("`"), cells[1].strip("`"), int(low), int(high)))
    expected = set()
    for method in AVAILABLE_METHODS:
        kind = config_class(method)
        for name, (low, high, _) in kind.all_count_ranges().items():
            owner = next(
                k.__name__
                for k in reversed(kind.__mro__)
                if name in vars(k).get("count_ranges", {})
            )
            expected.add((owner, name, low, high))
    assert listed == expected
