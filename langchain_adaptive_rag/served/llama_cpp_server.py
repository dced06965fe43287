"""Local llama.cpp OpenAI-compatible servers for a GGUF file, on 127.0.0.1.

[`serve_llama_cpp`][] serves the file with llama-cpp-python's server at a free port for
the length of a ``with`` block, with a raw chat template (the message's text as it is,
after ``<bos>``), so that ``ChatOpenAI`` sends a base model the graphs' completion
prompts exactly as ``/v1/completions`` would: a base model's own chat template wraps them
in turns it was never trained on (Gemma 3 270M then answers nothing). The tests and the
served-model benchmark run the real model this way.

[`serve_llama_server`][] serves it with llama.cpp's own C++ ``llama-server --jinja``
(built from llama.cpp's sources, or a release binary): the model's chat template renders
the tools, and the server reads the model's tool calls, which the tool agent needs.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from langchain_adaptive_rag.errors import ModelServerError

__all__ = ["RAW_CHAT_TEMPLATE", "free_port", "serve_llama_cpp", "serve_llama_server"]

RAW_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ message['content'] }}{% endfor %}"
)
"""A chat template that sends the message's text unchanged (after the BOS token)."""


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serve_llama_cpp(
    gguf: Path,
    workdir: Path,
    *,
    alias: str = "gemma-3-270m",
    n_ctx: int = 4096,
    n_threads: int = 2,
    startup_s: float = 180.0,
) -> Iterator[str]:
    """Serve ``gguf`` until the block ends.

    Args:
        gguf: The model file.
        workdir: Where the chat template file and the server's log go.
        alias: The model name the server answers to.
        n_ctx: Context length in tokens.
        n_threads: CPU threads.
        startup_s: How long to wait for the server to answer.

    Yields:
        The server's OpenAI-compatible root URL,
        ``http://127.0.0.1:PORT/v1``.

    Raises:
        ModelServerError: The server exited or did not answer in time (the message
            ends with its log).
    """
    config = workdir / "tokenizer_config.json"
    config.write_text(
        json.dumps({"chat_template": RAW_CHAT_TEMPLATE, "bos_token": "<bos>", "eos_token": "<eos>"})
    )
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(n_threads),
        "--chat_format",
        "hf-tokenizer-config",
        "--hf_tokenizer_config_path",
        str(config),
    ]
    with _running(command, port, workdir / "llama-server.log", startup_s) as base_url:
        yield base_url


@contextlib.contextmanager
def serve_llama_server(
    binary: Path,
    gguf: Path,
    workdir: Path,
    *,
    alias: str = "model",
    n_ctx: int = 4096,
    n_threads: int = 2,
    parallel: int = 1,
    startup_s: float = 60.0,
) -> Iterator[str]:
    """Serve ``gguf`` with llama.cpp's own ``llama-server --jinja`` until the block ends.

    The model's chat template (in the GGUF file) renders the tools and the messages, and
    the server reads the model's tool calls into OpenAI's ``tool_calls``: the server the
    tool agent needs (llama-cpp-python's does not take a call back; docs/served-models.md).

    Args:
        binary: The ``llama-server`` executable.
        gguf: The model file.
        workdir: Where the server's log goes.
        alias: The model name the server answers to.
        n_ctx: Context length in tokens (shared by the slots).
        n_threads: CPU threads.
        parallel: Requests decoded together (``--parallel``).
        startup_s: How long to wait for the server to answer.

    Yields:
        The server's OpenAI-compatible root URL,
        ``http://127.0.0.1:PORT/v1``.

    Raises:
        ModelServerError: The server exited or did not answer in time (the message
            ends with its log).
    """
    port = free_port()
    command = [
        str(binary),
        "--model",
        str(gguf),
        "--alias",
        alias,
        "--jinja",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ctx-size",
        str(n_ctx),
        "--threads",
        str(n_threads),
        "--parallel",
        str(parallel),
    ]
    with _running(command, port, workdir / "llama-server.log", startup_s) as base_url:
        yield base_url


@contextlib.contextmanager
def _running(command: list[str], port: int, log: Path, startup_s: float) -> Iterator[str]:
    """Run a server ``command`` listening on ``port``; its root URL once it answers."""
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if process.poll() is not None:
                why = f"exited with {process.returncode}"
                raise ModelServerError(
                    RuntimeError(f"{why}: {log.read_text()[-1500:]}"), 1, base_url
                )
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    why = f"no answer in {startup_s:g} s"
                    raise ModelServerError(
                        TimeoutError(f"{why}: {log.read_text()[-1500:]}"), 1, base_url
                    ) from None
                time.sleep(0.5)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
