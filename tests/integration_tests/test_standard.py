"""LangChain's standard integration-test suite for chat models, on a tiny local model."""

from __future__ import annotations

from typing import Any

from langchain_tests.integration_tests import ChatModelIntegrationTests

from langchain_adaptive_rag import ChatTransformers
from tests.conftest import shared_tiny_llama


class TestChatTransformersIntegration(ChatModelIntegrationTests):
    @property
    def chat_model_class(self) -> type[ChatTransformers]:
        return ChatTransformers

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": shared_tiny_llama(), "min_new_tokens": 2}

    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        # A local model has no network: timeout and max_retries do not apply.
        return {"temperature": 0, "max_tokens": 100, "stop": []}

    @property
    def supports_model_override(self) -> bool:
        return False
