r"""The text protocol of an agentic searcher: its tags, prompt, documents and answer.

A search agent writes its reasoning as plain text and asks for knowledge by writing a
query between two tags (``<search> ... </search>``); generation stops at the closing tag,
the documents found go back into the text between the protocol's result tags, and the
model goes on, until it writes its answer (``<answer> ... </answer>``, or
``\boxed{...}``). A [`SearchProtocol`][] holds everything that differs between the
searchers: the prompt, the tags and stop strings, how a turn is read (which query, what
an empty or repeated query does, what happens when no tag comes), how documents are
written back and how the answer is read. The presets that follow each official code are
in [`search_presets`][langchain_adaptive_rag.graphs.search_presets]; the loop itself is
[`SearchAgentPolicy`][langchain_adaptive_rag.graphs.search_agent.SearchAgentPolicy].
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.state import RetrievedDoc

__all__ = [
    "AnswerReader",
    "ChatTemplating",
    "SearchDemonstration",
    "SearchProtocol",
    "SearchStep",
    "TurnAction",
    "format_documents",
    "read_answer",
    "read_turn",
]

AnswerReader = Literal["last_block", "last_turn_block", "first_block_boxed", "last_boxed"]
r"""How the answer is read from the whole generated text:

- ``last_block``: the last ``<answer> ... </answer>`` block, stripped (Search-R1,
  ZeroSearch, AutoRefine);
- ``last_turn_block``: the text after the last opening answer tag of the final turn, when
  that turn stopped at the closing tag (R1-Searcher);
- ``first_block_boxed``: the first answer block, then the last ``\boxed{...}`` inside it,
  braces counted (ReSearch);
- ``last_boxed``: the last ``\boxed{...}`` of a line (greedy within the line), then the
  last ``\text{...}`` inside it, with ``()`` stripped (Search-o1).
"""


class ChatTemplating(Protocol):
    """What [`SearchProtocol.chat_templated`][] needs of a tokenizer (transformers')."""

    chat_template: Any

    def apply_chat_template(
        self,
        conversation: list[dict[str, str]],
        *,
        add_generation_prompt: bool,
        tokenize: bool,
    ) -> Any:
        """The conversation in the model's chat format."""


@dataclass(frozen=True)
class SearchStep:
    """One search of a demonstration: the thought before it, the query, what it found."""

    thought: str
    query: str
    documents: tuple[tuple[str, str], ...]
    """``(title, text)`` of each document found."""


@dataclass(frozen=True)
class SearchDemonstration:
    """A worked search trace shown before the question (for base models)."""

    question: str
    steps: tuple[SearchStep, ...]
    conclusion: str
    """The thought after the last search, before the answer."""
    answer: str


@dataclass(frozen=True)
class SearchProtocol:
    r"""One agentic searcher's protocol (every field is plain text or a rule's name).

    The presets (``search_presets.SEARCH_PROTOCOLS``) follow the official code of each
    searcher; ``dataclasses.replace(SEARCH_R1, ...)`` makes a variant with other tags or
    prompt.
    """

    name: str
    """The protocol's name, shown in results and events."""
    prompt: str
    """The prompt before the generated text; fields ``{question}`` and, when the prompt
    states the search limit, ``{max_searches}``."""
    query_tags: tuple[str, str]
    """The tags a query is written between (``("<search>", "</search>")``)."""
    answer_tags: tuple[str, str]
    r"""The tags the answer is written between (``("<answer>", "</answer>")``;
    Search-o1: ``("\\boxed{", "}")``)."""
    result_tags: tuple[str, str]
    """The tags the documents are written between (``("<information>",
    "</information>")``); ``result_template`` writes them."""
    stop: tuple[str, ...]
    """Stop strings of a turn: the query's closing tag, and the answer's where the
    official code stops there."""
    result_template: str
    """What follows a query's closing tag in the text; field ``{documents}`` (the
    formatted documents, or a message)."""
    doc_template: str
    """One document; fields ``{index}`` (from 1), ``{title}`` (``metadata["title"]``),
    ``{text}``, and ``{json}`` (Search-o1's JSON record of the page)."""
    doc_separator: str = ""
    """Written between two formatted documents."""
    strip_documents: bool = False
    """Strip the joined documents before they go into ``result_template``."""
    no_documents: str = ""
    """The documents' text when the retriever found none."""
    answer_reader: AnswerReader = "last_block"
    """How the answer is read (see [`AnswerReader`][])."""
    no_answer: str = ""
    """The answer when none was given (R1-Searcher: ``"I don't know."``)."""
    question_mark: bool = False
    """Strip the question and end it with ``?`` when it does not (Search-R1's data code)."""
    strip_turn: bool = False
    """Strip a turn that asks for a search before its closing tag and the documents
    follow it (R1-Searcher)."""
    query_from: Literal["first_open", "last_open"] = "first_open"
    """Which opening tag a query starts after, when a turn has several: the first
    (non-greedy regular expressions: Search-o1, Search-R1) or the last (a split on the
    tag: R1-Searcher, ReSearch)."""
    unopened_query: Literal["invalid", "empty"] = "invalid"
    """A turn that stops at the query's closing tag with no opening tag before it: no
    action (``invalid``), or an ``empty`` query (ReSearch's extraction yields ``""``)."""
    strip_query: bool = True
    """Strip the query's surrounding whitespace."""
    query_replacements: tuple[tuple[str, str], ...] = ()
    """Replacements made in a query before it is sent (R1-Searcher drops quotes)."""
    no_action: Literal["end", "retry"] = "end"
    """A turn with neither a query nor an answer: ``end`` the run, or ``retry``: write
    ``invalid_message`` and let the model go on (Search-R1)."""
    invalid_message: str = ""
    """The message a ``retry`` writes."""
    empty_query: Literal["end", "search", "message"] = "end"
    """A query that is empty once cleaned: ``end`` the run, ``search`` (the retriever
    is sent the blank query and finds nothing) or write ``empty_query_message`` as the
    documents."""
    empty_query_message: str = ""
    """The documents' text for an empty query under ``empty_query="message"``."""
    repeat_message: str | None = None
    """Written instead of searching when the query was searched before in this run;
    ``None``: search again."""
    limit_message: str | None = None
    """Written instead of searching once ``max_searches`` searches ran; ``None``: the
    run ends there."""
    max_searches: int | None = None
    """Searches a run may make (``None``: the turn limit and the token budget bound them)."""
    max_turns: int | None = None
    """Turns (generations) a run may make (``None``: the config's ``max_rounds``)."""
    turn_max_tokens: int = 512
    """Tokens one turn may generate."""
    reason_in_documents: bool = False
    """Condense the documents with Search-o1's Reason-in-Documents step before they are
    inserted, unless the config says otherwise (Search-o1: on)."""
    answer_opener: str = "<answer>"
    """Written after the text to force an answer (``SearchAgentConfig.force_answer``)."""
    answer_closer: str = "</answer>"
    """Where a forced answer ends."""
    thought_format: str = "{thought}"
    """How a demonstration's thought is written; field ``{thought}``."""
    answer_format: str = "<answer> {answer} </answer>"
    """How a demonstration's answer is written; field ``{answer}``."""
    case_start: str = ""
    """Where the question's part of ``prompt`` starts (``""``: the whole prompt): with
    demonstrations, that part is shown for each one, followed by its trace."""
    demonstrations: tuple[SearchDemonstration, ...] = ()
    """Worked traces shown before the question (none in the official prompts)."""
    source: str = ""
    """Where the protocol is taken from (repository, commit, files)."""

    def __post_init__(self) -> None:
        for name in ("query_tags", "answer_tags", "result_tags"):
            tags = getattr(self, name)
            if not (isinstance(tags, tuple) and len(tags) == 2 and all(tags)):
                msg = (
                    f"SearchProtocol.{name} must be a pair of non-empty strings (opening, "
                    f"closing), got {tags!r}. Fix: {name}=('<search>', '</search>')."
                )
                raise AdaptiveRAGError(msg)
        if self.query_tags[1] not in self.stop:
            msg = (
                f"SearchProtocol.stop={self.stop!r} lacks the query's closing tag "
                f"{self.query_tags[1]!r}: a turn would never stop at a query. Fix: "
                f"stop=({self.query_tags[1]!r}, ...)."
            )
            raise AdaptiveRAGError(msg)
        if "{question}" not in self.prompt:
            msg = f"SearchProtocol.prompt must contain the field {{question}}, got {self.prompt!r}."
            raise AdaptiveRAGError(msg)
        if "{documents}" not in self.result_template:
            msg = (
                "SearchProtocol.result_template must contain the field {documents}, got "
                f"{self.result_template!r}."
            )
            raise AdaptiveRAGError(msg)
        for name in ("max_searches", "max_turns"):
            value = getattr(self, name)
            if value is not None and value < 1:
                msg = f"SearchProtocol.{name} must be None or >= 1, got {value!r}."
                raise AdaptiveRAGError(msg)
        if self.case_start not in self.prompt.split("{question}")[0]:
            msg = (
                f"SearchProtocol.case_start={self.case_start!r} does not occur in the prompt "
                "before {question}. Fix: the text the question's part of the prompt starts with."
            )
            raise AdaptiveRAGError(msg)
        if self.turn_max_tokens < 1:
            msg = f"SearchProtocol.turn_max_tokens must be >= 1, got {self.turn_max_tokens!r}."
            raise AdaptiveRAGError(msg)

    def render_prompt(
        self, question: str, max_searches: int | None, *, condensed: bool = False
    ) -> str:
        """The prompt for ``question``, after the demonstrations when there are some.

        Args:
            question: The question.
            max_searches: The search limit, where the prompt states it.
            condensed: The documents are condensed before they are inserted
                (Reason-in-Documents): the demonstrations show their texts joined, not
                the formatted documents.

        Returns:
            The prompt.
        """
        limit = "" if max_searches is None else str(max_searches)
        prompt = self.prompt.replace("{max_searches}", limit)
        at = prompt.find(self.case_start) if self.demonstrations else 0
        head, case = prompt[:at], prompt[at:]
        shown = "".join(
            self._case(case, demo.question)
            + self.render_demonstration(demo, condensed=condensed)
            + "\n\n"
            for demo in self.demonstrations
        )
        return head + shown + self._case(case, question)

    def _case(self, case: str, question: str) -> str:
        if self.question_mark:
            question = question.strip()
            if not question.endswith("?"):
                question += "?"
        return case.replace("{question}", question)

    def render_demonstration(self, demo: SearchDemonstration, *, condensed: bool = False) -> str:
        """A demonstration's trace in this protocol's tags, documents and answer form.

        Args:
            demo: The demonstration.
            condensed: Show each search's documents as their texts joined (what
                Reason-in-Documents inserts), not formatted.

        Returns:
            The trace, as the loop would have written it.
        """
        opening, closing = self.query_tags
        parts = []
        for step in demo.steps:
            docs: list[RetrievedDoc] = [
                {"id": f"{step.query}-{i}", "text": text, "metadata": {"title": title}}
                for i, (title, text) in enumerate(step.documents)
            ]
            found = (
                " ".join(text for _, text in step.documents)
                if condensed
                else (format_documents(self, docs))
            )
            thought = self.thought_format.replace("{thought}", step.thought)
            parts.append(
                f"{thought}\n{opening}{step.query}{closing}"
                + self.result_template.format(documents=found)
            )
        thought = self.thought_format.replace("{thought}", demo.conclusion)
        parts.append(f"{thought}\n" + self.answer_format.replace("{answer}", demo.answer))
        return "".join(parts)

    def chat_templated(self, tokenizer: ChatTemplating) -> SearchProtocol:
        """This protocol with its prompt as a user turn in the tokenizer's chat template.

        The presets' prompts are the official texts as written. A searcher trained from a
        chat or instruct model reads them inside its chat template: Search-R1's
        ``infer.py`` (PeterGriffinJin/Search-R1@a14dc3a, L88-L89) applies the tokenizer's
        template to the prompt as one user message, with the generation prompt, and the
        model's turns continue after it. The question and the search limit stay
        placeholders, filled when a run starts.

        Args:
            tokenizer: The model's tokenizer (``ChatTransformers(...).hf_tokenizer``).

        Returns:
            A copy named ``<name>_chat`` whose prompt is the templated text.

        Raises:
            AdaptiveRAGError: The tokenizer has no chat template, or the protocol shows
                demonstrations (which the template would put inside the user turn).
        """
        if not tokenizer.chat_template:
            msg = (
                f"Received a tokenizer without a chat template for protocol {self.name!r}; "
                "expected one that has a template. Fix: use the protocol as it is (its "
                "prompt is the base-model text), or load the model's own tokenizer."
            )
            raise AdaptiveRAGError(msg)
        if self.demonstrations:
            msg = (
                f"Protocol {self.name!r} shows {len(self.demonstrations)} demonstrations; "
                "expected none inside a chat template. Fix: use the protocol without "
                "demonstrations (dataclasses.replace(protocol, demonstrations=())) on a "
                "chat model, or keep the plain prompt for a base model."
            )
            raise AdaptiveRAGError(msg)
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": self.prompt}], add_generation_prompt=True, tokenize=False
        )
        return replace(self, name=f"{self.name}_chat", prompt=str(prompt))

    def clean_query(self, query: str) -> str:
        """``query`` as it is sent: the replacements made, stripped if the protocol strips."""
        for old, new in self.query_replacements:
            query = query.replace(old, new)
        return query.strip() if self.strip_query else query


@dataclass(frozen=True)
class TurnAction:
    """What one turn asks for."""

    kind: Literal["search", "answer", "none"]
    """``search``: it ends with a query; ``answer``: it ends its answer; ``none``: it
    stopped at neither (end of sequence, its token budget, or a closing tag that no
    opening tag came before)."""
    query: str | None = None
    """The query as written between the tags (``search`` only), not yet cleaned."""


def read_turn(protocol: SearchProtocol, text: str, stop_string: str | None) -> TurnAction:
    """What a turn asks for, from its text and the stop string it ended at.

    Args:
        protocol: The searcher's protocol.
        text: The turn's generated text, without the stop string.
        stop_string: The stop string the turn ended at (``None``: end of sequence or the
            token budget).

    Returns:
        ``search`` with the query when the turn stopped at the query's closing tag after
        an opening one (the first or the last opening tag, as ``query_from`` says; with
        none, an empty query under ``unopened_query="empty"``);
        ``answer`` when it stopped at the answer's closing tag after an opening one;
        else ``none``.
    """
    opening, closing = protocol.query_tags
    if stop_string == closing:
        at = text.find(opening) if protocol.query_from == "first_open" else text.rfind(opening)
        if at >= 0:
            return TurnAction("search", text[at + len(opening) :])
        return (
            TurnAction("search", "") if protocol.unopened_query == "empty" else TurnAction("none")
        )
    answer_opening, answer_closing = protocol.answer_tags
    if stop_string == answer_closing and answer_opening in text:
        return TurnAction("answer")
    return TurnAction("none")


def _document_record(index: int, doc: RetrievedDoc) -> str:
    """Search-o1's JSON record of one page, with the fields a retrieved passage has."""
    record = {"id": index, "title": _title(doc), "context": doc["text"]}
    return json.dumps(record, ensure_ascii=False, indent=2)


def _title(doc: RetrievedDoc) -> str:
    title = doc.get("metadata", {}).get("title")
    return title if isinstance(title, str) else ""


def format_documents(protocol: SearchProtocol, docs: Sequence[RetrievedDoc]) -> str:
    """The documents as the protocol writes them between its result tags.

    Args:
        protocol: The searcher's protocol.
        docs: The retrieved documents, in rank order.

    Returns:
        Each document in ``doc_template``, joined by ``doc_separator`` (stripped when the
        protocol strips), or ``no_documents`` when there are none.
    """
    if not docs:
        return protocol.no_documents
    joined = protocol.doc_separator.join(
        protocol.doc_template.format(
            index=index,
            title=_title(doc),
            text=doc["text"],
            json=_document_record(index, doc) if "{json}" in protocol.doc_template else "",
        )
        for index, doc in enumerate(docs, start=1)
    )
    return joined.strip() if protocol.strip_documents else joined


_BOXED = re.compile(r"\\boxed\{(.*)\}")
_TEXT = re.compile(r"\\text\{(.*)\}")


def _last_boxed_braced(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` in ``text``, its braces counted."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    for at in range(start + len("\\boxed"), len(text)):
        if text[at] == "{":
            depth += 1
        elif text[at] == "}":
            depth -= 1
            if depth == 0:
                return text[start + len("\\boxed{") : at]
    return None


def read_answer(
    protocol: SearchProtocol, text: str, last_turn: str, last_stop: str | None
) -> str | None:
    """The answer the protocol reads from a run's text.

    Args:
        protocol: The searcher's protocol.
        text: Everything generated and inserted after the prompt.
        last_turn: The final turn's text (without its stop string).
        last_stop: The stop string the final turn ended at.

    Returns:
        The answer (see [`AnswerReader`][]), or ``None`` when there is none.
    """
    opening, closing = protocol.answer_tags
    found: str | None = None
    if protocol.answer_reader == "last_block":
        blocks = re.findall(re.escape(opening) + "(.*?)" + re.escape(closing), text, re.DOTALL)
        found = blocks[-1].strip() if blocks else None
    elif protocol.answer_reader == "last_turn_block":
        if last_stop == closing and opening in last_turn:
            found = last_turn.split(opening)[-1]
    elif protocol.answer_reader == "first_block_boxed":
        block = re.search(
            re.escape(opening) + "(.*?)" + re.escape(closing), text.strip(), re.DOTALL
        )
        found = _last_boxed_braced(block.group(1)) if block else None
    else:  # last_boxed
        boxed = _BOXED.findall(text)
        if boxed:
            inner = _TEXT.findall(boxed[-1])
            found = (inner[-1] if inner else boxed[-1]).strip("()")
    return found
