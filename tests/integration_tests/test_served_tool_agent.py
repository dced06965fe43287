"""The tool agent through a real llama.cpp server: ``llama-server --jinja`` reads the calls.

llama.cpp's own C++ server (built once per machine from llama.cpp's sources,
``tests/helpers/llama_server.py``) serves the scripted tool caller as a GGUF file
(``tests/helpers/tool_caller.py``): a Hermes-form chat template in its metadata, weights
that call the search tool until a ``<tool_response>`` is in the context, then answer. The
server renders the tools with the template, parses the model's ``<tool_call>`` into
OpenAI's ``tool_calls`` and renders the call and the tool's result back into the next
prompt; ``ChatOpenAI`` talks to it as to any OpenAI endpoint. No model here calls tools
of its own accord through a server (Gemma 3 270M, a base model, writes no ``<tool_call>``;
docs/served-models.md), so the calls are scripted and the server, the client and the
agent are real.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from langchain_adaptive_rag.cli import main
from langchain_adaptive_rag.errors import ModelServerError
from langchain_adaptive_rag.graphs.tool_agent import ToolAgentConfig, create_tool_agent_graph
from langchain_adaptive_rag.served.llama_cpp_server import serve_llama_server
from tests.helpers.hotpot import HOTPOT
from tests.helpers.llama_server import llama_server_binary
from tests.helpers.scripted import TitledTableRetriever
from tests.helpers.tool_caller import CALL, FOUND, QUESTION, write_tool_caller_gguf

pytest.importorskip("langchain.agents")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("llama-server")
    gguf = write_tool_caller_gguf(root / "tool-caller.gguf")
    with serve_llama_server(llama_server_binary(), gguf, root, alias="tool-caller") as base_url:
        yield base_url


def _chat(base_url: str) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=base_url, api_key="EMPTY", model="tool-caller", temperature=0, max_retries=0
    )


def test_the_server_reads_the_models_call_into_openai_tool_calls(server: str) -> None:
    @tool
    def search(query: str) -> str:
        """Search an encyclopedia."""
        return query

    reply = _chat(server).bind_tools([search]).invoke(QUESTION)

    assert reply.content == ""
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("search", {"query": "Anna Berg"})
    ]
    assert reply.response_metadata["finish_reason"] == "tool_calls"
    # without tools the template lists none, and the model writes the call as text
    assert _chat(server).invoke(QUESTION).content == CALL


def test_the_tool_agent_searches_reads_the_result_and_answers_through_the_server(
    server: str,
) -> None:
    retriever = TitledTableRetriever(table={"Anna Berg": FOUND})
    config = ToolAgentConfig(generate_max_length=8, retrieve_topk=1)
    graph = create_tool_agent_graph(_chat(server), retriever, config=config)

    streamed = graph.stream({"question": QUESTION}, stream_mode=["custom", "updates"])
    events = [chunk for mode, chunk in streamed if mode == "custom"]
    result = graph.invoke({"question": QUESTION})

    # the second call's prompt held the call and the tool's result (the server rendered
    # them with the template): the model answered instead of calling again
    assert retriever.queries == ["Anna Berg", "Anna Berg"]  # once per run
    assert result["answer"] == "1931"
    counts = result["counts"]
    assert (counts["retrievals"], counts["llm_calls"]) == (1, 2)
    assert counts["prompt_tokens"] > 0 and counts["generated_tokens"] == 4  # the server's
    assert [e["event"] for e in events] == ["decision", "retrieval", "decision"]
    assert events[1]["query"] == "Anna Berg"
    assert events[1]["doc_texts"] == [FOUND[0][1]]


def test_adaptive_rag_eval_runs_the_tool_agent_on_the_server(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "hotpot_dev.json"
    data.write_text(json.dumps(HOTPOT[:2]))
    out = tmp_path / "tool-agent"
    run = ["eval", "--method", "tool_agent", "--dataset", "hotpotqa", "--data", str(data)]
    run += ["--model", "openai:tool-caller", "--base-url", server, "--request-retries", "0"]
    run += ["--config", "generate_max_length=8", "--no-progress", "--out", str(out)]

    assert main(run) == 0

    assert ", 0 failed" in capsys.readouterr().out
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["h1", "h2"]
    assert all(r["error"] is None for r in records)
    # the scripted model searches once, for its one query, on every question
    assert [(r["counts"]["retrievals"], r["counts"]["llm_calls"]) for r in records] == [
        (1, 2),
        (1, 2),
    ]
    assert [r["prediction"]["answer"] for r in records] == ["1931", "1931"]


def test_a_server_that_cannot_load_its_model_ends_in_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    with (
        pytest.raises(ModelServerError, match=r"exited with \d+: .*missing\.gguf"),
        serve_llama_server(llama_server_binary(), missing, tmp_path),
    ):
        pass
