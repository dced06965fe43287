"""The search agent on scripted models: each preset against its official loop, and the edges.

The official side is restated from each repository's code in
``tests/helpers/search_official.py``; a scripted model gives both sides the same outputs
and a table retriever the same documents.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.overrides import parse_config_overrides
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.reason_in_documents import (
    extract_final_information,
    previous_steps,
    reason_in_documents_prompt,
)
from langchain_adaptive_rag.graphs.search_agent import SearchAgentConfig
from langchain_adaptive_rag.graphs.search_presets import (
    AUTOREFINE,
    HOTPOTQA_SEARCH_DEMONSTRATIONS,
    R1_SEARCHER,
    RESEARCH,
    SEARCH_O1,
    SEARCH_O1_FEWSHOT,
    SEARCH_PROTOCOLS,
    SEARCH_R1,
    ZEROSEARCH,
    SearchProtocolName,
)
from langchain_adaptive_rag.graphs.search_protocol import (
    SearchDemonstration,
    SearchStep,
    read_answer,
    read_turn,
)
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from langchain_adaptive_rag.visualize import record_run
from tests.helpers.scripted import TitledTableRetriever
from tests.helpers.search_official import (
    official_r1_searcher,
    official_research,
    official_search_o1,
    official_search_r1,
    search_r1_passages,
    zerosearch_passages,
)

QUESTION = "When was the director of Blue Harbour born"
TABLE: dict[str, list[tuple[str, str]]] = {
    "director of Blue Harbour": [
        ("Blue Harbour", "Blue Harbour is a 1962 film directed by Anna Berg."),
        ("Carl Lind", "Carl Lind was born in 1902."),
    ],
    "Anna Berg born": [("Anna Berg", "Anna Berg (born 1931) is a Swedish film director.")],
    "Anna Berg birth": [],
}


def search(query: str) -> list[tuple[str, str]]:
    return TABLE.get(query, [])


def run(
    protocol: SearchProtocolName, replies: list[str | ScriptedResponse], **fields: Any
) -> tuple[dict[str, Any], FakeTraceModel, TitledTableRetriever, list[dict[str, Any]]]:
    model, retriever = FakeTraceModel(replies), TitledTableRetriever(table=TABLE)
    config = SearchAgentConfig(protocol=protocol, **fields)
    graph = create_adaptive_rag_graph(model, retriever, "search_agent", config=config)
    events: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": QUESTION}, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
        else:
            result = chunk
    return result, model, retriever, events


# -- parity with the official loops --------------------------------------------------------


def test_search_o1_matches_its_official_loop() -> None:
    turns = [
        "I need the director. <|begin_search_query|> director of Blue Harbour "
        "<|end_search_query|> never generated",
        "She is Anna Berg.\n\n<|begin_search_query|>director of Blue Harbour<|end_search_query|>",
        "<|begin_search_query|>Anna Berg born<|end_search_query|>",
        "So the answer is \\boxed{\\text{1931}}.",
    ]
    reasons = [
        "Reading.\n**Final Information**\n\nBlue Harbour was directed\nby Anna Berg.",
        "Nothing marked here.",
    ]
    official = official_search_o1(
        SEARCH_O1.render_prompt(QUESTION, 10),
        turns,
        search,
        reasons,
        reason_in_documents_prompt,
    )
    replies = [turns[0], reasons[0], turns[1], turns[2], reasons[1], turns[3]]
    result, model, retriever, events = run("search_o1", replies)
    assert model.prompts == official.prompts
    assert result["text"] == official.output
    assert result["answer"] == official.answer == "1931"
    assert retriever.queries == official.queries == ["director of Blue Harbour", "Anna Berg born"]
    assert "You have searched this query." in result["text"]
    assert "<|begin_search_result|>Blue Harbour was directedby Anna Berg." in result["text"]
    assert "<|begin_search_result|>No helpful information found." in result["text"]
    counts = result["counts"]
    assert (counts["retrievals"], counts["llm_calls"]) == (2, 6)
    actions = [e["action"] for e in events if e["event"] == "search_turn"]
    assert actions == ["search", "message", "search", "end"]
    first = next(e for e in events if e["event"] == "search_turn")
    assert first["query"] == "director of Blue Harbour"
    assert first["turn"].startswith("I need the director. <|begin_search_query|>")


def test_search_o1_limit_message_matches_the_official_loop() -> None:
    turns = [
        "<|begin_search_query|>director of Blue Harbour<|end_search_query|>",
        "<|begin_search_query|>Anna Berg born<|end_search_query|>",
        "Then \\boxed{1962}",
    ]
    reasons = ["\n**Final Information**\nAnna Berg."]
    official = official_search_o1(
        SEARCH_O1.render_prompt(QUESTION, 1),
        turns,
        search,
        reasons,
        reason_in_documents_prompt,
        max_search=1,
    )
    result, model, retriever, _ = run(
        "search_o1", [turns[0], reasons[0], turns[1], turns[2]], max_searches=1
    )
    assert model.prompts == official.prompts
    assert result["text"] == official.output
    assert "The maximum search limit is exceeded." in result["text"]
    assert result["answer"] == official.answer == "1962"
    assert retriever.queries == ["director of Blue Harbour"]


@pytest.mark.parametrize(
    ("protocol", "turns"),
    [
        (
            "search_r1",
            [
                "<think>The director first.</think> <search> director of Blue Harbour </search>"
                " tail the cut drops",
                "<think>Hmm, no tag this time.</think>",
                "<search></search>",
                "<answer> 1931 </answer> and more",
            ],
        ),
        (
            "search_r1",  # four turns that search, then the last one may only answer
            [
                "<search>director of Blue Harbour</search>",
                "<search>Anna Berg born</search>",
                "<search>Anna Berg birth</search>",
                "<search>director of Blue Harbour</search>",
                "<search>Anna Berg born</search>",
            ],
        ),
        (
            "autorefine",
            [
                "<think>x</think><search>director of Blue Harbour</search>",
                "<refine>Anna Berg.</refine><search>Anna Berg born</search>",
                "<answer>1931</answer>",
            ],
        ),
        (
            "zerosearch",
            [
                "<search>Anna Berg birth</search>",
                "<search>director of Blue Harbour</search>",
                "<answer>1962</answer>",
            ],
        ),
    ],
)
def test_search_r1_family_matches_its_official_loop(protocol: str, turns: list[str]) -> None:
    preset = SEARCH_PROTOCOLS[protocol]
    assert preset.max_turns is not None
    official = official_search_r1(
        preset.render_prompt(QUESTION, None),
        turns,
        search,
        max_turns=preset.max_turns - 1,
        result_tags=preset.result_tags,
        passages=zerosearch_passages if protocol == "zerosearch" else search_r1_passages,
        no_documents=preset.no_documents,
    )
    result, model, retriever, _ = run(protocol, list(turns))  # type: ignore[arg-type]
    assert model.prompts == official.prompts
    assert result["text"] == official.output
    assert result["answer"] == (official.answer or "")
    blank_free = [q for q in official.queries if q]  # a blank query reaches no retriever here
    assert retriever.queries == blank_free
    assert result["counts"]["retrievals"] == len(official.queries)


@pytest.mark.parametrize(
    "turns",
    [
        [
            ' I look it up. <|begin_of_query|> "director" of Blue Harbour...<|end_of_query|>',
            " Found. <|begin_of_query|>x <|begin_of_query|>Anna Berg born<|end_of_query|>",
            " </think>\n\n<answer> 1931 </answer>",
        ],
        [" <|begin_of_query|>Anna Berg birth<|end_of_query|>", " No answer at all."],
        [" <|begin_of_query|>''<|end_of_query|>"],
        ["<|begin_of_query|>q<|end_of_query|>"] * 10,  # the tenth turn is discarded
    ],
)
def test_r1_searcher_matches_its_official_loop(turns: list[str]) -> None:
    official = official_r1_searcher(R1_SEARCHER.render_prompt(QUESTION, None), turns, search)
    result, model, retriever, _ = run("r1_searcher", list(turns))
    assert model.prompts == official.prompts[:9]
    assert result["answer"] == official.answer
    assert retriever.queries == [q for q in official.queries if q.strip()][:8]
    if official.answer != "I don't know.":  # its unanswered runs keep no final text
        assert result["text"] == official.output


def test_research_matches_its_official_loop() -> None:
    turns = [
        "<think>Director.</think> <search> x <search> director of Blue Harbour </search>",
        "<think>Again.</think></search>",
        " <think>So.</think> <answer> The final answer is "
        "\\[ \\boxed{\\frac{19}{31}} \\] </answer>",
    ]
    official = official_research(RESEARCH.render_prompt(QUESTION, None), turns, search)
    result, model, retriever, _ = run("research", list(turns))
    assert model.prompts == official.prompts
    assert result["text"] == official.output
    assert "<result>\nnothing to search\n</result>" in result["text"]
    assert result["answer"] == official.answer == "\\frac{19}{31}"
    assert retriever.queries == official.queries == ["director of Blue Harbour"]


# -- the loop's edges ------------------------------------------------------------------


def test_a_closing_tag_split_across_tokens_still_stops_the_turn() -> None:
    split = ScriptedResponse(
        "<sea" + "rch>Anna Berg born</sea" + "rch> more",
        tokens=("<sea", "rch>Anna", " Berg", " born</sea", "rch>", " more"),
    )
    result, _, retriever, _ = run("search_r1", [split, "<answer>1931</answer>"])
    assert retriever.queries == ["Anna Berg born"]
    assert result["text"].startswith("<search>Anna Berg born</search>\n\n<information>Doc 1")
    assert result["answer"] == "1931"


def test_an_end_tag_that_never_comes_ends_the_turn_at_its_budget() -> None:
    rambling = "<|begin_search_query|>Anna Berg " + "and more " * 30
    result, model, retriever, _ = run("search_o1", [rambling], turn_max_tokens=8)
    assert retriever.queries == [] and model.calls[0]["max_new_tokens"] == 8
    assert result["answer"] == ""  # Search-o1: no query, no answer: the run ends
    result, _, _, _ = run(
        "search_r1", [rambling, "<answer>1931</answer>"], turn_max_tokens=8
    )  # Search-R1: the invalid-action message, and the model tries again
    assert "My previous action is invalid." in result["text"] and result["answer"] == "1931"


def test_an_answer_with_no_search_and_a_search_after_the_answer() -> None:
    result, _, retriever, _ = run("search_r1", ["<answer>1931</answer><search>x</search>"])
    assert result["answer"] == "1931" and retriever.queries == []
    assert result["text"] == "<answer>1931</answer>"
    # Search-o1's turn stops only at a query: a search after its answer runs, as officially
    replies = [
        "\\boxed{1931} <|begin_search_query|>Anna Berg born<|end_search_query|>",
        "**Final Information**",
        "Done.",
    ]
    result, _, retriever, _ = run("search_o1", replies)
    assert retriever.queries == ["Anna Berg born"] and result["answer"] == "1931"


def test_the_token_budget_ends_the_run() -> None:
    replies = ["<search>Anna Berg born</search>", "<search>director of Blue Harbour</search>"]
    result, model, retriever, _ = run(
        "search_r1", replies, generate_max_length=5, turn_max_tokens=10
    )
    assert [call["max_new_tokens"] for call in model.calls] == [5, 2]  # 3 tokens, then 2
    assert retriever.queries == ["Anna Berg born"]  # the second turn spent the budget
    assert result["answer"] == "" and result["counts"]["generated_tokens"] == 5


def test_force_answer_asks_for_a_missing_answer() -> None:
    result, model, _, _ = run(
        "search_r1", ["I am not sure.", "1931</answer>"], max_turns=1, force_answer=True
    )
    assert model.prompts[1].endswith("I am not sure.<answer>")
    assert model.calls[1]["stop"] == ("</answer>",)
    assert result["answer"] == "1931" and result["text"].endswith("<answer>1931</answer>")
    assert result["counts"]["llm_calls"] == 2


def test_read_turn_picks_the_first_or_the_last_opening_tag() -> None:
    nested = "<search> a <search> b "
    assert read_turn(SEARCH_R1, nested, "</search>").query == " a <search> b "
    assert read_turn(RESEARCH, nested, "</search>").query == " b "
    assert read_turn(SEARCH_R1, "no tag", "</search>").kind == "none"
    assert read_turn(RESEARCH, "no tag", "</search>").query == ""
    assert read_turn(SEARCH_R1, "x", "</answer>").kind == "none"  # no opening answer tag
    assert read_turn(SEARCH_R1, "<answer>x", None).kind == "none"


def test_answer_readers_worked_by_hand() -> None:
    line = "first \\boxed{A} then \\boxed{B}\n\\boxed{(C)}"
    assert read_answer(SEARCH_O1, line, "", None) == "C"
    assert read_answer(SEARCH_O1, "\\boxed{A} then \\boxed{B}", "", None) == "A} then \\boxed{B"
    blocks = "<answer> a </answer> x <answer> b </answer>"
    assert read_answer(SEARCH_R1, blocks, "", None) == "b"
    boxed = "<answer>\\boxed{1} and \\boxed{\\frac{1}{2}}</answer><answer>\\boxed{3}</answer>"
    assert read_answer(RESEARCH, boxed, "", None) == "\\frac{1}{2}"
    assert read_answer(R1_SEARCHER, "<answer>x</answer>", " <answer> y ", "</answer>") == " y "
    assert read_answer(R1_SEARCHER, "", " <answer> y ", None) is None
    assert read_answer(AUTOREFINE, "none here", "", None) is None


def test_previous_steps_keep_the_first_the_last_four_and_the_tagged_pieces() -> None:
    output = "a\nb\n\nc <|begin_search_query|>q<|end_search_query|>\nd\ne\nf\ng"
    assert previous_steps(output, "<|begin_search_query|>", "<|begin_search_result|>") == (
        "Step 1: a\n\n...\n\nStep 3: c <|begin_search_query|>q<|end_search_query|>\n\n"
        "...\n\nStep 5: e\n\nStep 6: f\n\nStep 7: g"
    )
    assert previous_steps("a\nb", "<q>", "<r>") == "Step 1: a\n\nStep 2: b"


def test_final_information_is_read_as_the_official_extractor() -> None:
    assert extract_final_information("x\n**Final Information**\n\nA\nB```") == "AB"
    assert extract_final_information("x\n**Modified Reasoning Steps**\nA\nB") == "A\nB"
    assert extract_final_information("**Final Information** at the start") == (
        "No helpful information found."
    )


# -- configuration --------------------------------------------------------------------------


def test_every_preset_is_named_and_renders_its_prompt() -> None:
    assert set(SEARCH_PROTOCOLS) == set(SearchProtocolName.__args__)  # type: ignore[attr-defined]
    for name, preset in SEARCH_PROTOCOLS.items():
        assert preset.name == name and preset.source
        prompt = preset.render_prompt("Who?", 10)
        assert "Who?" in prompt and "{" + "question}" not in prompt
    assert "limited to 10." in SEARCH_O1.render_prompt("q", 10)
    assert SEARCH_R1.render_prompt(" Who is X ", None).endswith("Question: Who is X?\n")
    assert ZEROSEARCH.prompt == SEARCH_R1.prompt


def test_a_custom_protocol_runs_with_its_own_tags() -> None:
    mine = dataclasses.replace(
        SEARCH_R1, name="mine", query_tags=("[Q]", "[/Q]"), stop=("[/Q]", "</answer>")
    )
    model, retriever = (
        FakeTraceModel(["[Q]Anna Berg born[/Q]", "<answer>1931</answer>"]),
        TitledTableRetriever(table=TABLE),
    )
    config = SearchAgentConfig(protocol=mine)
    graph = create_adaptive_rag_graph(model, retriever, "search_agent", config=config)
    result = graph.invoke({"question": QUESTION})
    assert retriever.queries == ["Anna Berg born"] and result["answer"] == "1931"
    assert "[Q]Anna Berg born[/Q]\n\n<information>Doc 1(Title: Anna Berg)" in result["text"]


def test_a_run_switches_protocol_through_its_context() -> None:
    model, retriever = FakeTraceModel(["<answer>1931</answer>"]), TitledTableRetriever(table=TABLE)
    graph = create_adaptive_rag_graph(model, retriever, "search_agent")
    result = graph.invoke({"question": QUESTION}, context={"protocol": "search_r1"})
    assert result["answer"] == "1931" and model.prompts[0].startswith("Answer the given")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"protocol": "search_o2"}, "protocol must be a preset's name or a SearchProtocol"),
        ({"max_searches": 0}, "max_searches must be >= 1, got 0"),
        ({"turn_max_tokens": 0}, "turn_max_tokens must be >= 1"),
    ],
)
def test_bad_settings_are_named(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=message):
        SearchAgentConfig(**fields)


def test_a_protocol_that_cannot_stop_at_its_query_is_refused() -> None:
    with pytest.raises(AdaptiveRAGError, match="lacks the query's closing tag"):
        dataclasses.replace(SEARCH_R1, stop=("</answer>",))
    with pytest.raises(AdaptiveRAGError, match="pair of non-empty strings"):
        dataclasses.replace(SEARCH_R1, query_tags=("<search>", ""))


def test_the_command_line_sets_the_protocol_by_name() -> None:
    config = parse_config_overrides(["protocol=research", "max_turns=3"], SearchAgentConfig)
    assert config.search_protocol is RESEARCH and config.turn_limit == 3
    with pytest.raises(AdaptiveRAGError, match=r"does not fit SearchAgentConfig\.protocol"):
        parse_config_overrides(["protocol=bing"], SearchAgentConfig)


def test_a_run_is_recorded_and_reported_turn_by_turn() -> None:
    replies = ["<search>director of Blue Harbour</search>", "<answer>1962</answer>"]
    model, retriever = FakeTraceModel(replies), TitledTableRetriever(table=TABLE)
    config = SearchAgentConfig(protocol="search_r1")
    graph = create_adaptive_rag_graph(model, retriever, "search_agent", config=config)
    record = record_run(graph, QUESTION)
    first, last = record.rounds
    assert first.decision is not None and first.decision.trigger_word == "director of Blue Harbour"
    assert first.retrieval is not None and first.retrieval.query == "director of Blue Harbour"
    assert first.continuation.startswith("\n\n<information>Doc 1(Title: Blue Harbour)")
    assert last.draft == "<answer>1962" and record.answer == "1962"
    pytest.importorskip("matplotlib")
    from langchain_adaptive_rag.visualize import report_html

    page = report_html([record], title="search", graphs={"search_agent": graph})
    assert "director of Blue Harbour" in page and "Search agent" in page


# -- demonstrations -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SEARCH_PROTOCOLS))
def test_a_demonstration_is_what_the_loop_writes_for_its_turns(name: str) -> None:
    protocol = dataclasses.replace(SEARCH_PROTOCOLS[name], max_turns=None, max_searches=None)
    demo = HOTPOTQA_SEARCH_DEMONSTRATIONS[0]
    condensed = protocol.reason_in_documents
    opening, closing = protocol.query_tags
    replies: list[str | ScriptedResponse] = []
    for step in demo.steps:
        thought = protocol.thought_format.replace("{thought}", step.thought)
        replies.append(f"{thought}\n{opening}{step.query}{closing} never read")
        if condensed:  # Reason-in-Documents writes the texts after its marker
            replies.append("\n**Final Information**\n" + " ".join(t for _, t in step.documents))
    conclusion = protocol.thought_format.replace("{thought}", demo.conclusion)
    replies.append(f"{conclusion}\n" + protocol.answer_format.replace("{answer}", demo.answer))
    table = {step.query: list(step.documents) for step in demo.steps}
    model, retriever = FakeTraceModel(replies), TitledTableRetriever(table={**TABLE, **table})
    graph = create_adaptive_rag_graph(
        model, retriever, "search_agent", config=SearchAgentConfig(protocol=protocol)
    )
    result = graph.invoke({"question": demo.question})
    assert result["text"] == protocol.render_demonstration(demo, condensed=condensed)
    assert result["answer"].strip() == demo.answer


def test_demonstrations_come_before_the_question_in_the_questions_form() -> None:
    prompt = SEARCH_O1_FEWSHOT.render_prompt("Who directed Blue Harbour?", 4)
    assert prompt.count("Please answer the following question.") == 3
    assert prompt.count("limited to 4.") == 1  # the instruction once, then three cases
    assert prompt.endswith("Question:\nWho directed Blue Harbour?\n\n")
    assert "\\boxed{France}\n\nPlease answer" in prompt
    assert not SEARCH_O1_FEWSHOT.reason_in_documents and SEARCH_O1.reason_in_documents
    short = SearchDemonstration("Q?", (SearchStep("T.", "q", (("A", "a."),)),), "C.", "x")
    assert dataclasses.replace(SEARCH_R1, demonstrations=(short,)).render_prompt("Who", None) == (
        SEARCH_R1.prompt.replace("{question}", "Q?")
        + "<think> T. </think>\n<search>q</search>\n\n<information>Doc 1(Title: A) a."
        "</information>\n\n<think> C. </think>\n<answer> x </answer>\n\nQuestion: Who?\n"
    )
    assert SEARCH_R1.render_demonstration(short, condensed=True).count("<information>a.<") == 1
    with pytest.raises(AdaptiveRAGError, match="case_start='Query: ' does not occur"):
        dataclasses.replace(SEARCH_R1, case_start="Query: ")


def test_with_demonstrations_a_turn_stops_where_a_new_question_would_begin() -> None:
    # a base model that answered goes on with another question, as the demonstrations do
    going_on = (
        "Found it. \\boxed{1931}\n\nPlease answer the following question. ... Question:\n"
        "Who?\n\n\\boxed{YOUR_ANSWER}"
    )
    result, model, _, _ = run("search_o1_fewshot", [going_on])
    assert model.calls[0]["stop"] == (
        "<|end_search_query|>",
        "Please answer the following question.",
    )
    assert result["text"] == "Found it. \\boxed{1931}\n\n" and result["answer"] == "1931"
    assert run("search_o1", [going_on])[0]["answer"] == "YOUR_ANSWER"  # no demonstrations
