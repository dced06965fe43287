"""Summaries of run directories: one row of metrics and costs per run, as Markdown or CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, TypeAlias

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.metrics import mean_scores, retrieval_decision_scores
from langchain_adaptive_rag.evaluation.results import (
    PathLike,
    Record,
    read_run,
)
from langchain_adaptive_rag.graphs import display_name

__all__ = [
    "SUMMARY_CSV",
    "SUMMARY_MD",
    "SummaryRow",
    "compare_runs",
    "format_table",
    "summarize",
    "write_table",
]

SUMMARY_MD = "summary.md"
"""Markdown summary written by [`summarize`][]."""
SUMMARY_CSV = "summary.csv"
"""CSV summary written by [`summarize`][]."""

SummaryRow: TypeAlias = dict[str, str | int | float | None]
"""One run's summary: column name to value (``None``: not available)."""


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _metrics(record: Record) -> Mapping[str, object]:
    """A record's metrics; a failed question's are empty (each metric then counts 0)."""
    metrics = record.get("metrics")
    return metrics if isinstance(metrics, Mapping) else {}


def _count(record: Record, key: str) -> float:
    counts = record.get("counts")
    value = counts.get(key, 0) if isinstance(counts, Mapping) else 0
    return float(value) if isinstance(value, (int, float)) else 0.0


def summarize(out_dir: PathLike, *, write: bool = True) -> SummaryRow:
    """Summarise a run directory; write ``summary.md`` and ``summary.csv`` there.

    Answer metrics average over every recorded question, a failed question scoring 0
    (a method gets no credit for a crash); the efficiency columns (per question)
    average over the questions that finished.

    Args:
        out_dir: The run directory.
        write: Write ``summary.md`` and ``summary.csv`` into the directory.

    Returns:
        ``run`` (the directory name), ``method``, ``dataset``, ``n``, ``errors``, ``em``,
        ``f1``, ``precision``, ``recall``; ``accuracy`` for StrategyQA; ``match`` and,
        when the questions carry the label, ``decision_accuracy`` / ``decision_f1`` for
        RetrievalQA; then ``retrievals_per_q``, ``llm_calls_per_q``, ``tokens_per_q``,
        ``seconds_per_q``.

    Raises:
        AdaptiveRAGError: The directory has no ``run.json``, or holds results of other
            settings than its ``run.json`` (see [`read_run`][]).
    """
    out = Path(out_dir)
    settings, records = read_run(out)
    dataset = settings.get("dataset")
    finished = [r for r in records if r.get("error") is None]
    row: SummaryRow = {
        "run": out.resolve().name,
        "method": str(settings.get("method", "")),
        "dataset": str(dataset) if dataset is not None else None,
        "n": len(records),
        "errors": len(records) - len(finished),
    }
    metrics = [_metrics(r) for r in records]
    answer_keys = ["em", "f1", "precision", "recall"]
    if dataset == "strategyqa" or any("accuracy" in m for m in metrics):
        answer_keys.append("accuracy")
    if dataset == "retrievalqa":
        answer_keys.append("match")
    scored = [{key: m.get(key, 0.0) for key in answer_keys} for m in metrics]
    means = mean_scores(scored, keys=answer_keys) if scored else {}
    for key in answer_keys:
        row[key] = means.get(key)
    labelled = [r for r in records if isinstance(r.get("needs_retrieval"), bool)]
    if labelled:
        decisions = retrieval_decision_scores(
            [_count(r, "retrievals") > 0 for r in labelled],
            [bool(r["needs_retrieval"]) for r in labelled],
        )
        row["decision_accuracy"] = decisions.accuracy
        row["decision_f1"] = decisions.f1
    row["retrievals_per_q"] = _mean([_count(r, "retrievals") for r in finished])
    row["llm_calls_per_q"] = _mean([_count(r, "llm_calls") for r in finished])
    row["tokens_per_q"] = _mean([_count(r, "generated_tokens") for r in finished])
    row["seconds_per_q"] = _mean(
        [float(s) for r in finished if isinstance(s := r.get("seconds"), (int, float))]
    )
    if write:
        (out / SUMMARY_MD).write_text(format_table([row], "markdown"), encoding="utf-8")
        (out / SUMMARY_CSV).write_text(format_table([row], "csv"), encoding="utf-8")
    return row


def compare_runs(dirs: Sequence[PathLike], *, out: PathLike | None = None) -> list[SummaryRow]:
    """Summarise several run directories side by side.

    Args:
        dirs: Run directories.
        out: Also write the table there: CSV when the name ends in ``.csv``, Markdown
            otherwise.

    Returns:
        One [`summarize`][] row per directory, in the order given.

    Raises:
        AdaptiveRAGError: No directories, or one is not a run directory.
    """
    if not dirs:
        msg = "Received no run directories; expected at least one (adaptive-rag eval --out DIR)."
        raise AdaptiveRAGError(msg)
    rows = [summarize(directory, write=False) for directory in dirs]
    if out is not None:
        write_table(rows, out)
    return rows


def _columns(rows: Sequence[SummaryRow]) -> list[str]:
    ordered: dict[str, None] = {}
    for row in rows:
        ordered.update(dict.fromkeys(row))
    return list(ordered)


_FORMATS = {"seconds_per_q": "{:.3f}", "retrievals_per_q": "{:.2f}"}


def _cell(key: str, value: str | int | float | None, fmt: Literal["markdown", "csv"]) -> str:
    if value is None:
        return "-" if fmt == "markdown" else ""
    if isinstance(value, float):
        if fmt == "csv":
            return f"{value:.6g}"
        pattern = _FORMATS.get(key, "{:.1f}" if key.endswith("_per_q") else "{:.3f}")
        return pattern.format(value)
    if key == "method" and fmt == "markdown":  # the papers' name; CSV keeps the id
        return display_name(str(value))
    return str(value)


def format_table(rows: Sequence[SummaryRow], fmt: Literal["markdown", "csv"] = "markdown") -> str:
    """Render summary rows as a Markdown or CSV table.

    Args:
        rows: Rows from [`summarize`][] or [`compare_runs`][]; columns are the union
            of their keys, in first-seen order (a row without a column shows ``-``).
        fmt: ``markdown`` (metrics to 3 decimals, methods by the papers' names: SR-RAG,
            DRAGIN, ...) or ``csv`` (6 significant digits, method ids: ``single_round``).

    Returns:
        The table, ending with a newline.

    Raises:
        AdaptiveRAGError: An unknown format.
    """
    if fmt not in ("markdown", "csv"):
        msg = f"Received fmt={fmt!r}; expected 'markdown' or 'csv'."
        raise AdaptiveRAGError(msg)
    columns = _columns(rows)
    cells = [[_cell(key, row.get(key), fmt) for key in columns] for row in rows]
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(cells)
        return buffer.getvalue()
    numeric = [
        all(isinstance(row.get(key), (int, float)) or row.get(key) is None for row in rows)
        and key != "run"
        for key in columns
    ]
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---:" if num else "---" for num in numeric) + "|",
    ]
    lines.extend("| " + " | ".join(line) + " |" for line in cells)
    return "\n".join(lines) + "\n"


def write_table(rows: Sequence[SummaryRow], path: PathLike) -> Path:
    """Write summary rows to a file: CSV for a ``.csv`` name, Markdown otherwise.

    Args:
        rows: Summary rows.
        path: The file (its folder is created).

    Returns:
        The path written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fmt: Literal["markdown", "csv"] = "csv" if target.suffix.lower() == ".csv" else "markdown"
    target.write_text(format_table(rows, fmt), encoding="utf-8")
    return target
