"""Multi-hop questions over a toy world, in the 2WikiMultihopQA style.

Question types (each reasoning step is one corpus sentence, word for word):

- ``compositional``: "When was the director of film X born?" / "Where was ...": the
  film's director sentence, then the director's birth sentence;
- ``comparison``: "Who was born first, A or B?": both birth sentences;
- ``inference``: "Who is the paternal grandfather of A?": two father sentences;
- ``single_hop`` (training only): one sentence, e.g. "Who directed the film X?".

Categories: ``known`` (every hop's fact is known to the toy model),
``known_first_unknown_second`` (the first hop is known, a later one is not: a good method
answers the first step from memory and retrieves for the second), ``unknown`` (the first
hop is unknown already).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from langchain_adaptive_rag.toyworld.corpus import (
    birth_sentence,
    director_sentence,
    father_sentence,
    mother_sentence,
)
from langchain_adaptive_rag.toyworld.world import Film, Person, ToyWorld

__all__ = [
    "QuestionCategory",
    "QuestionType",
    "ToyQuestion",
    "comparison_question",
    "compositional_question",
    "evaluation_questions",
    "grandfather_question",
    "iter_questions",
    "training_questions",
]

QuestionType = Literal["compositional", "comparison", "inference", "single_hop"]
"""The question's reasoning pattern."""

QuestionCategory = Literal["known", "known_first_unknown_second", "unknown"]
"""Which hops the toy model knows (see the module docstring)."""


@dataclass(frozen=True)
class ToyQuestion:
    """A question with its chain-of-thought gold answer and provenance."""

    id: str
    """Stable identifier."""
    question: str
    """The question text."""
    steps: tuple[str, ...]
    """Reasoning steps, one corpus sentence each."""
    answer: str
    """The short answer."""
    type: QuestionType
    """Reasoning pattern."""
    hops_known: tuple[bool, ...]
    """Per step: whether its fact is in the toy model's training text."""
    supporting_ids: tuple[str, ...]
    """Ids of the passages stating each step's fact, in step order."""

    @property
    def category(self) -> QuestionCategory:
        """``known``, ``known_first_unknown_second`` or ``unknown``."""
        if all(self.hops_known):
            return "known"
        return "known_first_unknown_second" if self.hops_known[0] else "unknown"

    @property
    def answer_known(self) -> bool:
        """Whether the toy model can answer from memory (every hop known)."""
        return all(self.hops_known)

    @property
    def reasoning(self) -> str:
        """The steps joined by spaces."""
        return " ".join(self.steps)

    @property
    def gold_text(self) -> str:
        """The full gold answer: ``"{reasoning} So the answer is {answer}."``."""
        return f"{self.reasoning} So the answer is {self.answer}."

    @property
    def metadata(self) -> dict[str, object]:
        """JSON-friendly description (type, category, hops, supporting ids)."""
        return {
            "id": self.id,
            "type": self.type,
            "category": self.category,
            "hops_known": list(self.hops_known),
            "answer_known": self.answer_known,
            "supporting_ids": list(self.supporting_ids),
        }


def compositional_question(
    world: ToyWorld, film: Film, ask: Literal["when", "where"]
) -> ToyQuestion:
    """When/Where was the director of film X born?"."""
    director = world.director(film)
    return ToyQuestion(
        id=f"{film.id}-{ask}-director-born",
        question=f"{ask.capitalize()} was the director of film {film.title} born?",
        steps=(director_sentence(film, director), birth_sentence(director)),
        answer=str(director.birth_year) if ask == "when" else director.birth_city,
        type="compositional",
        hops_known=(film.known, director.known),
        supporting_ids=(film.id, director.id),
    )


def comparison_question(a: Person, b: Person) -> ToyQuestion:
    """Who was born first, A or B?" (``a`` and ``b`` must differ in birth year)."""
    first = a if a.birth_year < b.birth_year else b
    return ToyQuestion(
        id=f"{a.id}-{b.id}-born-first",
        question=f"Who was born first, {a.name} or {b.name}?",
        steps=(birth_sentence(a), birth_sentence(b)),
        answer=first.name,
        type="comparison",
        hops_known=(a.known, b.known),
        supporting_ids=(a.id, b.id),
    )


def grandfather_question(child: Person, father: Person) -> ToyQuestion:
    """Who is the paternal grandfather of A?" (``father`` is A's father)."""
    return ToyQuestion(
        id=f"{child.id}-paternal-grandfather",
        question=f"Who is the paternal grandfather of {child.name}?",
        steps=(father_sentence(child), father_sentence(father)),
        answer=father.father,
        type="inference",
        hops_known=(child.known, father.known),
        supporting_ids=(child.id, father.id),
    )


def _single_hops(world: ToyWorld, person: Person) -> Iterator[ToyQuestion]:
    one = (person.known,)
    where = (person.id,)
    yield ToyQuestion(
        f"{person.id}-when-born", f"When was {person.name} born?", (birth_sentence(person),),
        str(person.birth_year), "single_hop", one, where,
    )  # fmt: skip
    yield ToyQuestion(
        f"{person.id}-where-born", f"Where was {person.name} born?", (birth_sentence(person),),
        person.birth_city, "single_hop", one, where,
    )  # fmt: skip
    yield ToyQuestion(
        f"{person.id}-father", f"Who is the father of {person.name}?",
        (father_sentence(person),), person.father, "single_hop", one, where,
    )  # fmt: skip
    yield ToyQuestion(
        f"{person.id}-mother", f"Who is the mother of {person.name}?",
        (mother_sentence(person),), person.mother, "single_hop", one, where,
    )  # fmt: skip


def _pairs(
    people: Sequence[Person], rng: random.Random, count: int, kind: str
) -> list[ToyQuestion]:
    """``count`` comparison questions of one category over people of distinct years."""
    known = [p for p in people if p.known]
    unknown = [p for p in people if not p.known]
    result: list[ToyQuestion] = []
    seen: set[tuple[str, str]] = set()
    while len(result) < count:
        if kind == "known":
            a, b = rng.sample(known, 2)
        elif kind == "known_first_unknown_second":
            a, b = rng.choice(known), rng.choice(unknown)
        else:
            a, b = rng.choice(unknown), rng.choice(known + unknown)
        if a.birth_year == b.birth_year or a.id == b.id or (a.id, b.id) in seen:
            continue
        seen.add((a.id, b.id))
        result.append(comparison_question(a, b))
    return result


def evaluation_questions(
    world: ToyWorld, *, comparisons_per_category: int = 20
) -> list[ToyQuestion]:
    """The fixed evaluation set of a world (never in the training text as questions).

    "When was the director of film X born?" for every film, "Who is the paternal grandfather
    of A?" for every family line, and ``comparisons_per_category`` comparisons of each
    category.

    Args:
        world: The world.
        comparisons_per_category: Comparison questions per category.

    Returns:
        The questions, in a fixed order.
    """
    questions = [compositional_question(world, film, "when") for film in world.evaluated_films]
    for child_id, father_id, _ in world.lines:
        questions.append(grandfather_question(world.person(child_id), world.person(father_id)))
    rng = random.Random(world.seed + 1)
    for kind in ("known", "known_first_unknown_second", "unknown"):
        questions.extend(_pairs(world.evaluated_people, rng, comparisons_per_category, kind))
    return questions


def training_questions(world: ToyWorld, *, comparisons: int = 150) -> list[ToyQuestion]:
    """Questions over known facts only, disjoint from [`evaluation_questions`][].

    "Where was the director of film X born?" (and "When ...?" about the training-only
    films), single-hop questions about every known person's birth, every known film's
    director and the fathers in family lines, grandfather questions about the training-only
    family lines (children and fathers), and comparisons of known people that the
    evaluation set does not ask. No grandfather question about an evaluated line is
    trained: one about its father would teach the line's family name a shortcut to an
    answer.

    Args:
        world: The world.
        comparisons: Number of comparison questions.

    Returns:
        Questions whose every hop is known.
    """
    held_out = {q.id for q in evaluation_questions(world)}
    questions: list[ToyQuestion] = []
    for film in world.films:
        director = world.director(film)
        if film.known:
            questions.append(
                ToyQuestion(
                    f"{film.id}-director",
                    f"Who directed the film {film.title}?",
                    (director_sentence(film, director),),
                    director.name,
                    "single_hop",
                    (True,),
                    (film.id,),
                )
            )
            questions.append(compositional_question(world, film, "where"))
            if film.training_only:
                questions.append(compositional_question(world, film, "when"))
    all_lines = world.lines + world.training_lines
    in_lines = {person_id for line in all_lines for person_id in line}
    for person in world.people:
        skip = ("-mother",) if person.id in in_lines else ("-mother", "-father")
        questions.extend(q for q in _single_hops(world, person) if not q.id.endswith(skip))
    for child_id, father_id, grandfather_id in world.training_lines:
        father, grandfather = world.person(father_id), world.person(grandfather_id)
        questions.append(grandfather_question(world.person(child_id), father))
        questions.append(grandfather_question(father, grandfather))
    rng = random.Random(world.seed + 2)
    for question in _pairs(world.people, rng, comparisons + len(held_out), "known"):
        questions.append(question)
    kept = [q for q in questions if q.answer_known and q.id not in held_out]
    comparison_ids = [q.id for q in kept if q.type == "comparison"][comparisons:]
    dropped = set(comparison_ids)
    return [q for q in kept if q.id not in dropped]


def iter_questions(world: ToyWorld) -> Iterator[ToyQuestion]:
    """Every question type over every entity of a world, known or not (for practice worlds).

    Args:
        world: A world whose facts may all be shown in context.

    Yields:
        Compositional (when and where), grandfather and single-hop questions, then one
        comparison per person paired with the next person of a different birth year.
    """
    for film in world.films:
        yield compositional_question(world, film, "when")
        yield compositional_question(world, film, "where")
        director = world.director(film)
        yield ToyQuestion(
            f"{film.id}-director", f"Who directed the film {film.title}?",
            (director_sentence(film, director),), director.name, "single_hop",
            (film.known,), (film.id,),
        )  # fmt: skip
    for child_id, father_id, grandfather_id in world.lines + world.training_lines:
        father = world.person(father_id)
        yield grandfather_question(world.person(child_id), father)
        yield grandfather_question(father, world.person(grandfather_id))
    for person in world.people:
        yield from _single_hops(world, person)
    people = world.people
    for index, a in enumerate(people):
        b = people[(index + 7) % len(people)]
        if a.birth_year != b.birth_year:
            yield comparison_question(a, b)
