"""The toy model's search traces: the loop's own text, trained turns only, no unknown fact."""

from __future__ import annotations

import pytest

from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.search_agent import SearchAgentConfig
from langchain_adaptive_rag.graphs.search_protocol import SearchDemonstration, SearchStep
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from langchain_adaptive_rag.toyworld import (
    TOY_MODEL_PATH,
    build_corpus,
    generate_world,
    toy_questions,
)
from langchain_adaptive_rag.toyworld.corpus import birth_sentence
from langchain_adaptive_rag.toyworld.prompts import TOY_SEARCH_PROTOCOL
from tests.helpers.scripted import TitledTableRetriever
from toyworld_training.data import ExampleMix, search_example
from toyworld_training.train import TrainConfig, _encode


@pytest.fixture(scope="module")
def world():
    return generate_world(0)


def _two_hop(world):
    question = next(q for q in toy_questions() if q.type == "compositional")
    texts = {d.id: (str(d.metadata["title"]), d.page_content) for d in build_corpus(world)}
    film, person = question.supporting_ids
    other = next(k for k in texts if k.startswith("person-") and k != person)
    found = [[texts[other], texts[film]], [texts[person]]]
    queries = [texts[film][0], texts[person][0]]
    return question, queries, found


def test_a_trace_is_the_protocols_prompt_and_demonstration(world) -> None:
    question, queries, found = _two_hop(world)
    example = search_example(question, queries, found)
    demo = SearchDemonstration(
        question.question,
        (
            SearchStep("", f" {queries[0]} ", tuple(found[0])),
            SearchStep(question.steps[0], f" {queries[1]} ", tuple(found[1])),
        ),
        f"{question.steps[1]} So the answer is {question.answer}.",
        question.answer,
    )
    protocol = TOY_SEARCH_PROTOCOL
    assert example.prompt == protocol.render_prompt(question.question, protocol.max_searches)
    assert example.text == example.prompt + protocol.render_demonstration(demo)
    assert example.prompt.endswith(f"Question: {question.question}")
    assert example.target == f"\n<search> {queries[0]} </search>"


def test_the_loop_writes_the_trace_from_its_trained_turns(world) -> None:
    question, queries, found = _two_hop(world)
    example = search_example(question, queries, found)
    turns: list[str | ScriptedResponse] = [
        example.text[start:end] for start, end in example.trained_spans()
    ]
    retriever = TitledTableRetriever(table=dict(zip(queries, found, strict=True)))
    model = FakeTraceModel(turns)
    config = SearchAgentConfig(protocol=TOY_SEARCH_PROTOCOL, retrieve_topk=3)
    graph = create_adaptive_rag_graph(model, retriever, "search_agent", config=config)
    result = graph.invoke({"question": question.question})
    assert retriever.queries == queries
    assert model.prompts[0] == example.prompt
    assert example.prompt + result["text"] == example.text
    assert result["answer"] == question.answer
    assert len(result["retrievals"]) == 2


def test_only_the_models_turns_are_trained(world) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOY_MODEL_PATH)
    question, queries, found = _two_hop(world)
    example = search_example(question, queries, found)
    ids, labels = _encode(tokenizer, example)
    trained = tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != -100])
    spans = example.trained_spans()
    assert trained == "".join(example.text[a:b] for a, b in spans)
    untrained = tokenizer.decode(
        [t for t, label in zip(ids, labels, strict=True) if label == -100],
        skip_special_tokens=True,
    )
    assert "Doc 1(Title:" in untrained and "<search>" not in untrained
    assert untrained.startswith(example.prompt)
    assert all(label in (-100, token) for token, label in zip(ids, labels, strict=True))


def test_a_trace_needs_one_search_a_step(world) -> None:
    question, queries, found = _two_hop(world)
    with pytest.raises(ValueError, match="got 1 queries and 2 lists for 2 steps"):
        search_example(question, queries[:1], found)


def test_traces_search_each_steps_entity_and_show_its_passage(world) -> None:
    mix = ExampleMix(world, seed=3, weights={"search": 1.0})
    examples = [mix.sample() for _ in range(200)]
    assert {e.kind for e in examples} == {"search"}
    for example in examples:
        searches = example.text.count("<search>")
        assert searches == example.text.count("</information>") >= 1
        assert example.text.endswith(" </answer>")
        assert len(example.trained_spans()) == searches + 1
    # Searches for the world's known entities and for fresh practice ones both appear.
    queries = [q.split(" </search>")[0] for e in examples for q in e.text.split("<search> ")[1:]]
    names = world.names()
    known = sum(q in names for q in queries)
    assert 0.15 * len(queries) < known < 0.5 * len(queries)


def test_search_traces_show_no_unknown_fact(world) -> None:
    mix = ExampleMix(world, seed=1, weights={"search": 1.0})
    text = "\n".join(mix.sample().text for _ in range(1500))
    for person in world.people:
        if not person.known:
            assert birth_sentence(person) not in text
            assert f"{person.name} was born in" not in text
    shown = sum(birth_sentence(p) in text for p in world.people if p.known)
    assert shown > 0.3 * len(world.known_people)


def test_the_shipped_mix_has_no_search_traces() -> None:
    assert TrainConfig().mix_weights() == ExampleMix.DEFAULT_WEIGHTS
    assert TrainConfig(search_traces=0.08).mix_weights() == {
        **ExampleMix.DEFAULT_WEIGHTS,
        "search": 0.08,
    }
