"""Question-answering datasets in their native file formats, as [`Example`][] objects.

Supported files (the format is detected from the content; the name only labels and checks):

- HotpotQA ``hotpot_dev_distractor_v1.json`` / ``hotpot_dev_fullwiki_v1.json`` and
  2WikiMultihopQA ``dev.json``: a JSON list of ``{_id, question, answer, supporting_facts,
  context: [[title, [sentence, ...]]], type, level}``. 2WikiMultihopQA aliases come from
  ``id_aliases.json`` (lines ``{Q_id, aliases, demonyms}``), joined by the question's
  ``answer_id``: the gold set is the answer plus the aliases and demonyms of that id, as in
  the official ``2wikimultihop_evaluate_v1.1.py``.
- IIRC ``dev.json``: a JSON list of passages ``{title, text, links, questions: [...]}``; each
  question's answer is ``{type: span|value|binary|none, answer_spans | answer_value}``. Span
  answers become alternative golds (as DRAGIN scores IIRC); unanswerable questions are
  skipped unless asked for, then their gold is ``"noanswer"``.
- StrategyQA ``strategyqa_train.json`` (JSON list) or JSON lines with a boolean ``answer``.
- Open-domain QA JSON lines: NaturalQuestions-open ``{question, answer: [...]}``, DPR-style
  ``{question, answers: [...], ctxs?}``, and re-serialised rows ``{id, dataset, question,
  answers, paragraphs?: [{idx, title, text, is_supporting}], context?, type?, level?}``;
  DPR ``*.qa.csv`` (``question<TAB>['answer', ...]``); the official SQuAD json
  (``{"data": [...]}``); TriviaQA's own json (``{"Data": [...]}``).
- PopQA ``popQA.tsv`` (tab-separated with a header; ``possible_answers`` a JSON list).
- RetrievalQA ``retrievalqa.jsonl``: ``{data_source, question_id, question, ground_truth,
  context: [{title, text}], param_knowledge_answerable: 0|1}``.
- MuSiQue ``musique_ans_v1.0_dev.jsonl``: ``{id, question, answer, answer_aliases,
  paragraphs: [{idx, title, paragraph_text, is_supporting}], answerable}``.

A malformed file raises ``DatasetFormatError``, which
names the file, the line (JSON lines, TSV) or record (JSON), the field, what was received
and what was expected, whatever the file holds: bytes that are not UTF-8, JSON nested too
deep for the parser, integers longer than Python converts, oversized TSV fields (see
``reading``). A whole SQuAD or TriviaQA
document written on one line is read as that document, not as one JSON line.
"""

from __future__ import annotations

from langchain_adaptive_rag.evaluation.datasets.example import (
    DATASET_NAMES,
    Example,
    JSONValue,
    canonical_dataset_name,
)
from langchain_adaptive_rag.evaluation.datasets.loaders import (
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

__all__ = [
    "DATASET_NAMES",
    "Example",
    "JSONValue",
    "canonical_dataset_name",
    "load_2wikimultihopqa",
    "load_dataset",
    "load_hotpotqa",
    "load_iirc",
    "load_musique",
    "load_open_qa",
    "load_popqa",
    "load_retrievalqa",
    "load_strategyqa",
    "read_id_aliases",
]
