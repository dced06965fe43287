"""Training text of the toy model: prompts in the graphs' format and a seeded example mix.

Every question example is ``build_prompt(TOY_PROMPTS, question, prefix, docs)`` followed
by the rest of the gold answer and a newline; only the answer tokens are trained. The mix
(``ExampleMix``) combines closed-book questions over known facts (the evaluated
question forms are taught on training-only films and family lines), known passages as
plain text, known questions over context (sometimes a context that contradicts memory:
the context wins), reading practice over fresh entities from disjoint pools, grandfather
practice with the whole family line in context, practice that continues an accepted first
step with passages about later steps only, the "[Yes]"/"[No]" retrieval decision, and
(when its weight is set) search traces in ``TOY_SEARCH_PROTOCOL``: one search for the
entity of each reasoning step, the documents found (untrained), the step read from them,
and the answer. Unknown facts never enter it.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from langchain_adaptive_rag.graphs.search_protocol import SearchProtocol, format_documents
from langchain_adaptive_rag.graphs.ta_are import DECISION_INSTRUCTION
from langchain_adaptive_rag.prompts import build_prompt
from langchain_adaptive_rag.state import RetrievedDoc
from langchain_adaptive_rag.toyworld.corpus import build_corpus, film_passage, person_passage
from langchain_adaptive_rag.toyworld.prompts import TOY_PROMPTS, TOY_SEARCH_PROTOCOL
from langchain_adaptive_rag.toyworld.questions import (
    ToyQuestion,
    compositional_question,
    iter_questions,
    training_questions,
)
from langchain_adaptive_rag.toyworld.world import (
    PRACTICE_POOLS,
    WORLD_POOLS,
    YEARS,
    Line,
    NamePools,
    ToyWorld,
    WorldSizes,
    generate_world,
)

__all__ = [
    "ExampleMix",
    "TrainingExample",
    "decision_prompt",
    "knowledge_text",
    "qa_example",
    "search_example",
    "tokenizer_text",
]

PRACTICE_SIZES = WorldSizes(
    known_films=12,
    known_films_unknown_director=0,
    unknown_films=0,
    family_lines=5,
    unknown_fathers=0,
    unknown_children=0,
    extra_people=6,
    training_films=0,
    training_lines=0,
)
"""Size of one fresh practice world."""

MIXED_POOLS = NamePools(
    first_names=WORLD_POOLS.first_names + PRACTICE_POOLS.first_names,
    last_names=WORLD_POOLS.last_names + PRACTICE_POOLS.last_names,
    title_adjectives=WORLD_POOLS.title_adjectives + PRACTICE_POOLS.title_adjectives,
    title_nouns=WORLD_POOLS.title_nouns + PRACTICE_POOLS.title_nouns,
    cities=WORLD_POOLS.cities + PRACTICE_POOLS.cities,
    jobs=WORLD_POOLS.jobs + PRACTICE_POOLS.jobs,
)
"""Both pools: practice entities drawn from it are new combinations of known words."""


@dataclass(frozen=True)
class TrainingExample:
    """One training sequence: an untrained prompt and a trained target.

    More pairs of untrained and trained text may follow (a search trace's documents and
    the turn that reads them).
    """

    prompt: str
    """Text whose tokens get no loss (may be empty: the target is then plain text)."""
    target: str
    """Text whose tokens are trained."""
    kind: str
    """Which part of the mix produced it."""
    continuation: tuple[tuple[str, str], ...] = ()
    """``(untrained, trained)`` pairs written after ``target``, in order."""

    @property
    def text(self) -> str:
        """The whole training text."""
        return self.prompt + self.target + "".join(a + b for a, b in self.continuation)

    def trained_spans(self) -> list[tuple[int, int]]:
        """Character ranges ``[start, end)`` of ``text`` whose tokens are trained."""
        spans = [(len(self.prompt), len(self.prompt) + len(self.target))]
        at = spans[0][1]
        for untrained, trained in self.continuation:
            at += len(untrained)
            spans.append((at, at + len(trained)))
            at += len(trained)
        return spans


def _docs(texts: Sequence[str]) -> list[RetrievedDoc]:
    return [{"id": f"ctx-{i}", "text": t, "metadata": {}} for i, t in enumerate(texts)]


def qa_example(
    question: ToyQuestion,
    passages: Sequence[str] = (),
    *,
    accepted_steps: int = 0,
    kind: str = "qa",
) -> TrainingExample:
    """A question in the graphs' prompt format with its gold answer as the target.

    Args:
        question: The question.
        passages: Passages of the context block (none: closed-book).
        accepted_steps: Leading reasoning steps already accepted (part of the prompt, as
            after a mid-answer retrieval).
        kind: Label of the example.

    Returns:
        The example; ``prompt + target`` is the full training text.
    """
    accepted = "".join(f" {step}" for step in question.steps[:accepted_steps])
    rest = [*question.steps[accepted_steps:], f"So the answer is {question.answer}."]
    prompt = build_prompt(TOY_PROMPTS, question.question, accepted, _docs(passages))
    return TrainingExample(prompt=prompt, target=" " + " ".join(rest) + "\n", kind=kind)


def search_example(
    question: ToyQuestion,
    queries: Sequence[str],
    found: Sequence[Sequence[tuple[str, str]]],
    *,
    protocol: SearchProtocol = TOY_SEARCH_PROTOCOL,
    kind: str = "search",
) -> TrainingExample:
    """A search trace: one search a reasoning step, the step read from what it found.

    The model's turns are trained: a query for the first step (after an empty thought),
    each step's sentence followed by the next query, and the last step with the answer
    sentence and the answer block. The prompt and the documents the loop writes back are
    not. The text equals ``protocol.render_prompt`` followed by
    ``protocol.render_demonstration`` of the same searches.

    Args:
        question: The question (its ``steps`` are the thoughts).
        queries: One query a step (the entity the step is about).
        found: The ``(title, text)`` documents each search returns.
        protocol: The search protocol the trace is written in.
        kind: Label of the example.

    Returns:
        The example.

    Raises:
        ValueError: ``queries`` or ``found`` do not have one entry a step.
    """
    if not (len(queries) == len(found) == len(question.steps)):
        msg = (
            f"A search trace needs one query and one document list a step: got "
            f"{len(queries)} queries and {len(found)} lists for {len(question.steps)} steps."
        )
        raise ValueError(msg)
    opening, closing = protocol.query_tags
    thoughts = ["", *question.steps[:-1]]
    turns = [
        protocol.thought_format.replace("{thought}", thought) + f"\n{opening} {query} {closing}"
        for thought, query in zip(thoughts, queries, strict=True)
    ]
    results = [
        protocol.result_template.format(
            documents=format_documents(
                protocol,
                [
                    {"id": f"doc-{i}", "text": text, "metadata": {"title": title}}
                    for i, (title, text) in enumerate(docs)
                ],
            )
        )
        for docs in found
    ]
    conclusion = f"{question.steps[-1]} So the answer is {question.answer}."
    last = protocol.thought_format.replace("{thought}", conclusion) + "\n"
    last += protocol.answer_format.replace("{answer}", question.answer)
    prompt = protocol.render_prompt(question.question, protocol.max_searches)
    continuation = tuple(zip(results, [*turns[1:], last], strict=True))
    return TrainingExample(prompt, turns[0], kind, continuation)


def knowledge_text(world: ToyWorld) -> str:
    """Every text about the world that training can show: known passages and gold answers.

    Args:
        world: The evaluated world.

    Returns:
        The known passages and the gold answers of ``training_questions``, one per line.
    """
    passages = [d.page_content for d in build_corpus(world) if d.metadata["known"]]
    answers = [f"{q.question} {q.gold_text}" for q in training_questions(world)]
    return "\n".join(passages + answers)


def decision_prompt(question: str) -> str:
    """The Vanilla retrieval-decision prompt of ``langchain_adaptive_rag.graphs.ta_are``."""
    return f"{DECISION_INSTRUCTION}\nQuestion: {question}\nAnswer:"


def tokenizer_text(world: ToyWorld, repeats: int = 40) -> list[str]:
    """Text the toy tokenizer is trained on: every pool word, year and template phrase.

    Every word is repeated often enough that byte-level BPE keeps it whole. The text
    holds no facts of ``world`` (only practice passages show the templates).

    Args:
        world: The evaluated world (only its size matters here; no facts are used).
        repeats: Repetitions of each word.

    Returns:
        Lines of text.
    """
    words = sorted(set(WORLD_POOLS.words()) | set(PRACTICE_POOLS.words()))
    lines = [" ".join([w] * repeats) for w in words]
    lines.extend(" ".join([str(y)] * repeats) for y in YEARS)
    practice = generate_world(
        world.seed + 10_000, sizes=PRACTICE_SIZES, pools=PRACTICE_POOLS, reserved=world.names()
    )
    passages = [d.page_content for d in build_corpus(practice)]
    questions = list(iter_questions(practice))
    for _ in range(repeats // 4):
        for q in questions[:40]:
            example = qa_example(q, passages[:3])
            lines.append(example.prompt + example.target)
            lines.append(decision_prompt(q.question) + " [Yes]\n")
    lines.extend(f"Copy: {w}\nCopy: {w}\n" for w in words)
    lines.append("Please use your own knowledge to answer the question. I don't know.")
    return lines


class ExampleMix:
    """A seeded, endless stream of training examples over one world.

    Args:
        world: The evaluated world (only its known facts are used).
        seed: Seed of the stream.
        weights: Share of each example kind (see ``DEFAULT_WEIGHTS``).
        counterfactual: Share of context examples whose gold passage contradicts memory.
    """

    DEFAULT_WEIGHTS: dict[str, float] = {  # noqa: RUF012
        "closed": 0.30,
        "passage": 0.05,
        "known_context": 0.12,
        "practice": 0.28,
        "practice_continue": 0.10,
        "practice_family": 0.05,
        "decision": 0.03,
        "copy": 0.07,
    }
    """Shares of the example kinds (the shipped model's mix: no search traces)."""

    SEARCH_KNOWN = 0.3
    """Share of search traces over known questions (the rest: practice worlds)."""

    def __init__(
        self,
        world: ToyWorld,
        *,
        seed: int = 0,
        weights: dict[str, float] | None = None,
        counterfactual: float = 0.3,
    ) -> None:
        self.world = world
        self.rng = random.Random(seed)
        self.weights = dict(weights or self.DEFAULT_WEIGHTS)
        self.counterfactual = counterfactual
        self.questions = training_questions(world)
        corpus = build_corpus(world)
        self.known_passages = {d.id or "": d.page_content for d in corpus if d.metadata["known"]}
        self.known_ids = sorted(self.known_passages)
        self.titles = {d.id or "": str(d.metadata["title"]) for d in corpus}
        """Entity of each passage (a person's name, a film's title), known and practice."""
        self._practice_seed = seed * 1_000_003 + 17
        self._practice: list[tuple[list[ToyQuestion], dict[str, str]]] = []
        self._families: dict[str, Line] = {}
        """Practice grandfather question id -> ids of its line's three people."""
        self._reserved = world.names()
        self.max_distractors = 3
        """Upper bound on distractor passages (a curriculum may raise it over time)."""
        self._copy_words = [
            *PRACTICE_POOLS.words(),
            *WORLD_POOLS.first_names,
            *WORLD_POOLS.last_names,
            *(str(y) for y in YEARS),
        ]

    # -- sources ---------------------------------------------------------------------

    def _practice_world(self) -> tuple[list[ToyQuestion], dict[str, str]]:
        """A fresh practice world (a new one every few draws)."""
        if not self._practice or self.rng.random() < 0.05:
            self._practice_seed += 1
            pools = PRACTICE_POOLS if self.rng.random() < 0.5 else MIXED_POOLS
            practice = generate_world(
                self._practice_seed,
                sizes=PRACTICE_SIZES,
                pools=pools,
                reserved=self._reserved,
                id_prefix="practice-",
            )
            corpus = build_corpus(practice)
            passages = {d.id or "": d.page_content for d in corpus}
            self.titles.update((d.id or "", str(d.metadata["title"])) for d in corpus)
            questions = list(iter_questions(practice))
            self._practice = [(questions, passages)]
            self._families = {
                q.id: line
                for q in questions
                if q.type == "inference"
                for line in practice.lines
                if q.supporting_ids[0] in line
            }
        return self._practice[0]

    def _context(
        self, gold: Sequence[str], pool: dict[str, str], exclude: Sequence[str]
    ) -> list[str]:
        """Gold passages and 0-3 distractors from ``pool``, shuffled (1-5 passages)."""
        count = min(self.max_distractors, self.rng.choice((0, 1, 1, 2, 2, 3)))
        candidates = [k for k in self.rng.sample(sorted(pool), min(len(pool), 8))]
        distractors = [pool[k] for k in candidates if k not in exclude][:count]
        passages = [*gold, *distractors]
        self.rng.shuffle(passages)
        return passages

    def _counterfactual(self, question: ToyQuestion) -> tuple[ToyQuestion, str, str] | None:
        """A "Where was the director..." question whose director facts are changed."""
        if question.type != "compositional":
            return None
        film = next(f for f in self.world.films if f.id == question.supporting_ids[0])
        director = self.world.director(film)
        changed = dataclasses.replace(
            director,
            birth_year=self.rng.choice([y for y in YEARS[40:140] if y != director.birth_year]),
            birth_city=self.rng.choice(
                [c.name for c in self.world.cities if c.name != director.birth_city]
            ),
        )
        people = tuple(changed if p.id == director.id else p for p in self.world.people)
        world = dataclasses.replace(self.world, people=people)
        ask: Literal["when", "where"] = "when" if self.rng.random() < 0.5 else "where"
        return (
            compositional_question(world, film, ask),
            film_passage(film, changed),
            person_passage(changed, film),
        )

    def _search(self, question: ToyQuestion, pool: dict[str, str]) -> TrainingExample:
        """A search trace: each step's entity searched, its passage among 0-3 others."""
        ids = question.supporting_ids
        by_text = {text: key for key, text in pool.items()}
        found = []
        for step_id in ids:
            passages = self._context([pool[step_id]], pool, ids)
            found.append([(self.titles[by_text[text]], text) for text in passages])
        queries = [self.titles[step_id] for step_id in ids]
        return search_example(question, queries, found)

    # -- the stream ------------------------------------------------------------------

    def sample(self) -> TrainingExample:
        """The next example."""
        kinds = list(self.weights)
        kind = self.rng.choices(kinds, weights=[self.weights[k] for k in kinds])[0]
        rng = self.rng
        if kind == "closed":
            return qa_example(rng.choice(self.questions), kind=kind)
        if kind == "passage":
            return TrainingExample("", self.known_passages[rng.choice(self.known_ids)], kind)
        if kind == "known_context":
            question = rng.choice(self.questions)
            gold = [self.known_passages[i] for i in dict.fromkeys(question.supporting_ids)]
            if rng.random() < self.counterfactual:
                made = self._counterfactual(question)
                if made is not None:
                    question, gold = made[0], [made[1], made[2]]
            context = self._context(gold, self.known_passages, question.supporting_ids)
            return qa_example(question, context, kind=kind)
        if kind == "copy":
            words = " ".join(rng.choices(self._copy_words, k=rng.randint(4, 16)))
            return TrainingExample(f"Copy: {words}\nCopy:", f" {words}\n", kind)
        if kind == "decision":
            if rng.random() < 0.5:
                text = rng.choice(self.questions).question
                return TrainingExample(decision_prompt(text), " [No]\n", kind)
            practice, _ = self._practice_world()
            return TrainingExample(decision_prompt(rng.choice(practice).question), " [Yes]\n", kind)
        if kind == "search" and rng.random() < self.SEARCH_KNOWN:
            return self._search(rng.choice(self.questions), self.known_passages)
        practice, passages = self._practice_world()
        if kind == "search":
            return self._search(rng.choice(practice), passages)
        if kind == "practice":
            question = rng.choice(practice)
            gold = [passages[i] for i in dict.fromkeys(question.supporting_ids)]
            context = self._context(gold, passages, question.supporting_ids)
            return qa_example(question, context, kind=kind)
        if kind == "practice_family":
            question = rng.choice([q for q in practice if q.id in self._families])
            line = self._families[question.id]
            gold = [passages[i] for i in question.supporting_ids]
            kin = [passages[i] for i in line if i not in question.supporting_ids]
            context = self._context(gold, passages, line)
            context.insert(rng.randint(0, len(context)), kin[0])
            return qa_example(question, context, kind=kind)
        question = rng.choice([q for q in practice if len(q.steps) > 1])
        later = [passages[i] for i in dict.fromkeys(question.supporting_ids[1:])]
        context = self._context(later, passages, question.supporting_ids)
        return qa_example(question, context, accepted_steps=1, kind=kind)
