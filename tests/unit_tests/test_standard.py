"""LangChain's standard unit-test suite for chat models."""

from __future__ import annotations

from langchain_tests.unit_tests import ChatModelUnitTests

from tests.conftest import TinyChatParams


class TestChatTransformersUnit(TinyChatParams, ChatModelUnitTests):  # type: ignore[misc]
    pass
