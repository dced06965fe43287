"""Evaluation: dataset loaders, passage corpora, metrics, the runner and calibration.

Loaders read the benchmarks' native files; the runner answers them with any method,
resumably, and summarises runs; calibration sweeps a method's retrieval threshold.

Names load on first use (PEP 562): importing one submodule, or the command line's
parsers, does not load the model stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_adaptive_rag.evaluation.agreement import (
        Difference,
        RunAgreement,
        compare_records,
        compare_results,
    )
    from langchain_adaptive_rag.evaluation.calibration import (
        THRESHOLD_FIELDS,
        CalibrationPoint,
        CalibrationRule,
        calibrate_threshold,
        choose_threshold,
    )
    from langchain_adaptive_rag.evaluation.corpus import (
        Qrel,
        iter_dpr_passages,
        iter_jsonl_passages,
        iter_passages,
        iter_qrels,
        load_qrels,
    )
    from langchain_adaptive_rag.evaluation.datasets import (
        DATASET_NAMES,
        Example,
        JSONValue,
        canonical_dataset_name,
        load_2wikimultihopqa,
        load_dataset,
        load_hotpotqa,
        load_iirc,
        load_musique,
        load_open_qa,
        load_popqa,
        load_retrievalqa,
        load_strategyqa,
        read_id_aliases,
    )
    from langchain_adaptive_rag.evaluation.metrics import (
        AnswerScores,
        DecisionScores,
        answer_match,
        exact_match,
        f1_precision_recall,
        f1_score,
        mean_scores,
        normalize_answer,
        parse_yes_no,
        retrieval_decision_scores,
        score_answer,
        score_example,
        strategyqa_accuracy,
    )
    from langchain_adaptive_rag.evaluation.overrides import (
        config_class_for,
        config_to_dict,
        parse_config_overrides,
    )
    from langchain_adaptive_rag.evaluation.results import (
        read_run,
        settings_fingerprint,
    )
    from langchain_adaptive_rag.evaluation.runner import (
        RunReport,
        RunSettings,
        SummaryRow,
        check_run_dir,
        compare_runs,
        evaluate_method,
        example_passages,
        format_table,
        read_results,
        run_evaluation,
        summarize,
        write_table,
    )
    from langchain_adaptive_rag.evaluation.setup import (
        DEFAULT_PROMPTS,
        EvalSetup,
        load_chat_model,
        prepare_evaluation,
    )

_EXPORTS: dict[str, str] = {
    "DATASET_NAMES": "langchain_adaptive_rag.evaluation.datasets",
    "DEFAULT_PROMPTS": "langchain_adaptive_rag.evaluation.setup",
    "THRESHOLD_FIELDS": "langchain_adaptive_rag.evaluation.calibration",
    "AnswerScores": "langchain_adaptive_rag.evaluation.metrics",
    "CalibrationPoint": "langchain_adaptive_rag.evaluation.calibration",
    "CalibrationRule": "langchain_adaptive_rag.evaluation.calibration",
    "DecisionScores": "langchain_adaptive_rag.evaluation.metrics",
    "Difference": "langchain_adaptive_rag.evaluation.agreement",
    "EvalSetup": "langchain_adaptive_rag.evaluation.setup",
    "Example": "langchain_adaptive_rag.evaluation.datasets",
    "JSONValue": "langchain_adaptive_rag.evaluation.datasets",
    "Qrel": "langchain_adaptive_rag.evaluation.corpus",
    "RunAgreement": "langchain_adaptive_rag.evaluation.agreement",
    "RunReport": "langchain_adaptive_rag.evaluation.runner",
    "RunSettings": "langchain_adaptive_rag.evaluation.runner",
    "SummaryRow": "langchain_adaptive_rag.evaluation.runner",
    "answer_match": "langchain_adaptive_rag.evaluation.metrics",
    "calibrate_threshold": "langchain_adaptive_rag.evaluation.calibration",
    "canonical_dataset_name": "langchain_adaptive_rag.evaluation.datasets",
    "check_run_dir": "langchain_adaptive_rag.evaluation.runner",
    "choose_threshold": "langchain_adaptive_rag.evaluation.calibration",
    "compare_records": "langchain_adaptive_rag.evaluation.agreement",
    "compare_results": "langchain_adaptive_rag.evaluation.agreement",
    "compare_runs": "langchain_adaptive_rag.evaluation.runner",
    "config_class_for": "langchain_adaptive_rag.evaluation.overrides",
    "config_to_dict": "langchain_adaptive_rag.evaluation.overrides",
    "evaluate_method": "langchain_adaptive_rag.evaluation.runner",
    "exact_match": "langchain_adaptive_rag.evaluation.metrics",
    "example_passages": "langchain_adaptive_rag.evaluation.runner",
    "f1_precision_recall": "langchain_adaptive_rag.evaluation.metrics",
    "f1_score": "langchain_adaptive_rag.evaluation.metrics",
    "format_table": "langchain_adaptive_rag.evaluation.runner",
    "iter_dpr_passages": "langchain_adaptive_rag.evaluation.corpus",
    "iter_jsonl_passages": "langchain_adaptive_rag.evaluation.corpus",
    "iter_passages": "langchain_adaptive_rag.evaluation.corpus",
    "iter_qrels": "langchain_adaptive_rag.evaluation.corpus",
    "load_2wikimultihopqa": "langchain_adaptive_rag.evaluation.datasets",
    "load_chat_model": "langchain_adaptive_rag.evaluation.setup",
    "load_dataset": "langchain_adaptive_rag.evaluation.datasets",
    "load_hotpotqa": "langchain_adaptive_rag.evaluation.datasets",
    "load_iirc": "langchain_adaptive_rag.evaluation.datasets",
    "load_musique": "langchain_adaptive_rag.evaluation.datasets",
    "load_open_qa": "langchain_adaptive_rag.evaluation.datasets",
    "load_popqa": "langchain_adaptive_rag.evaluation.datasets",
    "load_qrels": "langchain_adaptive_rag.evaluation.corpus",
    "load_retrievalqa": "langchain_adaptive_rag.evaluation.datasets",
    "load_strategyqa": "langchain_adaptive_rag.evaluation.datasets",
    "mean_scores": "langchain_adaptive_rag.evaluation.metrics",
    "normalize_answer": "langchain_adaptive_rag.evaluation.metrics",
    "parse_config_overrides": "langchain_adaptive_rag.evaluation.overrides",
    "parse_yes_no": "langchain_adaptive_rag.evaluation.metrics",
    "prepare_evaluation": "langchain_adaptive_rag.evaluation.setup",
    "read_id_aliases": "langchain_adaptive_rag.evaluation.datasets",
    "read_results": "langchain_adaptive_rag.evaluation.runner",
    "read_run": "langchain_adaptive_rag.evaluation.results",
    "retrieval_decision_scores": "langchain_adaptive_rag.evaluation.metrics",
    "run_evaluation": "langchain_adaptive_rag.evaluation.runner",
    "score_answer": "langchain_adaptive_rag.evaluation.metrics",
    "score_example": "langchain_adaptive_rag.evaluation.metrics",
    "settings_fingerprint": "langchain_adaptive_rag.evaluation.results",
    "strategyqa_accuracy": "langchain_adaptive_rag.evaluation.metrics",
    "summarize": "langchain_adaptive_rag.evaluation.runner",
    "write_table": "langchain_adaptive_rag.evaluation.runner",
}
"""Where each public name lives."""

__all__ = [
    "DATASET_NAMES",
    "DEFAULT_PROMPTS",
    "THRESHOLD_FIELDS",
    "AnswerScores",
    "CalibrationPoint",
    "CalibrationRule",
    "DecisionScores",
    "Difference",
    "EvalSetup",
    "Example",
    "JSONValue",
    "Qrel",
    "RunAgreement",
    "RunReport",
    "RunSettings",
    "SummaryRow",
    "answer_match",
    "calibrate_threshold",
    "canonical_dataset_name",
    "check_run_dir",
    "choose_threshold",
    "compare_records",
    "compare_results",
    "compare_runs",
    "config_class_for",
    "config_to_dict",
    "evaluate_method",
    "exact_match",
    "example_passages",
    "f1_precision_recall",
    "f1_score",
    "format_table",
    "iter_dpr_passages",
    "iter_jsonl_passages",
    "iter_passages",
    "iter_qrels",
    "load_2wikimultihopqa",
    "load_chat_model",
    "load_dataset",
    "load_hotpotqa",
    "load_iirc",
    "load_musique",
    "load_open_qa",
    "load_popqa",
    "load_qrels",
    "load_retrievalqa",
    "load_strategyqa",
    "mean_scores",
    "normalize_answer",
    "parse_config_overrides",
    "parse_yes_no",
    "prepare_evaluation",
    "read_id_aliases",
    "read_results",
    "read_run",
    "retrieval_decision_scores",
    "run_evaluation",
    "score_answer",
    "score_example",
    "settings_fingerprint",
    "strategyqa_accuracy",
    "summarize",
    "write_table",
]


def __getattr__(name: str) -> object:
    """Import a public name on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module 'langchain_adaptive_rag.evaluation' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
