"""Sweep a method's retrieval threshold over a dev set and pick one by a stated rule.

The thresholds of FLARE (``theta``: token probability), DRAGIN (``theta``: RIND score),
SeaKR (``delta``: Gram log-determinant uncertainty), ETC (``theta``: entropy-trend
score) and the uncertainty gate (``threshold``: its estimator's score) were tuned for the
papers' models;
on another model their scale moves. [`calibrate_threshold`][] runs the method once per
candidate value (each value is its own run directory, so a stopped sweep resumes) and
[`choose_threshold`][] picks one:

- ``rule="best_f1"`` (default): the highest mean F1; ties go to fewer retrievals per
  question, then to the higher EM, then to the value given first;
- ``rule="best_em"``: the highest EM; ties go to the higher F1, then fewer retrievals,
  then the value given first;
- ``max_retrievals=R`` (either rule): only values spending at most R retrievals per
  question compete ("the best F1 within a budget of R retrievals a question").

Vanilla and TA-ARE decide by prompting and the fixed schedules by position: they have no
threshold to calibrate.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from langchain_core.retrievers import BaseRetriever

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.datasets import Example
from langchain_adaptive_rag.evaluation.overrides import config_class_for, config_to_dict
from langchain_adaptive_rag.evaluation.results import PathLike, RunSettings
from langchain_adaptive_rag.evaluation.runner import run_evaluation
from langchain_adaptive_rag.evaluation.summary import SummaryRow, format_table, summarize
from langchain_adaptive_rag.graphs import (
    AVAILABLE_METHODS,
    Method,
    create_adaptive_rag_graph,
    policy_class,
)
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.options import TraceModel
from langchain_adaptive_rag.prompts import QAPrompts

__all__ = [
    "CALIBRATION_CSV",
    "CALIBRATION_MD",
    "THRESHOLD_FIELDS",
    "CalibrationPoint",
    "CalibrationRule",
    "calibrate_threshold",
    "calibration_rows",
    "choose_threshold",
]

THRESHOLD_FIELDS: dict[str, str] = {
    method: field
    for method in AVAILABLE_METHODS
    if (field := policy_class(method).threshold_field) is not None
}
"""The config field each calibratable method retrieves by (its policy's ``threshold_field``)."""

CALIBRATION_MD = "calibration.md"
"""The sweep table written into the sweep directory."""
CALIBRATION_CSV = "calibration.csv"
"""The same table as CSV."""

CalibrationRule = Literal["best_f1", "best_em"]
"""How [`choose_threshold`][] ranks the sweep's values (see the module docstring)."""


@dataclass(frozen=True)
class CalibrationPoint:
    """One threshold value of a sweep and how the method did with it."""

    threshold: float
    """The value of the method's threshold field (``theta``, ``delta`` or ``threshold``)."""
    em: float
    """Mean exact match."""
    f1: float
    """Mean token F1."""
    retrievals_per_question: float
    """Mean retrievals a question (over the questions that finished)."""
    n: int
    """Questions scored."""
    errors: int
    """Questions that failed (they score 0)."""
    run_dir: str | None
    """The point's run directory (``None`` when the sweep ran in a temporary one)."""


def _threshold_field(method: str) -> str:
    if method not in THRESHOLD_FIELDS:
        config_class_for(method)  # an unknown method gets the list of methods
        msg = (
            f"Received method={method!r}, which has no retrieval threshold to calibrate "
            "(Vanilla/TA-ARE decide by prompting, the fixed schedules by position). "
            f"Expected one of {sorted(THRESHOLD_FIELDS)}."
        )
        raise AdaptiveRAGError(msg)
    return THRESHOLD_FIELDS[method]


def _point_name(name: str, value: float) -> str:
    return f"{name}={value:g}"


def calibrate_threshold(
    method: Method,
    examples: Sequence[Example],
    model: TraceModel,
    retriever: BaseRetriever,
    values: Sequence[float],
    *,
    out_dir: PathLike | None = None,
    config: MethodConfig | None = None,
    prompts: QAPrompts | None = None,
    settings: RunSettings | None = None,
    concurrency: int = 1,
    progress: bool = False,
) -> list[CalibrationPoint]:
    """Run ``method`` once per threshold value and score each run.

    Args:
        method: A method with a threshold (its field in `THRESHOLD_FIELDS`): FLARE,
            DRAGIN or ETC (``theta``), SeaKR (``delta``), the uncertainty gate
            (``threshold``).
        examples: The dev questions (keep them apart from the test questions).
        model: [`ChatTransformers`][] (or any object with its ``generate_trace``).
        retriever: Any LangChain retriever.
        values: Candidate thresholds, in the order to try (duplicates are run once).
        out_dir: The sweep directory; each value runs in ``out_dir/<field>=<value>``
            (resumable like any run) and the table goes to ``calibration.md`` /
            ``calibration.csv``. ``None``: a temporary directory, removed afterwards.
        config: The other config values (default: the method's defaults); its threshold
            field is replaced by each value.
        prompts: Prompt templates.
        settings: The other settings to record in each run (dataset, files, model).
        concurrency: See [`run_evaluation`][].
        progress: Show a progress bar per value.

    Returns:
        One point per distinct value, in the order given.

    Raises:
        AdaptiveRAGError: A method without a threshold, no values, a non-finite value, a
            value the config rejects (FLARE's ``theta`` must lie in [0, 1]), or a config
            of the wrong class.
    """
    name = _threshold_field(method)
    config_class = config_class_for(method)
    base = config if config is not None else config_class()
    if not isinstance(base, config_class):
        msg = (
            f"method={method!r} takes a {config_class.__name__}, got {type(base).__name__}. "
            f"Fix: config={config_class.__name__}(...)."
        )
        raise AdaptiveRAGError(msg)
    distinct: list[float] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            msg = f"Received threshold value {value!r}; expected a number."
            raise AdaptiveRAGError(msg)
        if not math.isfinite(value):
            msg = f"Received threshold value {value!r}; expected a finite number."
            raise AdaptiveRAGError(msg)
        if float(value) not in distinct:
            distinct.append(float(value))
    if not distinct:
        msg = f"Received no values for {method} {name}; expected at least one threshold."
        raise AdaptiveRAGError(msg)
    # Build every config first: the class checks each value before anything runs.
    configs = [(value, replace(base, **{name: value})) for value in distinct]  # type: ignore[arg-type]
    sweep = _SweepOptions(name, prompts, settings, concurrency, progress)
    if out_dir is None:
        with tempfile.TemporaryDirectory(prefix="adaptive-rag-calibration-") as tmp:
            points = _sweep(method, examples, model, retriever, configs, Path(tmp), sweep)
        return [replace(point, run_dir=None) for point in points]
    root = Path(out_dir)
    points = _sweep(method, examples, model, retriever, configs, root, sweep)
    rows = calibration_rows(points, name)
    (root / CALIBRATION_MD).write_text(format_table(rows, "markdown"), encoding="utf-8")
    (root / CALIBRATION_CSV).write_text(format_table(rows, "csv"), encoding="utf-8")
    return points


@dataclass(frozen=True)
class _SweepOptions:
    name: str
    prompts: QAPrompts | None
    settings: RunSettings | None
    concurrency: int
    progress: bool


def _sweep(
    method: Method,
    examples: Sequence[Example],
    model: TraceModel,
    retriever: BaseRetriever,
    configs: Sequence[tuple[float, MethodConfig]],
    root: Path,
    options: _SweepOptions,
) -> list[CalibrationPoint]:
    """Run each value in its own directory under ``root`` and summarise it.

    One compiled graph serves every value: each run sets the threshold for its calls
    (``configurable``), and records its whole config in its ``run.json``.
    """
    graph = create_adaptive_rag_graph(
        model, retriever, method, config=configs[0][1], prompts=options.prompts
    )
    base = options.settings if options.settings is not None else RunSettings(method=method)
    points: list[CalibrationPoint] = []
    for value, config in configs:
        run_dir = root / _point_name(options.name, value)
        report = run_evaluation(
            graph.with_config(configurable={options.name: value}),
            examples,
            run_dir,
            settings=replace(
                base,
                method=method,
                config=config_to_dict(config),
                spacy_pipeline=RunSettings.pipeline_of(config),
            ),
            concurrency=options.concurrency,
            progress=options.progress,
        )
        if report.interrupted:
            raise KeyboardInterrupt
        row = summarize(run_dir)
        points.append(_point(value, row, run_dir))
    return points


def _number(row: SummaryRow, key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, (int, float)) else 0.0


def _point(value: float, row: SummaryRow, run_dir: Path) -> CalibrationPoint:
    return CalibrationPoint(
        threshold=value,
        em=_number(row, "em"),
        f1=_number(row, "f1"),
        retrievals_per_question=_number(row, "retrievals_per_q"),
        n=int(_number(row, "n")),
        errors=int(_number(row, "errors")),
        run_dir=str(run_dir),
    )


def calibration_rows(
    points: Sequence[CalibrationPoint], name: str = "threshold"
) -> list[SummaryRow]:
    """The sweep as table rows (for [`format_table`][]).

    Args:
        points: The sweep's points.
        name: The threshold column's name (``theta``, ``delta``).

    Returns:
        One row per point (the threshold, ``em``, ``f1``, ``retrievals_per_q``, ``n``,
        ``errors``).
    """
    return [
        {
            name: point.threshold,
            "em": point.em,
            "f1": point.f1,
            "retrievals_per_q": point.retrievals_per_question,
            "n": point.n,
            "errors": point.errors,
        }
        for point in points
    ]


def choose_threshold(
    points: Sequence[CalibrationPoint],
    *,
    rule: CalibrationRule = "best_f1",
    max_retrievals: float | None = None,
) -> CalibrationPoint:
    """Pick a threshold from a sweep.

    Args:
        points: The sweep ([`calibrate_threshold`][]).
        rule: ``best_f1``: the highest F1; ties go to fewer retrievals per question, then
            the higher EM, then the earlier point. ``best_em``: the highest EM; ties go to
            the higher F1, then fewer retrievals, then the earlier point.
        max_retrievals: Only points with at most this many retrievals per question
            compete (a retrieval budget).

    Returns:
        The chosen point.

    Raises:
        AdaptiveRAGError: No points, an unknown rule, or no point within the budget.
    """
    if not points:
        msg = "Received no calibration points; expected the result of calibrate_threshold."
        raise AdaptiveRAGError(msg)
    if rule not in ("best_f1", "best_em"):
        msg = f"Received rule={rule!r}; expected 'best_f1' or 'best_em'."
        raise AdaptiveRAGError(msg)
    candidates = list(enumerate(points))
    if max_retrievals is not None:
        candidates = [(i, p) for i, p in candidates if p.retrievals_per_question <= max_retrievals]
        if not candidates:
            fewest = min(p.retrievals_per_question for p in points)
            msg = (
                f"No threshold keeps within max_retrievals={max_retrievals} retrievals per "
                f"question; the fewest was {fewest:g}. Fix: raise the budget or sweep "
                "values that retrieve less."
            )
            raise AdaptiveRAGError(msg)

    def key(item: tuple[int, CalibrationPoint]) -> tuple[float, float, float, int]:
        index, p = item
        f1, em, spent = round(p.f1, 9), round(p.em, 9), round(p.retrievals_per_question, 9)
        if rule == "best_f1":
            return (-f1, spent, -em, index)
        return (-em, -f1, spent, index)

    return min(candidates, key=key)[1]
