"""The toy world as an evaluation dataset for the harness.

Its questions become [`Example`][] objects, so every
method runs on them with [`evaluate_method`][] and every threshold is calibrated with
[`calibrate_threshold`][], exactly as on a real benchmark. Each example carries its gold
passages and a retrieval-need label (``param_knowledge_answerable`` is 1 when the toy
model knows every hop), so retrieval-decision accuracy is measurable too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from langchain_core.documents import Document

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.datasets import Example
from langchain_adaptive_rag.toyworld.questions import ToyQuestion

__all__ = ["split_dev_test", "toy_examples"]


def toy_examples(questions: Sequence[ToyQuestion], corpus: Sequence[Document]) -> list[Example]:
    """Toy questions as evaluation examples.

    Args:
        questions: Toy questions (for example [`toy_questions()`][toy_questions]).
        corpus: The toy corpus ([`toy_corpus()`][toy_corpus]), where the gold passages are
            looked up.

    Returns:
        One example per question (dataset ``"toyworld"``, the short answer as gold, the
        question's passages as ``supporting``, its type, and ``extra`` with the category,
        the per-hop knowledge and the gold chain of thought).

    Raises:
        AdaptiveRAGError: A question names a passage that is not in ``corpus``.
    """
    by_id = {str(d.metadata.get("id", d.id)): d for d in corpus}
    examples = []
    for q in questions:
        missing = [i for i in q.supporting_ids if i not in by_id]
        if missing:
            msg = (
                f"Toy question {q.id!r} names passages {missing} that the corpus does not "
                "have. Expected the corpus of the question's world: pass toy_corpus(seed) "
                "for the seed the questions came from."
            )
            raise AdaptiveRAGError(msg)
        examples.append(
            Example(
                id=q.id,
                question=q.question,
                answers=(q.answer,),
                dataset="toyworld",
                supporting=tuple(by_id[i] for i in q.supporting_ids),
                type=q.type,
                param_knowledge_answerable=int(q.answer_known),
                extra={
                    "category": q.category,
                    "hops_known": list(q.hops_known),
                    "gold_text": q.gold_text,
                },
            )
        )
    return examples


def split_dev_test(
    examples: Sequence[Example], dev_fraction: float = 0.3, seed: int = 0
) -> tuple[list[Example], list[Example]]:
    """A seeded dev/test split that keeps each category's share (for calibration).

    Args:
        examples: The examples.
        dev_fraction: Share of each category that goes to dev.
        seed: Seed of the shuffle.

    Returns:
        ``(dev, test)``, each in the original order.

    Raises:
        AdaptiveRAGError: ``dev_fraction`` is not in (0, 1).
    """
    if not 0.0 < dev_fraction < 1.0:
        msg = f"dev_fraction must be in (0, 1), got {dev_fraction}."
        raise AdaptiveRAGError(msg)
    rng = random.Random(seed)
    dev_ids: set[str] = set()
    categories = sorted({str(e.extra.get("category")) for e in examples})
    for category in categories:
        ids = [e.id for e in examples if str(e.extra.get("category")) == category]
        rng.shuffle(ids)
        dev_ids.update(ids[: round(len(ids) * dev_fraction)])
    return (
        [e for e in examples if e.id in dev_ids],
        [e for e in examples if e.id not in dev_ids],
    )
