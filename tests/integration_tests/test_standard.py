"""LangChain's standard integration-test suite for chat models, on a tiny local model."""

from __future__ import annotations

from langchain_tests.integration_tests import ChatModelIntegrationTests

from tests.conftest import TinyChatParams


class TestChatTransformersIntegration(TinyChatParams, ChatModelIntegrationTests):  # type: ignore[misc]
    @property
    def has_tool_calling(self) -> bool:
        # The tiny random model writes no tool calls. ChatTransformers' tool calling (the
        # unit suite's bind_tools checks run) is tested on models that call tools:
        # tests/integration_tests/test_tool_agent_local_model.py.
        return False
