"""Tool calls written as text: the hermes format and a searcher's tags as calls."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_adaptive_rag.chat_models import _Release
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.search_presets import SEARCH_R1
from langchain_adaptive_rag.graphs.search_tool_calls import SearchToolCalls
from langchain_adaptive_rag.graphs.tool_agent import ToolAgent, ToolAgentConfig
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import train_tokenizer
from langchain_adaptive_rag.tool_calling import HERMES, BoundTools, ToolReply

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}
CLOCK = {
    "type": "function",
    "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}},
}
TEMPLATE = (
    "{% if tools %}[tools]{% for tool in tools %}{{ tool.function.name }};{% endfor %}|{% endif %}"
    "{% for m in messages %}[{{ m.role }}]{{ m.content }}"
    "{% for c in m.tool_calls or [] %}"
    "<call {{ c.function.name }} {{ c.function.arguments | tojson }}>"
    "{% endfor %}{% if m.role == 'tool' %} ({{ m.tool_call_id }}){% endif %}|{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}"
)


def bound(*tools: dict[str, Any], choice: str = "auto", fmt: Any = HERMES) -> BoundTools:
    return BoundTools(tools=tools, choice=choice, format=fmt)


def calls(reply: ToolReply) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["args"]) for c in reply.tool_calls]


def test_hermes_reads_each_call_and_the_text_before_them() -> None:
    text = (
        "Let me look.<tool_call>\n"
        '{"name": "search", "arguments": {"query": "Anna Berg"}}\n</tool_call>\n'
        '<tool_call>{"name": "clock", "parameters": {}}</tool_call>'
    )
    reply = HERMES.parse(text, None, bound(SEARCH, CLOCK))
    assert reply.content == "Let me look."
    assert calls(reply) == [("search", {"query": "Anna Berg"}), ("clock", {})]
    assert reply.invalid_tool_calls == []
    assert all(c["id"] and c["id"].startswith("call_") for c in reply.tool_calls)


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}</tool_call>',
        '<tool_call>```json\n{"name": "search", "arguments": {"query": "x"}}\n```</tool_call>',
        '<tool_call>{"name": "search", "arguments": {"query": "x"}}',  # out of tokens
    ],
)
def test_hermes_reads_arguments_as_a_string_fenced_or_unclosed(text: str) -> None:
    assert calls(HERMES.parse(text, None, bound(SEARCH))) == [("search", {"query": "x"})]


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        ('{"name": "search", "arguments": {"query": ', "not JSON"),
        ('["search"]', 'not an object with a "name"'),
        ('{"name": "search", "arguments": [1]}', "arguments are list"),
        ('{"name": "search", "arguments": "nope"}', "a string that is not JSON"),
    ],
)
def test_an_unreadable_call_is_an_invalid_call_that_says_why(block: str, reason: str) -> None:
    reply = HERMES.parse(f"<tool_call>{block}</tool_call>", None, bound(SEARCH))
    assert reply.tool_calls == []
    (invalid,) = reply.invalid_tool_calls
    assert invalid["args"] == block.strip() and reason in str(invalid["error"])


def test_hermes_with_tool_choice_none_reads_no_call() -> None:
    text = '<tool_call>{"name": "search", "arguments": {}}</tool_call>'
    reply = HERMES.parse(text, None, bound(SEARCH, choice="none"))
    assert (reply.content, reply.tool_calls) == (text, [])


def test_hermes_renders_tools_calls_and_results_through_the_chat_template() -> None:
    tokenizer = train_tokenizer()
    tokenizer.chat_template = TEMPLATE
    messages = [
        SystemMessage("Be brief."),
        HumanMessage("When?"),
        AIMessage("", tool_calls=[{"name": "search", "args": {"query": "Anna"}, "id": "c1"}]),
        ToolMessage("born 1931", tool_call_id="c1"),
    ]
    prompt = HERMES.render(messages, bound(SEARCH, CLOCK), tokenizer)
    assert prompt.text == (
        "[tools]search;clock;|[system]Be brief.|[user]When?|"
        '[assistant]<call search {"query": "Anna"}>|[tool]born 1931 (c1)|[assistant]'
    )
    assert (prompt.add_special_tokens, prompt.prefill) == (False, "")
    forced = HERMES.render(messages[:2], bound(SEARCH, choice="required"), tokenizer)
    assert forced.text.endswith("[assistant]<tool_call>\n") and forced.prefill == "<tool_call>\n"
    named = HERMES.render(messages[:2], bound(SEARCH, choice="search"), tokenizer)
    assert named.prefill == '<tool_call>\n{"name": "search", "arguments": '
    reply = HERMES.parse(named.prefill + '{"query": "Anna"}}', None, bound(SEARCH))
    assert calls(reply) == [("search", {"query": "Anna"})]


def test_hermes_needs_a_chat_template() -> None:
    tokenizer = train_tokenizer()
    tokenizer.chat_template = None
    with pytest.raises(AdaptiveRAGError, match=r"without a chat template.*SearchToolCalls"):
        HERMES.render([HumanMessage("Hi")], bound(SEARCH), tokenizer)


R1 = SearchToolCalls(SEARCH_R1)


def test_a_searchers_query_is_a_call_and_its_text_is_the_content() -> None:
    reply = R1.parse(
        "<think>Need the year.</think>\n<search> Anna Berg ", "</search>", bound(SEARCH, fmt=R1)
    )
    assert calls(reply) == [("search", {"query": "Anna Berg"})]
    assert reply.content == "<think>Need the year.</think>\n<search> Anna Berg </search>"
    answer = R1.parse("<answer> 1931 ", "</answer>", bound(SEARCH, fmt=R1))
    assert (answer.content, answer.tool_calls) == ("<answer> 1931 </answer>", [])
    empty = R1.parse("<search>  ", "</search>", bound(SEARCH, fmt=R1))
    assert empty.tool_calls == [] and "empty" in str(empty.invalid_tool_calls[0]["error"])
    unopened = R1.parse("no tag ", "</search>", bound(SEARCH, fmt=R1))
    assert (unopened.tool_calls, unopened.invalid_tool_calls) == ([], [])


def test_a_searchers_turn_is_rendered_as_the_search_agent_writes_it() -> None:
    docs = [{"id": "d1", "text": "Anna Berg was born in 1931.", "metadata": {"title": "Anna Berg"}}]
    turn = "<think>Need it.</think>\n<search> Anna Berg </search>"
    call = {"name": "search", "args": {"query": "Anna Berg"}, "id": "c1"}
    messages = [
        SystemMessage("not shown"),
        HumanMessage("When was Anna Berg born"),
        AIMessage(turn, tool_calls=[call]),
        ToolMessage("[1] Anna Berg: ...", tool_call_id="c1", artifact=docs),
    ]
    prompt = R1.render(messages, bound(SEARCH, fmt=R1), train_tokenizer())
    expected_prompt = SEARCH_R1.prompt.replace("{question}", "When was Anna Berg born?")
    block = "\n\n<information>Doc 1(Title: Anna Berg) Anna Berg was born in 1931.</information>\n\n"
    assert prompt.text == expected_prompt + turn + block
    assert (prompt.add_special_tokens, prompt.prefill) == (True, "")
    # the forced answer: the answer's opening tag is written after the turn
    forced = R1.render(messages, bound(SEARCH, choice="none", fmt=R1), train_tokenizer())
    assert forced.text == expected_prompt + turn + block + "<answer>"
    # a result with no documents as artifact is written as its text
    plain = R1.render(
        [*messages[:3], ToolMessage("found nothing", tool_call_id="c1")],
        bound(SEARCH, fmt=R1),
        train_tokenizer(),
    )
    assert plain.text.endswith("<information>found nothing</information>\n\n")


def test_a_searcher_calls_one_tool_that_takes_one_string() -> None:
    with pytest.raises(AdaptiveRAGError, match="calls one search tool; received 2 tools"):
        R1.render([HumanMessage("q")], bound(SEARCH, CLOCK, fmt=R1), train_tokenizer())
    with pytest.raises(AdaptiveRAGError, match="takes \\[\\]"):
        R1.render([HumanMessage("q")], bound(CLOCK, fmt=R1), train_tokenizer())
    with pytest.raises(AdaptiveRAGError, match="received no user message"):
        R1.render([SystemMessage("s")], bound(SEARCH, fmt=R1), train_tokenizer())


@pytest.mark.parametrize(
    ("pieces", "released"),
    [
        (["Hi ", "<tool", "_call>", '{"a"'], ["Hi ", "", "", ""]),
        (["a <to", "ken> b"], ["a ", "<token> b"]),
        (["plain", " text"], ["plain", " text"]),
    ],
)
def test_streamed_content_stops_where_a_call_starts(pieces: list[str], released: list[str]) -> None:
    release = _Release("<tool_call>", "")
    assert [release.feed(p) for p in pieces] == released


def test_the_rest_of_a_streamed_reply_comes_with_its_end() -> None:
    release = _Release(None, "<answer>")
    assert release.feed(" 1931 ") == "<answer> 1931 "
    assert release.rest(ToolReply("<answer> 1931 </answer>", [], [])) == "</answer>"


def test_the_agent_reads_a_searchers_answer_as_its_protocol_does() -> None:
    config = ToolAgentConfig(tool_format="search_r1")
    assert ToolAgent.answer(QAPrompts(), "<answer> 1931 </answer>", config) == "1931"
    assert ToolAgent.answer(QAPrompts(), "no answer", config) == SEARCH_R1.no_answer
    with pytest.raises(AdaptiveRAGError, match="tool_format must be 'hermes', a search preset"):
        ToolAgentConfig(tool_format="qwen")
    assert json.dumps(ToolAgentConfig(tool_format="hermes").tool_format) == '"hermes"'


def test_messages_become_the_dictionaries_chat_templates_read() -> None:
    from langchain_adaptive_rag.chat_messages import chat_dict, message_text

    call = {"name": "search", "args": {"query": "Anna"}, "id": "c1"}
    blocks = [{"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "c1"}]
    assert message_text(AIMessage(blocks, tool_calls=[call])) == "Let me look."
    assert chat_dict(AIMessage("", tool_calls=[call])) == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "search", "arguments": {"query": "Anna"}},
            }
        ],
    }
    assert chat_dict(ToolMessage("found", tool_call_id="c1", name="search")) == {
        "role": "tool",
        "content": "found",
        "tool_call_id": "c1",
        "name": "search",
    }
    with pytest.raises(AdaptiveRAGError, match="'image_url' content block"):
        message_text(HumanMessage([{"type": "image_url", "image_url": {"url": "x"}}]))
