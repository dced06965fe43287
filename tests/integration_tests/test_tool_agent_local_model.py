"""The tool agent on a local model: ``create_agent`` over ``ChatTransformers`` tool calls.

Two models call the search tool here, each as LangChain's tool calling:

- a tiny random Llama saved with a chat template in the Hermes form, its weights set so
  that it calls the search tool until a ``<tool_response>`` is in its context, then
  answers (``tests/helpers/tool_caller.py`` says how). The reference of its first reply
  is transformers' own: its chat template with the tool and ``generate``'s greedy tokens;
- the toy model, trained on search traces in ``TOY_SEARCH_PROTOCOL``, with
  ``SearchToolCalls``: its query tags are calls of the search tool. It reads the same text
  as in the search agent, so the two write the same queries and answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from langchain_core.messages import AIMessageChunk

from langchain_adaptive_rag import ChatTransformers, create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.search_tool_calls import SearchToolCalls
from langchain_adaptive_rag.graphs.tool_agent import ToolAgentConfig, create_tool_agent_graph
from langchain_adaptive_rag.testing import create_tiny_model
from langchain_adaptive_rag.toyworld.comparison import TOY_CONFIGS
from langchain_adaptive_rag.toyworld.model import load_toy_model, toy_questions, toy_retriever
from langchain_adaptive_rag.toyworld.prompts import TOY_PROMPTS, TOY_SEARCH_PROTOCOL
from tests.helpers.scripted import TitledTableRetriever
from tests.helpers.tool_caller import (
    ANSWER_LOGIT,
    CALL,
    CALL_LOGIT,
    END_LOGIT,
    FLAG,
    FLAG_LOGIT,
    FOUND,
    GENERATION,
    HERMES_TEMPLATE,
    QUESTION,
    SEEN,
    WRITTEN,
)

pytest.importorskip("langchain.agents")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = create_tiny_model(tmp_path_factory.mktemp("hermes") / "llama")
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.add_tokens([CALL, "<tool_response>"])  # as text: decoded with the reply
    tokenizer.chat_template = HERMES_TEMPLATE
    tokenizer.save_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    model.resize_token_embeddings(len(tokenizer))
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True, tokenize=False
    )
    last = tokenizer(prompt, add_special_tokens=False)["input_ids"][-1]
    call, response = tokenizer.convert_tokens_to_ids([CALL, "<tool_response>"])
    answer = tokenizer(" 1931", add_special_tokens=False)["input_ids"]
    assert len(answer) == 1, "a single token of the tiny tokenizer"
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        attention = model.model.layers[0].self_attn
        attention.q_proj.weight.zero_()
        attention.k_proj.weight.zero_()
        attention.v_proj.weight.zero_()
        attention.v_proj.weight[0, SEEN] = 1.0  # kv head 0 carries the response token
        attention.o_proj.weight[FLAG, 0] = 1.0  # head 0 writes it into the flag
        embeddings, rows = model.model.embed_tokens.weight, model.lm_head.weight
        embeddings[:, :4] = 0.0
        for token, dim in ((last, GENERATION), (call, WRITTEN), (answer[0], WRITTEN)):
            embeddings[token] = 0.0
            embeddings[token, dim] = 1.0
        embeddings[response] = 0.0
        embeddings[response, SEEN] = 1.0
        rows[:, :4] = 0.0
        rows[call, GENERATION] = CALL_LOGIT  # no flag: call
        rows[answer[0], GENERATION] = ANSWER_LOGIT
        rows[answer[0], FLAG] = FLAG_LOGIT  # a response in context: answer
        rows[end, WRITTEN] = END_LOGIT  # over the flag: one answer token
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def llm(model_dir: Path) -> ChatTransformers:
    return ChatTransformers(model=str(model_dir), max_new_tokens=8)


def test_the_first_reply_is_transformers_greedy_reply_to_the_template_with_the_tool(
    llm: ChatTransformers, model_dir: Path
) -> None:
    from langchain_core.tools import tool
    from transformers import AutoModelForCausalLM, AutoTokenizer

    @tool
    def search(query: str) -> str:
        """Search an encyclopedia."""
        return query

    schema = {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search an encyclopedia.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    reference = AutoModelForCausalLM.from_pretrained(model_dir)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}],
        tools=[schema],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    out = reference.generate(ids, do_sample=False, max_new_tokens=4)
    expected = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert expected == CALL

    reply = llm.bind_tools([search]).invoke(QUESTION)
    assert reply.content == ""
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("search", {"query": "Anna Berg"})
    ]
    generated = out[0, ids.shape[1] :].tolist()  # the call, then <|im_end|>
    assert generated[1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert reply.response_metadata["token_signals"]["token_ids"] == generated[:1]

    # streamed: no content (the call is held back), the call in the last chunk
    chunks = list(llm.bind_tools([search]).stream(QUESTION))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    assert isinstance(merged, AIMessageChunk)
    assert merged.content == ""
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [
        ("search", {"query": "Anna Berg"})
    ]


def test_the_agent_searches_reads_the_result_and_answers(llm: ChatTransformers) -> None:
    retriever = TitledTableRetriever(table={"Anna Berg": FOUND})
    config = ToolAgentConfig(generate_max_length=8, retrieve_topk=1)
    graph = create_tool_agent_graph(llm, retriever, config=config)

    streamed = graph.stream({"question": QUESTION}, stream_mode=["custom", "updates"])
    events = [chunk for mode, chunk in streamed if mode == "custom"]
    result = graph.invoke({"question": QUESTION})

    assert retriever.queries == ["Anna Berg", "Anna Berg"]  # once per run
    assert result["answer"] == "1931"
    assert result["counts"]["retrievals"] == 1
    assert result["counts"]["llm_calls"] == 2
    assert [e["event"] for e in events] == ["decision", "retrieval", "decision"]
    assert events[1]["query"] == "Anna Berg"


def test_the_toy_model_as_a_tool_agent_writes_the_search_agents_queries_and_answers() -> None:
    llm = load_toy_model()
    retriever = toy_retriever()
    searcher = create_adaptive_rag_graph(
        llm, retriever, "search_agent", config=TOY_CONFIGS["search_agent"], prompts=TOY_PROMPTS
    )
    config = ToolAgentConfig(
        tool_format=SearchToolCalls(TOY_SEARCH_PROTOCOL),
        generate_max_length=TOY_SEARCH_PROTOCOL.turn_max_tokens,
        max_searches=4,
        max_rounds=5,
    )
    agent = create_adaptive_rag_graph(
        llm, retriever, "tool_agent", config=config, prompts=TOY_PROMPTS
    )
    questions = toy_questions()[:10]
    answers = []
    for question in questions:
        a = searcher.invoke({"question": question.question})
        b = agent.invoke({"question": question.question})
        assert [r["query"] for r in b["retrievals"]] == [r["query"] for r in a["retrievals"]]
        assert b["answer"] == a["answer"]
        answers.append(b["answer"] == question.answer)
    assert sum(answers) >= 7, answers
