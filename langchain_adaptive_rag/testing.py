"""Small local models and test doubles that users and tests can import.

Nothing here downloads anything: [`create_tiny_model`][] trains a byte-level BPE
tokenizer on a few sentences and saves a randomly initialised causal LM next to it, in
the same layout as a model from the HuggingFace hub.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from langchain_adaptive_rag.errors import AttentionUnavailableError
from langchain_adaptive_rag.options import (
    CaptureOptions,
    DecodingOptions,
    GenerationTrace,
    HiddenSite,
    TokenEvent,
)
from langchain_adaptive_rag.signals import tokens_covering
from langchain_adaptive_rag.token_signals import AttentionMatrix

__all__ = [
    "CHATML_TEMPLATE",
    "SPECIAL_TOKENS",
    "FakeTraceModel",
    "ScriptedResponse",
    "ScriptedToolCaller",
    "ScriptedVocabulary",
    "TinyArchitecture",
    "create_tiny_model",
    "train_tokenizer",
]

TinyArchitecture = Literal["llama", "qwen2", "gpt2", "mistral", "gemma", "deepseek_v3"]
"""Architectures [`create_tiny_model`][] can build (``mistral`` with a 16-token sliding
window, ``gemma`` with its scaled embeddings and GeGLU MLP)."""

SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>")
"""Special tokens of the tiny tokenizers, in id order."""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""The ChatML chat template used by the tiny models."""

_SAMPLE_TEXT = (
    "Question: When was the director of film Blue Harbour born?",
    "Answer: The film Blue Harbour was directed by Anna Berg. Anna Berg was born in 1931. "
    "So the answer is 1931.",
    "Question: Who was born first, Carl Lind or Maria Holm?",
    "Answer: Carl Lind was born in 1902. Maria Holm was born in 1899. So the answer is Maria Holm.",
    "Context:\n[1] Anna Berg (born 1931) is a Swedish film director.\n"
    "Answer in the same format as before.",
    "The capital of France is Paris. The river Seine flows through the city.",
    "Retrieval-augmented generation reads documents before it answers a question.",
    "Hello! How are you today? I am fine, thank you. What is your name?",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024. Punctuation: , . ; : ! ? ' \" ( ) [ ]",
    "Ünïcödé wörds: café, naïve, Zürich, São Paulo, 東京, Москва.",
)


def train_tokenizer(texts: Iterable[str] = _SAMPLE_TEXT, *, vocab_size: int = 512) -> object:
    """Train a byte-level BPE tokenizer with a ChatML template.

    Args:
        texts: Training text.
        vocab_size: Target vocabulary size (special tokens included).

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` that adds ``<s>`` in front of plain text,
        ends sequences with ``</s>`` and marks chat turns with ``<|im_start|>``/``<|im_end|>``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        chat_template=CHATML_TEMPLATE,
    )


def create_tiny_model(
    path: str | Path,
    *,
    architecture: TinyArchitecture = "llama",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    max_positions: int = 1024,
    seed: int = 0,
    extra_tokens: Sequence[str] = (),
) -> Path:
    """Save a randomly initialised causal LM and a trained tokenizer under ``path``.

    The directory loads with ``AutoModelForCausalLM.from_pretrained`` and, for Llama and
    GPT-2, ``AutoTokenizer.from_pretrained`` (load Qwen2 tokenizers with
    ``PreTrainedTokenizerFast.from_pretrained``: ``AutoTokenizer`` swaps in Qwen's own
    pre-tokenizer). Both ``</s>`` and ``<|im_end|>`` end generation.

    Args:
        path: Output directory (created).
        architecture: ``llama``, ``qwen2``, ``gpt2``, ``mistral`` (sliding window 16),
            ``gemma`` or ``deepseek_v3`` (multi-head latent attention: its cache holds a
            compressed latent and a rotary key, of other sizes than its keys and values).
        hidden_size: Model width.
        num_layers: Number of decoder layers.
        num_heads: Attention heads.
        max_positions: Context length.
        seed: Seed of the random weights.
        extra_tokens: Special tokens added to the vocabulary, one id each (Self-RAG's
            reflection tokens).

    Returns:
        The directory.
    """
    from transformers import (
        DeepseekV3Config,
        DeepseekV3ForCausalLM,
        GemmaConfig,
        GemmaForCausalLM,
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer()
    if extra_tokens:
        tokenizer.add_tokens(list(extra_tokens), special_tokens=True)  # type: ignore[attr-defined]
    vocab = len(tokenizer)  # type: ignore[arg-type]
    bos, eos, pad = 1, 2, 3
    im_end = SPECIAL_TOKENS.index("<|im_end|>")
    torch.manual_seed(seed)
    model: torch.nn.Module
    if architecture == "gpt2":
        model = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=vocab,
                n_embd=hidden_size,
                n_layer=num_layers,
                n_head=num_heads,
                n_positions=max_positions,
                bos_token_id=bos,
                eos_token_id=eos,
                pad_token_id=pad,
            )
        )
    else:
        common = {
            "vocab_size": vocab,
            "hidden_size": hidden_size,
            "intermediate_size": hidden_size * 2,
            "num_hidden_layers": num_layers,
            "num_attention_heads": num_heads,
            "num_key_value_heads": max(1, num_heads // 2),
            "max_position_embeddings": max_positions,
            "bos_token_id": bos,
            "eos_token_id": eos,
            "pad_token_id": pad,
            "tie_word_embeddings": False,
        }
        if architecture == "llama":
            model = LlamaForCausalLM(LlamaConfig(**common))
        elif architecture == "qwen2":
            model = Qwen2ForCausalLM(Qwen2Config(**common))
        elif architecture == "mistral":
            model = MistralForCausalLM(MistralConfig(**common, sliding_window=16))
        elif architecture == "gemma":
            model = GemmaForCausalLM(GemmaConfig(**common, head_dim=hidden_size // num_heads))
        elif architecture == "deepseek_v3":
            head = hidden_size // num_heads
            latent = {
                "num_key_value_heads": num_heads,  # eager attention repeats none
                "q_lora_rank": None,
                "kv_lora_rank": hidden_size // 2,
                "qk_rope_head_dim": head // 2,
                "qk_nope_head_dim": head // 2,
                "v_head_dim": head,
                "first_k_dense_replace": num_layers,  # dense MLPs: no expert routing
            }
            model = DeepseekV3ForCausalLM(DeepseekV3Config(**(common | latent)))
        else:
            msg = (
                "architecture must be 'llama', 'qwen2', 'gpt2', 'mistral', 'gemma' or "
                f"'deepseek_v3', got {architecture!r}."
            )
            raise ValueError(msg)
    model.generation_config.eos_token_id = [eos, im_end]  # type: ignore[union-attr]
    model.generation_config.pad_token_id = pad  # type: ignore[union-attr]
    model.save_pretrained(out)  # type: ignore[operator]
    tokenizer.save_pretrained(out)  # type: ignore[attr-defined]
    return out


@dataclass(frozen=True)
class ScriptedResponse:
    """What a [`FakeTraceModel`][] generates for one call, with chosen signals.

    ``tokens`` default to the text's words, each with its leading whitespace; the
    per-token lists default to certainty (logprob 0, entropy 0).
    """

    text: str
    tokens: tuple[str, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    entropies: tuple[float, ...] | None = None
    attention: tuple[tuple[float, ...], ...] | None = None
    """Head-averaged rows over the generated tokens, ``(T, T)``; default: uniform causal."""
    hidden: tuple[float, ...] | None = None
    """The hidden state to report when one is asked for (default: zeros of size 4)."""
    logsumexp: tuple[float, ...] | None = None
    """``logsumexp`` of each position's logits (default: 0)."""
    token_ids: tuple[int, ...] | None = None
    """Each token's id (default: its index)."""
    token_logprobs: tuple[Mapping[int, float], ...] | None = None
    """Per position, log-probabilities of token ids; a call's
    ``DecodingOptions.token_logprobs`` reads them (an id a position does not list: -100)."""
    top_logprobs: tuple[tuple[float, ...], ...] | None = None
    """Per position, the largest log-probabilities in decreasing order; a call's
    ``DecodingOptions.top_logprobs`` reads the first that many (default: the chosen
    token's log-probability, then -100)."""

    def pieces(self) -> list[str]:
        """The token pieces of the response."""
        if self.tokens is not None:
            if "".join(self.tokens) != self.text:
                msg = f"ScriptedResponse tokens {self.tokens!r} do not join to {self.text!r}."
                raise ValueError(msg)
            return list(self.tokens)
        return re.findall(r"\s*\S+", self.text) or ([self.text] if self.text else [])


class ScriptedVocabulary:
    """Token ids by text, looked up as a ``transformers`` tokenizer does."""

    unk_token_id: int | None = None

    def __init__(self, ids: Mapping[str, int]) -> None:
        """Keep the ids.

        Args:
            ids: Token text to id.
        """
        self.ids = dict(ids)

    def convert_tokens_to_ids(self, tokens: str) -> int | None:
        """The id of ``tokens``, ``None`` when it is not in the vocabulary."""
        return self.ids.get(tokens)


class FakeTraceModel:
    """A scripted stand-in for [`ChatTransformers`][] in graphs.

    Each ``generate_trace`` call returns the next scripted response, cut to
    ``max_new_tokens`` tokens and at the stop string that completes first (as decoding
    stops), and records its prompt, so a test can check exactly what each node asked.
    """

    def __init__(
        self,
        responses: Sequence[ScriptedResponse | str],
        *,
        attention_available: bool = True,
        forward_attention_fn: Callable[[list[str]], np.ndarray] | None = None,
        vocabulary: Mapping[str, int] | None = None,
    ) -> None:
        """Script the responses.

        Args:
            responses: One per expected call, in order (strings mean certain tokens).
            attention_available: What ``attention_available`` reports.
            forward_attention_fn: Per-head attention ``(H, S, S)`` for the word pieces of
                a ``forward_attention`` text (default: one head, uniform causal).
            vocabulary: Token ids by token text, served as ``hf_tokenizer``'s
                ``convert_tokens_to_ids`` (Self-RAG looks its reflection tokens up so).
        """
        self._vocabulary = dict(vocabulary) if vocabulary is not None else None
        self.forward_attention_fn = forward_attention_fn or _uniform_causal
        self.attention_texts: list[str] = []
        self.calls: list[dict[str, object]] = []
        self.responses = [
            r if isinstance(r, ScriptedResponse) else ScriptedResponse(r) for r in responses
        ]
        self.prompts: list[str] = []
        self._attention = attention_available

    @property
    def attention_available(self) -> bool:
        """Whether attention capture is reported as available."""
        return self._attention

    @property
    def hf_tokenizer(self) -> ScriptedVocabulary | None:
        """The scripted vocabulary's lookup, or ``None`` when none was given."""
        return None if self._vocabulary is None else ScriptedVocabulary(self._vocabulary)

    def check_attention(self, layer: int) -> None:
        """Fail as a model without attention rows would, when scripted so.

        Raises:
            AttentionUnavailableError: If the model was made with
                ``attention_available=False``.
        """
        if not self._attention:
            raise AttentionUnavailableError(None, f"scripted without attention (layer {layer})")

    def check_hidden(self, layer: int, site: HiddenSite) -> None:
        """Accept every layer and site: scripted hidden states need no module."""

    @property
    def decoding(self) -> DecodingOptions:
        """The default decoding settings (greedy; the graphs set budget and stops)."""
        return DecodingOptions()

    def generate_trace(
        self,
        prompt: str,
        *,
        decoding: DecodingOptions | None = None,
        capture: CaptureOptions | None = None,
        n: int = 1,
        include_greedy: bool = False,
        on_token: Callable[[TokenEvent], None] | None = None,
    ) -> list[GenerationTrace]:
        """Return the next ``n`` (+1 with ``include_greedy``) scripted responses as traces.

        The budget (``max_new_tokens``) and stop strings of ``decoding`` are applied;
        the sampling options and ``capture``'s layers are recorded in ``calls`` and
        otherwise ignored: the script already says what each sample is. Each call also
        records the name of the thread it ran in.
        """
        options = decoding if decoding is not None else self.decoding
        signals = capture if capture is not None else CaptureOptions()
        count = n + (1 if include_greedy else 0)
        self.calls.append(
            {
                "prompt": prompt,
                "n": n,
                "include_greedy": include_greedy,
                "do_sample": options.do_sample,
                "seed": options.seed,
                "attention_layer": signals.attention_layer,
                "hidden_layer": signals.hidden_layer,
                "hidden_site": signals.hidden_site,
                "hidden_at": signals.hidden_at,
                "stop": options.stop,
                "max_new_tokens": options.max_new_tokens,
                "thread": threading.current_thread().name,
            }
        )
        traces = [
            self._one(
                prompt,
                options.max_new_tokens,
                options.stop,
                signals.attention,
                signals.hidden,
                options.token_logprobs,
                options.top_logprobs,
            )
            for _ in range(count)
        ]
        if on_token is not None and traces:
            first = traces[0]
            for index, piece in enumerate(first.tokens):
                on_token(
                    TokenEvent(
                        sample=0,
                        index=index,
                        token_id=index,
                        piece=piece,
                        logprob=float(first.logprobs[index]),
                        entropy=float(first.entropies[index]),
                    )
                )
        return traces

    def _one(
        self,
        prompt: str,
        max_new_tokens: int | None,
        stop: Sequence[str] | None,
        attention: bool,
        hidden: bool,
        watched: Sequence[int] = (),
        top: int = 0,
    ) -> GenerationTrace:
        """One scripted response as a trace."""
        if len(self.prompts) >= len(self.responses):
            msg = (
                f"FakeTraceModel was called {len(self.prompts) + 1} times but scripts "
                f"{len(self.responses)} responses. Last prompt:\n{prompt}"
            )
            raise AssertionError(msg)
        response = self.responses[len(self.prompts)]
        self.prompts.append(prompt)
        pieces = response.pieces()
        self._last_pieces = list(pieces)
        count = len(pieces)
        for name in ("logprobs", "entropies", "logsumexp"):
            values = getattr(response, name)
            if values is not None and len(values) != count:
                msg = (
                    f"ScriptedResponse {response.text!r} has {count} tokens but "
                    f"{len(values)} {name}."
                )
                raise ValueError(msg)
        logprobs = list(response.logprobs or [0.0] * count)
        entropies = list(response.entropies or [0.0] * count)
        lse = list(response.logsumexp or [0.0] * count)
        finish: Literal["stop", "length"] = "stop"
        if max_new_tokens is not None and count > max_new_tokens:
            pieces, count, finish = pieces[:max_new_tokens], max_new_tokens, "length"
        text = "".join(pieces)
        stop_string = None
        found = [(text.find(c), i, c) for i, c in enumerate(stop or ()) if c in text]
        if found:  # decoding stops at the stop string that completes first
            index, _, candidate = min(found, key=lambda f: (f[0] + len(f[2]), f[1]))
            count = tokens_covering(pieces, index + len(candidate))
            pieces = pieces[:count]
            text, stop_string, finish = text[:index], candidate, "stop"
        attention_rows = None
        if attention:
            full = (
                np.asarray(response.attention, dtype=np.float32)
                if response.attention is not None
                else _uniform_causal(pieces)[0]
            )
            attention_rows = full[:count, :count]
        kept: list[str] = []
        used = 0
        for piece in pieces:
            kept.append(piece[: max(0, len(text) - used)])
            used += len(piece)
        hidden_state = None
        if hidden:
            hidden_state = np.asarray(response.hidden or (0.0,) * 4, dtype=np.float32)
        ids = list(response.token_ids or range(len(response.pieces())))[:count]
        watched_logprobs = None
        if watched:
            rows = list(response.token_logprobs or ())[:count]
            rows += [{}] * (count - len(rows))
            watched_logprobs = np.asarray(
                [[row.get(i, -100.0) for i in watched] for row in rows], dtype=np.float32
            ).reshape(count, len(watched))
        top_logprobs = None
        if top:
            scripted = list(response.top_logprobs or ())[:count]
            scripted += [(lp,) for lp in logprobs[len(scripted) : count]]
            top_logprobs = np.asarray(
                [(tuple(row) + (-100.0,) * top)[:top] for row in scripted], dtype=np.float32
            ).reshape(count, top)
        return GenerationTrace(
            prompt_ids=np.zeros(0, dtype=np.int64),
            token_ids=np.asarray(ids, dtype=np.int64),
            token_logprobs=watched_logprobs,
            top_logprobs=top_logprobs,
            tokens=kept,
            text=text,
            logprobs=np.asarray(logprobs[:count], dtype=np.float32),
            entropies=np.asarray(entropies[:count], dtype=np.float32),
            logsumexp=np.asarray(lse[:count], dtype=np.float32),
            finish_reason=finish,
            stop_string=stop_string,
            attention=attention_rows,
            hidden=hidden_state,
        )

    def forward_attention(self, text: str | Sequence[int], *, layer: int = -1) -> AttentionMatrix:
        """Attention over ``text`` split into word pieces (ids: the last draft's pieces)."""
        if isinstance(text, str):
            pieces = re.findall(r"\s*\S+", text)
        else:
            pieces = self._last_pieces[: len(text)]
        self.attention_texts.append("".join(pieces))
        weights = np.asarray(self.forward_attention_fn(pieces), dtype=np.float32)
        return AttentionMatrix(
            token_ids=np.arange(len(pieces), dtype=np.int64), tokens=pieces, weights=weights
        )


def _uniform_causal(pieces: Sequence[str]) -> np.ndarray:
    """One head whose row ``j`` spreads evenly over positions ``0 .. j``."""
    size = len(pieces)
    rows = np.tril(np.ones((size, size), dtype=np.float32))
    result: np.ndarray = (rows / np.maximum(rows.sum(axis=1, keepdims=True), 1.0))[None]
    return result


class ScriptedToolCaller(BaseChatModel):
    """A tool-calling chat model of fixed behaviour, for trying an agent without a server.

    Given a user message it calls its first bound tool with ``{"question": <the
    message>}``; given that tool's reply it answers with the reply's first line. It
    stands in for any chat model with tool calling in ``create_agent``.
    """

    tool_name: str = ""
    """The tool it calls (set by ``bind_tools``: the first tool's name)."""

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-caller"

    def bind_tools(  # type: ignore[override]
        self, tools: Sequence[BaseTool], *, tool_choice: str | None = None
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """This model, calling the first of ``tools``.

        Args:
            tools: The agent's tools (the first is called).
            tool_choice: Accepted as LangChain passes it; the first tool is called.

        Returns:
            A copy that calls it.
        """
        return self.model_copy(update={"tool_name": tools[0].name if tools else ""})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,  # LangChain's interface: call options a scripted model ignores
    ) -> ChatResult:
        last = messages[-1] if messages else HumanMessage("")
        if isinstance(last, ToolMessage) or not self.tool_name:
            reply = AIMessage(str(last.text).splitlines()[0] if last.text else "")
        else:
            call = {"name": self.tool_name, "args": {"question": last.text}, "id": "call-1"}
            reply = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])
