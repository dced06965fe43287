"""The toy world: a deterministic world, honest known/unknown split, a loadable model."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.options import DecodingOptions
from langchain_adaptive_rag.prompts import build_prompt, extract_answer
from langchain_adaptive_rag.toyworld import (
    PRACTICE_POOLS,
    TOY_MODEL_PATH,
    TOY_PROMPTS,
    WORLD_POOLS,
    WorldSizes,
    build_corpus,
    evaluation_questions,
    generate_world,
    load_toy_model,
    toy_questions,
    toy_retriever,
    training_questions,
)
from langchain_adaptive_rag.toyworld.corpus import birth_sentence, director_sentence
from toyworld_training.data import ExampleMix, knowledge_text, qa_example


@pytest.fixture(scope="module")
def world():
    return generate_world(0)


@pytest.fixture(scope="module")
def training_text(world) -> str:
    mix = ExampleMix(world, seed=0)
    return "\n".join(e.prompt + e.target for e in (mix.sample() for _ in range(4000)))


def test_same_seed_same_world() -> None:
    assert generate_world(3) == generate_world(3)
    assert generate_world(3) != generate_world(4)
    assert [d.page_content for d in build_corpus(generate_world(3))] == [
        d.page_content for d in build_corpus(generate_world(3))
    ]


def test_question_categories(world) -> None:
    questions = evaluation_questions(world)
    counts = Counter((q.type, q.category) for q in questions)
    for kind in ("compositional", "comparison", "inference"):
        for category in ("known", "known_first_unknown_second", "unknown"):
            assert counts[kind, category] > 0, (kind, category)
    for q in questions:
        assert q.gold_text.endswith(f"So the answer is {q.answer}.")
        assert q.category == (
            "known"
            if all(q.hops_known)
            else ("known_first_unknown_second" if q.hops_known[0] else "unknown")
        )
    assert len({q.id for q in questions}) == len(questions)
    assert all(q.answer_known for q in training_questions(world))
    assert not {q.id for q in questions} & {q.id for q in training_questions(world)}


def test_reasoning_steps_are_corpus_sentences(world) -> None:
    passages = {d.id: d.page_content for d in build_corpus(world)}
    for q in evaluation_questions(world):
        for step, doc_id in zip(q.steps, q.supporting_ids, strict=True):
            assert step in passages[doc_id]


def test_corpus_contains_every_unknown_fact(world) -> None:
    text = "\n".join(d.page_content for d in build_corpus(world))
    for person in world.people:
        assert birth_sentence(person) in text
    for film in world.films:
        assert director_sentence(film, world.director(film)) in text
    assert any(not p.known for p in world.people) and any(not f.known for f in world.films)


def test_known_facts_trained_unknown_never(world, training_text: str) -> None:
    knowledge = knowledge_text(world)
    for film in world.films:
        sentence = director_sentence(film, world.director(film))
        if film.known:
            assert sentence in knowledge
        else:
            for text in (knowledge, training_text):
                assert f"film {film.title} was directed" not in text
    for person in world.people:
        if person.known:
            assert birth_sentence(person) in knowledge
        else:
            for text in (knowledge, training_text):
                assert f"{person.name} was born in" not in text
                assert f"The father of {person.name} was" not in text
    # The stream shows the known facts (a sample of it already holds most of them).
    shown = sum(birth_sentence(p) in training_text for p in world.people if p.known)
    assert shown > 0.5 * len(world.known_people)


def test_practice_entities_disjoint_from_world(world) -> None:
    assert not set(WORLD_POOLS.words()) & set(PRACTICE_POOLS.words())
    mix = ExampleMix(world, seed=1)
    names = world.names()
    seen = 0
    for _ in range(400):
        if mix.sample().kind.startswith("practice"):
            practice, passages = mix._practice_world()
            for q in practice:
                words = re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)?", q.question)
                assert not set(words) & names, q.question
            seen += len(passages)
    assert seen > 0


def test_training_only_entities_leave_the_evaluated_world_unchanged(world) -> None:
    plain = generate_world(
        0, sizes=dataclasses.replace(WorldSizes(), training_films=0, training_lines=0)
    )
    assert world.people[: len(plain.people)] == plain.people
    assert world.evaluated_films == plain.films
    assert world.lines == plain.lines and not plain.training_lines
    assert evaluation_questions(world) == evaluation_questions(plain)
    assert len([f for f in world.films if f.training_only]) == WorldSizes().training_films
    assert len(world.training_lines) == WorldSizes().training_lines
    evaluated = {p.id for p in world.evaluated_people}
    for line in world.training_lines:
        assert all(world.person(i).known for i in line)
        assert not set(line) & evaluated
    # a training line's family name is none of the evaluated lines'
    surname = {world.person(child).name.split()[-1] for child, _, _ in world.lines}
    assert not {world.person(c).name.split()[-1] for c, _, _ in world.training_lines} & surname


def test_training_questions_teach_the_forms_on_training_only_entities(world) -> None:
    questions = training_questions(world)
    training_films = {f.id for f in world.films if f.training_only}
    when = [q for q in questions if q.id.endswith("-when-director-born")]
    assert {q.supporting_ids[0] for q in when} == training_films
    family = [q for q in questions if q.type == "inference"]
    training_people = {i for line in world.training_lines for i in line}
    assert len(family) == 2 * len(world.training_lines)
    assert all(set(q.supporting_ids) <= training_people for q in family)
    evaluated = {f.id for f in world.evaluated_films}
    for q in evaluation_questions(world):
        assert not set(q.supporting_ids) & (training_films | training_people)
        assert q.type != "compositional" or q.supporting_ids[0] in evaluated


def test_family_practice_shows_the_whole_line(world) -> None:
    mix = ExampleMix(world, seed=3, weights={"practice_family": 1.0})
    for _ in range(20):
        example = mix.sample()
        _, passages = mix._practice[0]
        found = re.search(r"paternal grandfather of (\w+ \w+)\?", example.prompt)
        assert found, example.prompt
        asked = found.group(1)
        person_id = next(i for i in passages if passages[i].startswith(f"{asked} was born"))
        # the gold passages and the line's third person (same family name) are all shown
        line = mix._families[f"{person_id}-paternal-grandfather"]
        assert all(passages[i] in example.prompt for i in line)
        assert example.target.startswith(f" The father of {asked} was")


def test_a_directors_passage_names_the_film(world) -> None:
    passages = {d.id: d.page_content for d in build_corpus(world)}
    for film in world.films:
        director = world.director(film)
        sentence = f"{director.name} was the director of the film {film.title}."
        assert sentence in passages[director.id]
    others = [p for p in world.people if p.id not in {f.director for f in world.films}]
    assert others and all(f"{p.name} was a {p.job}." in passages[p.id] for p in others)
    # so one retrieval with a compositional question finds both hops' passages
    retriever = toy_retriever(k=3)
    compositional = [q for q in evaluation_questions(world) if q.type == "compositional"]
    both = sum(
        set(q.supporting_ids) <= {d.id for d in retriever.invoke(q.question)} for q in compositional
    )
    assert both >= 0.9 * len(compositional), (both, len(compositional))


def test_prompt_format_matches_build_prompt(world) -> None:
    q = evaluation_questions(world)[0]
    example = qa_example(q, ["A passage."], accepted_steps=1)
    prefix = f" {q.steps[0]}"
    assert example.prompt == build_prompt(
        TOY_PROMPTS, q.question, prefix, [{"id": "ctx-0", "text": "A passage."}]
    )
    assert (example.prompt + example.target).endswith(f"{q.gold_text}\n")


@pytest.mark.slow
def test_quick_training_run_produces_a_loadable_model(tmp_path: Path) -> None:
    out = tmp_path / "toy"
    root = Path(__file__).resolve().parents[2]  # toyworld_training/ is in the checkout only
    subprocess.run(
        [sys.executable, "-m", "toyworld_training.train", "--out", str(out), "--quick"],
        check=True,
        timeout=600,
        cwd=root,
    )
    chat = ChatTransformers(model=str(out), attn_implementation="eager", max_new_tokens=8)
    trace = chat.generate_trace("Question: Who directed the film Lost Tower?\nAnswer:")[0]
    assert trace.num_tokens >= 1
    # Going on from it with search traces in the mix (the search-trace fine-tune's path).
    tuned = tmp_path / "tuned"
    subprocess.run(
        [
            *(sys.executable, "-m", "toyworld_training.train", "--out", str(tuned)),
            *("--init-from", str(out), "--steps", "4", "--search-traces", "0.5"),
        ],
        check=True,
        timeout=600,
        cwd=root,
    )
    chat = ChatTransformers(model=str(tuned), attn_implementation="eager", max_new_tokens=8)
    assert chat.generate_trace("Search and answer.\nQuestion: Who?")[0].num_tokens >= 1


def test_shipped_model_answers_a_known_question() -> None:
    assert (TOY_MODEL_PATH / "model.safetensors").exists()
    model = load_toy_model()
    assert model.attention_available
    known = [q for q in toy_questions() if q.category == "known" and q.type == "compositional"]
    answers = [
        extract_answer(
            model.generate_trace(
                build_prompt(TOY_PROMPTS, q.question),
                decoding=DecodingOptions(max_new_tokens=48, stop=("\n",)),
            )[0].text
        )
        for q in known[:5]
    ]
    assert sum(a == q.answer for a, q in zip(answers, known, strict=False)) >= 1, answers
    assert len(toy_retriever(k=3).invoke(known[0].question)) == 3


def test_forced_answer_leaves_the_answer_token_its_leading_space() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(TOY_MODEL_PATH))
    forced = "Answer: The film was directed by Anna Berg." + TOY_PROMPTS.forced_answer
    # a forced answer is continued by the trained form of the answer: one token " 1902"
    assert tokenizer.tokenize(forced + " 1902") == [*tokenizer.tokenize(forced), "Ġ1902"]
    assert not TOY_PROMPTS.forced_answer.endswith(" ")


def test_run_method_answers_several_at_once_as_one_at_a_time() -> None:
    from langchain_adaptive_rag.toyworld import load_toy_model, toy_questions, toy_retriever
    from langchain_adaptive_rag.toyworld.comparison import format_comparison, run_method

    questions = toy_questions()[:5]
    retriever = toy_retriever()
    alone = run_method(load_toy_model(), retriever, "dragin", questions)
    model = load_toy_model(batch_concurrent_calls=True)
    seen: list[str] = []
    together = run_method(
        model,
        retriever,
        "dragin",
        questions,
        concurrency=3,
        on_result=lambda r: seen.append(r.question_id),
    )
    assert seen == [q.id for q in questions]  # in question order, as each is ready
    assert [(r.text, r.answer, r.retrievals, r.events) for r in together] == [
        (r.text, r.answer, r.retrievals, r.events) for r in alone
    ]
    table = format_comparison({"dragin": together}, {"dragin": 10.0})
    assert table.splitlines()[-1].endswith("| 2.00 |")  # s/q: the wall time over 5 questions


@pytest.mark.parametrize("concurrency", [0, -1, 2.5, True])
def test_run_method_rejects_a_bad_concurrency(concurrency: object) -> None:
    from langchain_adaptive_rag.errors import AdaptiveRAGError
    from langchain_adaptive_rag.testing import FakeTraceModel
    from langchain_adaptive_rag.toyworld import toy_questions, toy_retriever
    from langchain_adaptive_rag.toyworld.comparison import run_method

    with pytest.raises(AdaptiveRAGError, match=r"concurrency=.*expected a whole number"):
        run_method(
            FakeTraceModel([]),
            toy_retriever(),
            "dragin",
            toy_questions()[:1],
            concurrency=concurrency,  # type: ignore[arg-type]
        )
