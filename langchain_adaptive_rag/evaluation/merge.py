"""Merging the shards of one run (``adaptive-rag eval --shard I/N``) into one run directory."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.results import (
    RESULTS_FILE,
    RUN_FILE,
    PathLike,
    Record,
    read_run,
    settings_fingerprint,
)
from langchain_adaptive_rag.evaluation.shards import Shard, parse_shard

__all__ = ["merge_shards"]

_SHARD_KEYS = ("shard", "shard_questions")


class _Part(NamedTuple):
    directory: Path
    shard: Shard
    settings: dict[str, object]
    records: list[Record]


def _read_part(directory: Path) -> _Part:
    settings, records = read_run(directory)
    label = settings.get("shard")
    if not isinstance(label, str):
        msg = (
            f"{directory} is not a shard: its {RUN_FILE} has no 'shard'. Expected run "
            "directories made with adaptive-rag eval --shard I/N. Fix: list only the shards' "
            "directories."
        )
        raise AdaptiveRAGError(msg)
    part = _Part(directory, parse_shard(label), settings, records)
    expected = settings.get("shard_questions")
    if isinstance(expected, int) and len(records) < expected:
        msg = (
            f"Shard {label} ({directory}) holds {len(records)} of its {expected} questions. "
            "Expected every shard finished. Fix: run that shard's command again (it "
            "resumes), then merge."
        )
        raise AdaptiveRAGError(msg)
    return part


def _check_parts(parts: list[_Part]) -> None:
    counts = {part.shard.total for part in parts}
    if len(counts) != 1:
        found = ", ".join(f"{p.shard.label} ({p.directory})" for p in parts)
        msg = f"The shards split the run in different ways: {found}. Expected one N."
        raise AdaptiveRAGError(msg)
    count = counts.pop()
    seen: dict[int, Path] = {}
    for part in parts:
        if part.shard.number in seen:
            msg = (
                f"Shard {part.shard.label} is given twice: {seen[part.shard.number]} and "
                f"{part.directory}. Fix: list each shard once."
            )
            raise AdaptiveRAGError(msg)
        seen[part.shard.number] = part.directory
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if missing:
        names = ", ".join(f"{i}/{count}" for i in missing)
        msg = (
            f"Shards {names} are missing, so their questions would be missing from the "
            f"merged run. Expected all {count} shards. Fix: run and list them too."
        )
        raise AdaptiveRAGError(msg)
    first = parts[0]
    fingerprint = settings_fingerprint(first.settings)
    for part in parts[1:]:
        if settings_fingerprint(part.settings) != fingerprint:
            differences = [
                f"{key}: {first.settings.get(key)!r} in shard {first.shard.label}, "
                f"{part.settings.get(key)!r} in shard {part.shard.label}"
                for key in sorted(set(first.settings) | set(part.settings))
                if key not in (*_SHARD_KEYS, "started", "fingerprint", "format", "limit")
                and first.settings.get(key) != part.settings.get(key)
            ]
            msg = (
                "The shards were made with different settings, so they are not parts of "
                "one run:\n  " + "\n  ".join(differences) + "\nFix: merge shards of one "
                "command line only."
            )
            raise AdaptiveRAGError(msg)
        if part.settings.get("limit") != first.settings.get("limit"):
            msg = (
                f"Shard {part.shard.label} answers the first {part.settings.get('limit')} "
                f"questions and shard {first.shard.label} the first "
                f"{first.settings.get('limit')}. Expected one --limit. Fix: rerun the "
                "shards with the same --limit."
            )
            raise AdaptiveRAGError(msg)
    owner: dict[str, str] = {}
    for part in parts:
        for record in part.records:
            question = str(record["id"])
            if question in owner:
                msg = (
                    f"Question {question!r} is in shard {owner[question]} and shard "
                    f"{part.shard.label}. Expected each question in one shard. Fix: merge "
                    "shards of one command line only."
                )
                raise AdaptiveRAGError(msg)
            owner[question] = part.shard.label


def merge_shards(shard_dirs: Sequence[PathLike], out_dir: PathLike) -> Path:
    """Join the shards of one run into one run directory.

    The merged ``run.json`` holds the shards' settings without the shard fields (its
    fingerprint is the shards', the one an unsharded run has), and ``results.jsonl``
    every shard's results, shard by shard; [`summarize`][] then gives the unsharded run's
    summary.

    Args:
        shard_dirs: The N shards' run directories, in any order.
        out_dir: The merged run's directory (missing or empty).

    Returns:
        The merged run directory.

    Raises:
        AdaptiveRAGError: A directory is not a finished shard, a shard is missing or given
            twice, the shards' settings or limits differ, a question is in two shards, or
            ``out_dir`` already holds a run.
    """
    if not shard_dirs:
        msg = "Received no shard directories. Expected the N shards of one run."
        raise AdaptiveRAGError(msg)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        msg = (
            f"The merged run's directory {out} exists and is not empty. Expected a new or "
            "empty directory. Fix: choose another --out."
        )
        raise AdaptiveRAGError(msg)
    parts = sorted((_read_part(Path(d)) for d in shard_dirs), key=lambda p: p.shard.number)
    _check_parts(parts)
    settings = {k: v for k, v in parts[0].settings.items() if k not in _SHARD_KEYS}
    settings["started"] = min(str(p.settings.get("started", "")) for p in parts)
    settings["fingerprint"] = settings_fingerprint(settings)
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r, ensure_ascii=False) for p in parts for r in p.records]
    (out / RESULTS_FILE).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    (out / RUN_FILE).write_text(
        json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return out
