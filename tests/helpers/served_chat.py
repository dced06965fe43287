"""A chat model double that answers like an OpenAI-compatible server.

It records each request's arguments, honours ``stop`` and ``max_tokens`` on its words
(each word is one token), and returns OpenAI-shaped log-probabilities when asked.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

from langchain_adaptive_rag.served import word_pieces


def confident(word: str) -> float:
    """Every word at probability 0.9."""
    return 0.9


class ServerLikeChatModel(BaseChatModel):
    """Replies in order (the last one repeats); ``failures`` first calls raise ``error``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    replies: list[str]
    probability: Callable[[str], float] = confident
    return_logprobs: bool = True
    failures: int = 0
    error: type[BaseException] = ConnectionError
    llm_type: str = "openai-chat"
    requests: list[dict[str, Any]] = Field(default_factory=list)
    answered: int = 0
    lock: Any = Field(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return self.llm_type

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self.lock:
            self.requests.append({"prompt": messages[-1].content, "stop": stop, **kwargs})
            if self.failures > 0:
                self.failures -= 1
                raise self.error("server unavailable")
            reply = self.replies[min(self.answered, len(self.replies) - 1)]
            self.answered += 1
        finish, stop_tokens = "stop", 0
        for s in stop or ():
            if s in reply:
                reply, stop_tokens = reply[: reply.index(s)], 1  # a stop string is one token
        words = word_pieces(reply)
        budget = kwargs.get("max_tokens")
        if budget is not None and len(words) > budget:
            words, finish = words[:budget], "length"
        metadata: dict[str, Any] = {"finish_reason": finish}
        if self.return_logprobs and kwargs.get("logprobs"):
            content = []
            for word in words:
                p = self.probability(word)
                top = [{"token": word, "logprob": math.log(p)}]
                if p < 1:
                    top.append({"token": " other", "logprob": math.log(1 - p)})
                content.append({"token": word, "logprob": math.log(p), "top_logprobs": top})
            metadata["logprobs"] = {"content": content}
        generated = len(words) + (stop_tokens if finish == "stop" else 0)
        message = AIMessage(
            "".join(words),
            response_metadata=metadata,
            usage_metadata={
                "input_tokens": len(str(messages[-1].content).split()),
                "output_tokens": generated,
                "total_tokens": len(str(messages[-1].content).split()) + generated,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
