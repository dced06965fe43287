"""The methods served by ``langgraph dev`` from the repository's ``langgraph.json``.

A real LangGraph API server (``langgraph-cli[inmem]``) listens on 127.0.0.1, started by a
fixture and stopped after; ``langgraph_sdk`` talks to it as an application would.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langchain_adaptive_rag.served.llama_cpp_server import free_port
from langchain_adaptive_rag.toyworld import toy_questions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    command = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    assert command is not None, "langgraph-cli[inmem] is part of the test extra"
    port = free_port()
    log = tmp_path_factory.mktemp("langgraph-dev") / "server.log"
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_NO_TELEMETRY": "1"}
    env["PYTHONFAULTHANDLER"] = "1"  # a server that crashes leaves its stack in the log
    argv = [command, "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser"]
    argv += ["--no-reload", "--allow-blocking", "--config", str(ROOT / "langgraph.json")]
    with log.open("w") as output:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/ok", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            code = process.poll()
            assert code is None, f"the server exited with {code}: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server's process group (nothing left of it is not an error)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    except ProcessLookupError:  # the server and its children have exited
        pass


def _client(url: str) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=url)


QUESTION = toy_questions()[0].question


def test_every_method_is_served(server: str) -> None:
    client = _client(server)
    graphs = {a["graph_id"] for a in client.assistants.search(limit=50)}
    assert graphs == {
        "no_retrieval", "single_round", "fix_length", "fix_sentence", "ircot",
        "adaptive_rag", "flare", "dragin", "seakr", "etc", "uncertainty_gate", "vanilla",
        "ta_are", "search_agent", "tool_agent",
    }  # fmt: skip
    schema = client.assistants.get_schemas(
        next(a["assistant_id"] for a in client.assistants.search(graph_id="dragin"))
    )
    assert schema["context_schema"]["title"] == "DRAGINConfigContext"


def test_a_run_waits_for_its_answer_and_messages(server: str) -> None:
    out = _client(server).runs.wait(None, "flare", input={"messages": [("user", QUESTION)]})
    assert out["answer"] and out["counts"]["llm_calls"] >= 1
    assert [m["type"] for m in out["messages"]] == ["human", "ai"]


def test_a_run_streams_its_decisions_as_custom_events(server: str) -> None:
    parts = list(
        _client(server).runs.stream(
            None, "dragin", input={"question": QUESTION}, stream_mode="custom"
        )
    )
    decisions = [p.data for p in parts if p.event == "custom" and p.data.get("event") == "decision"]
    assert decisions and {"retrieve", "score", "threshold"} <= set(decisions[0])


def test_an_assistant_carries_its_own_threshold(server: str) -> None:
    client = _client(server)
    default = client.runs.wait(None, "dragin", input={"question": QUESTION})
    eager = client.assistants.create(graph_id="dragin", context={"theta": 0.0}, name="eager")
    forced = client.runs.wait(None, eager["assistant_id"], input={"question": QUESTION})
    assert default["counts"]["retrievals"] == 0  # the toy model knows this fact
    assert forced["counts"]["retrievals"] >= 1
    assert forced["retrievals"][0]["threshold"] == 0.0


def test_the_tool_agent_runs_create_agent_on_the_served_toy_model(server: str) -> None:
    client = _client(server)
    assistant = next(a for a in client.assistants.search(graph_id="tool_agent"))
    schema = client.assistants.get_schemas(assistant["assistant_id"])
    assert "tool_format" in schema["context_schema"]["properties"]
    out = client.runs.wait(None, "tool_agent", input={"question": QUESTION})
    assert [r["query"] for r in out["retrievals"]] == ["Lost Tower", "Edith Ljung"]
    assert out["answer"] == toy_questions()[0].answer
