"""LangChain's standard integration-test suite for chat models, on a tiny local model."""

from __future__ import annotations

from langchain_tests.integration_tests import ChatModelIntegrationTests

from tests.conftest import TinyChatParams


class TestChatTransformersIntegration(TinyChatParams, ChatModelIntegrationTests):  # type: ignore[misc]
    pass
