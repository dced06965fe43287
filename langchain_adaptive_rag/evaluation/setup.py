"""Set an evaluation run up: questions, corpus, prompts, config, settings and the model."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast, get_args

from langchain_adaptive_rag.catalogue import PACKAGE_PROMPTS
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.corpus import iter_passages
from langchain_adaptive_rag.evaluation.datasets import Example, canonical_dataset_name, load_dataset
from langchain_adaptive_rag.evaluation.overrides import (
    config_class_for,
    config_to_dict,
    parse_config_overrides,
)
from langchain_adaptive_rag.evaluation.results import PathLike, RunSettings
from langchain_adaptive_rag.evaluation.runner import example_passages
from langchain_adaptive_rag.evaluation.shards import Shard
from langchain_adaptive_rag.exemplars import (
    DATASET_GENERATE_MAX_LENGTH,
    PromptDataset,
    dataset_prompts,
)
from langchain_adaptive_rag.graphs import Method
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrievers import (
    BM25Retriever,
    create_bm25_retriever,
    load_bm25_retriever,
)

if TYPE_CHECKING:
    from langchain_adaptive_rag.chat_models import ChatTransformers

__all__ = [
    "DEFAULT_PROMPTS",
    "MIN_BATCH_ROWS",
    "PACKAGE_PROMPTS",
    "EvalSetup",
    "batch_rows",
    "check_device",
    "load_chat_model",
    "prepare_evaluation",
]

DEFAULT_PROMPTS: dict[str, PromptDataset] = {
    "2wikimultihopqa": "2wikimultihopqa",
    "hotpotqa": "hotpotqa",
    "iirc": "iirc",
    "strategyqa": "strategyqa",
    "nq": "simple_qa",
    "triviaqa": "simple_qa",
    "squad": "simple_qa",
    "popqa": "simple_qa",
    "retrievalqa": "simple_qa",
}
"""The [`dataset_prompts`][] set each dataset uses unless told otherwise (MuSiQue has none:
the package's default demonstrations)."""

_OWN_BUDGET = frozenset({"vanilla", "ta_are", "search_agent"})
"""Methods that keep their own ``generate_max_length`` on every dataset: Vanilla and
TA-ARE answer in a short form; a search agent's budget spans all its turns."""


@dataclasses.dataclass(frozen=True)
class EvalSetup:
    """Everything a run needs except the model."""

    method: Method
    """The method."""
    examples: list[Example]
    """The questions to answer (after ``limit``)."""
    retriever: BM25Retriever
    """BM25 over the corpus (in memory, or memory-mapped from ``--index``)."""
    config: MethodConfig
    """The method config."""
    prompts: QAPrompts | None
    """The prompt set (``None``: the package default)."""
    settings: RunSettings
    """What ``run.json`` records."""


def _resolved(path: PathLike) -> str:
    return str(Path(path).expanduser().resolve())


def _model_label(model: str) -> str:
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def _build_config(
    method: Method,
    prompts_name: str,
    overrides: Sequence[str],
    k: int | None,
    threshold_field: str | None = None,
) -> MethodConfig:
    config_class = config_class_for(method)
    base = config_class()
    budget = DATASET_GENERATE_MAX_LENGTH.get(prompts_name)
    if budget is not None and method not in _OWN_BUDGET:
        base = dataclasses.replace(base, generate_max_length=budget)
    keys = {item.partition("=")[0].strip() for item in overrides}
    if k is not None:
        if "retrieve_topk" in keys:
            msg = (
                "Received both --k and --config retrieve_topk=...; they set the same value. "
                "Fix: give only one."
            )
            raise AdaptiveRAGError(msg)
        base = dataclasses.replace(base, retrieve_topk=k)
    if threshold_field is not None and threshold_field in keys:
        msg = (
            f"Received --config {threshold_field}=... for a calibration that sweeps "
            f"{threshold_field}. Fix: give the candidates with --values only."
        )
        raise AdaptiveRAGError(msg)
    return parse_config_overrides(list(overrides), config_class, base=base)


def prepare_evaluation(
    method: Method,
    dataset: str,
    data: PathLike,
    *,
    model: str,
    corpus: PathLike | None = None,
    index: PathLike | None = None,
    aliases: PathLike | None = None,
    limit: int | None = None,
    overrides: Sequence[str] = (),
    prompts: str | None = None,
    k: int | None = None,
    threshold_field: str | None = None,
    shard: Shard | None = None,
) -> EvalSetup:
    """Load the questions and corpus and build the config and settings of a run.

    Without ``corpus`` the passages of every question of the data file (not only the
    first ``limit``) are pooled, so a larger ``limit`` later retrieves from the same
    corpus and the run can be resumed. The config starts from the method's defaults with
    the prompt set's answer budget ([`DATASET_GENERATE_MAX_LENGTH`][]; not for the
    short-form Vanilla/TA-ARE), then ``k``, then ``overrides``.

    Args:
        method: The method.
        dataset: The dataset name (see [`canonical_dataset_name`][]).
        data: The dataset file.
        model: The model's hub id or directory (recorded in the settings only).
        corpus: A passage file (DPR TSV or JSON lines), indexed in memory for this run;
            default: the data file's passages.
        index: A saved BM25 index directory (``adaptive-rag index``), memory-mapped; the
            way to retrieve from DPR's 21M passages.
        aliases: 2WikiMultihopQA ``id_aliases.json``.
        limit: Answer only the first ``limit`` questions.
        overrides: ``key=value`` config values (see [`parse_config_overrides`][]).
        prompts: A [`dataset_prompts`][] name, or ``"default"`` for the package's own
            demonstrations; ``None``: the dataset's own ([`DEFAULT_PROMPTS`][]).
        k: Documents per retrieval (``retrieve_topk``).
        threshold_field: For a calibration: the swept field, which ``overrides`` may not
            set.
        shard: Answer only this shard of the questions (after ``limit``; see
            [`Shard`][]); the corpus stays the whole run's.

    Returns:
        The run's questions, passages, config, prompts and settings.

    Raises:
        AdaptiveRAGError: A bad file, config value or combination of options.
    """
    dataset = canonical_dataset_name(dataset)
    pool = load_dataset(dataset, data, aliases=aliases)
    examples = pool if limit is None else pool[:limit]
    if shard is not None:
        examples = shard.select(examples)
    if not examples:
        part = "" if shard is None else f", shard {shard.label}"
        msg = (
            f"Received no questions from {str(data)!r} (limit={limit}{part}); expected at "
            "least one. Fix: check the file, the limit and the number of shards."
        )
        raise AdaptiveRAGError(msg)
    default_prompts: str = DEFAULT_PROMPTS.get(dataset, PACKAGE_PROMPTS)
    prompts_name = prompts if prompts is not None else default_prompts
    if prompts_name != PACKAGE_PROMPTS and prompts_name not in get_args(PromptDataset):
        choices = [*get_args(PromptDataset), PACKAGE_PROMPTS]
        msg = f"Received prompts={prompts_name!r}; expected one of {choices}."
        raise AdaptiveRAGError(msg)
    prompt_set = (
        None
        if prompts_name == PACKAGE_PROMPTS
        else dataset_prompts(cast(PromptDataset, prompts_name))
    )
    config = _build_config(method, prompts_name, overrides, k, threshold_field)
    if corpus is not None and index is not None:
        msg = (
            "Received both --corpus and --index; they name the passages to retrieve from. "
            "Fix: give only one (--index for a saved index, --corpus to index a file now)."
        )
        raise AdaptiveRAGError(msg)
    top_k = config.retrieve_topk
    if index is not None:
        retriever = load_bm25_retriever(index, k=top_k)
        corpus_label = f"BM25 index {_resolved(index)}"
    elif corpus is not None:
        retriever = create_bm25_retriever(list(iter_passages(corpus)), k=top_k, index_title=True)
        corpus_label = _resolved(corpus)
    else:
        passages = example_passages(pool)
        corpus_label = f"passages of {_resolved(data)}"
        if not passages:
            msg = (
                f"The {dataset} file {str(data)!r} gives no passages with its questions, "
                "and no corpus was given. Expected a corpus to retrieve from. Fix: pass "
                "--corpus FILE (DPR psgs_w100.tsv or passage JSON lines) or --index DIR."
            )
            raise AdaptiveRAGError(msg)
        retriever = create_bm25_retriever(passages, k=top_k, index_title=True)
    settings = RunSettings(
        method=method,
        dataset=dataset,
        data_file=_resolved(data),
        corpus=corpus_label,
        model=_model_label(model),
        config=config_to_dict(config),
        prompts=prompts_name,
        limit=limit,
        spacy_pipeline=RunSettings.pipeline_of(config),
        shard=None if shard is None else shard.label,
        shard_questions=None if shard is None else len(examples),
    )
    return EvalSetup(method, examples, retriever, config, prompt_set, settings)


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` of an exception on one line, cut to ``limit`` characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _device_support(kind: str) -> tuple[bool, int | None]:
    """Whether torch can use devices of ``kind`` here, and how many there are."""
    import torch

    if kind == "mps":
        return bool(torch.backends.mps.is_available()), 1
    backend = getattr(torch, kind, None)
    is_available = getattr(backend, "is_available", None)
    if not callable(is_available):
        return False, None
    available = bool(is_available())
    device_count = getattr(backend, "device_count", None)
    count = int(device_count()) if available and callable(device_count) else None
    return available, count


def check_device(device: str | None) -> None:
    """Check that ``device`` names a torch device this machine has, before loading anything.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, ...; ``None`` is the CPU.

    Raises:
        AdaptiveRAGError: The string is not a torch device, the device type is not
            usable here (no CUDA on this machine, a torch without MPS), the index is past
            the devices present, or it is ``meta`` (which holds no weights).
    """
    if device is None:
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError) as exc:
        msg = (
            f"Received the device {device!r}, which torch does not read as a device "
            f"({_one_line(exc, 160)}); expected cpu, cuda, cuda:N, mps, xpu, ... Fix: pass "
            "one of those to --device, or leave it out to run on the CPU."
        )
        raise AdaptiveRAGError(msg) from None
    kind = parsed.type
    if kind == "cpu":
        return
    if kind == "meta":
        msg = (
            f"Received the device {device!r}, which holds no weights; expected a device "
            "that computes (cpu, cuda, mps, ...). Fix: leave --device out to run on the CPU."
        )
        raise AdaptiveRAGError(msg)
    available, count = _device_support(kind)
    if not available:
        msg = (
            f"Received the device {device!r}, but this machine has no usable {kind} device "
            f"(torch {torch.__version__} reports none). Expected a device present here. Fix: "
            "leave --device out to run on the CPU, or run where that device is."
        )
        raise AdaptiveRAGError(msg)
    if parsed.index is not None and count is not None and parsed.index >= count:
        last = f"{kind}:0" if count == 1 else f"{kind}:0 to {kind}:{count - 1}"
        msg = (
            f"Received the device {device!r}, but this machine has {count} {kind} "
            f"device{'s' if count != 1 else ''} ({last}). Expected one of those. Fix: pass "
            f"one of them to --device, or {kind} for the first."
        )
        raise AdaptiveRAGError(msg)


MIN_BATCH_ROWS = 64
"""The fewest sequences an evaluation's decoding loop makes room for (the model's default)."""


def batch_rows(config: MethodConfig, concurrency: int) -> int:
    """Sequences a loop decodes together so ``concurrency`` questions' calls all fit.

    Each question has one model call at a time, of ``config.rows_per_call`` sequences
    (SeaKR: the greedy step and its ``k`` samples); at least [`MIN_BATCH_ROWS`][].

    Args:
        config: The method's config.
        concurrency: Questions answered at once.

    Returns:
        ``max(MIN_BATCH_ROWS, concurrency * config.rows_per_call)``.
    """
    return max(MIN_BATCH_ROWS, concurrency * config.rows_per_call)


def load_chat_model(
    model: str,
    *,
    device: str | None = None,
    dtype: Literal["auto", "float32", "float16", "bfloat16"] | None = None,
    concurrency: int = 1,
    attn_implementation: Literal["eager", "sdpa"] | None = None,
    max_new_tokens: int | None = None,
    prefix_cache_mib: int = 512,
    max_batch_rows: int = MIN_BATCH_ROWS,
) -> ChatTransformers:
    """Load a model for evaluation: transformers' default kernel (sdpa), completion prompts.

    Attention signals need no eager attention: the captured layer's rows are recomputed
    from its query and key states.

    Args:
        model: Hub id or local directory.
        device: Torch device (default: CPU); checked first (see [`check_device`][]).
        dtype: Weights dtype (default: float32).
        concurrency: Questions answered at once; above 1 their calls decode together in
            one batched loop (``batch_concurrent_calls=True``, also on a CPU).
        attn_implementation: The attention kernel (default: transformers' own, sdpa).
        max_new_tokens: The model's default generation budget (default: its own).
        prefix_cache_mib: Memory for recent prompts' keys and values (0: none; see
            ``ChatTransformers.prefix_cache_mib``).
        max_batch_rows: Most sequences decoded together (see [`batch_rows`][]: room
            for every concurrent question's call).

    Returns:
        The chat model.

    Raises:
        AdaptiveRAGError: The device is not usable here, the directory does not exist,
            or the model cannot be loaded (offline with a hub id that is not in the local
            cache, weights that are corrupt or cut short, ...); the message is one line.
    """
    from langchain_adaptive_rag.chat_models import ChatTransformers

    check_device(device)
    path = Path(model).expanduser()
    looks_local = model.startswith((".", "/", "~")) or path.exists()
    if looks_local and not (path / "config.json").is_file():
        msg = (
            f"Received --model {model!r}, a path without config.json; expected a model "
            "directory (config.json, weights, tokenizer) or a hub id. Fix: point --model "
            "at the directory that holds config.json."
        )
        raise AdaptiveRAGError(msg)
    budget = {} if max_new_tokens is None else {"max_new_tokens": max_new_tokens}
    try:
        return ChatTransformers(
            model=str(path) if looks_local else model,
            use_chat_template=False,
            batch_concurrent_calls=True if concurrency > 1 else None,
            device=device,
            dtype=dtype,
            attn_implementation=attn_implementation,
            prefix_cache_mib=prefix_cache_mib,
            max_batch_rows=max_batch_rows,
            **budget,
        )
    except AdaptiveRAGError:
        raise
    except Exception as exc:  # transformers, safetensors and torch raise many kinds
        if looks_local:
            msg = (
                f"Could not load the model directory {str(path)!r} ({_one_line(exc)}). "
                "Expected a complete model directory whose weights and tokenizer load with "
                "transformers. Fix: its files may be corrupt or cut short: download or "
                "save the model again."
            )
        else:
            msg = (
                f"Could not load model {model!r} ({_one_line(exc)}). Expected a hub id that "
                "can be downloaded or is in the local cache. Fix: download the model and "
                "pass its directory (offline, set HF_HUB_OFFLINE=1 to fail at once)."
            )
        raise AdaptiveRAGError(msg) from None
