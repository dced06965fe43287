"""What a caller asks of a decoding and what it gets back.

[`DecodingOptions`][] (how tokens are chosen, when decoding stops) and
[`CaptureOptions`][] (which internal signals are read) go in; a
[`GenerationTrace`][] per sample comes out, and [`TokenEvent`][]s stream while it
decodes. These types are shared by [`ChatTransformers`][], the served models and the
graphs; the engine reads them and nothing here reads the engine. [`TraceModel`][] is
what the graphs need of a model, and [`GraphModel`][] what a graph takes as one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

import numpy as np

from langchain_adaptive_rag.errors import AdaptiveRAGError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseLanguageModel

__all__ = [
    "CaptureOptions",
    "DecodingOptions",
    "FinishReason",
    "GenerationTrace",
    "GraphModel",
    "HiddenPosition",
    "HiddenSite",
    "SignalDistribution",
    "TokenEvent",
    "TraceModel",
    "capture_covers",
    "capture_union",
]


HiddenSite = Literal["residual", "mlp"]
"""Where a hidden state is read: the decoder layer's output (``residual`` stream) or
the output of its MLP sub-block (``mlp``, the site SeaKR's vLLM patch reads)."""
HiddenPosition = Literal["last", "eos", "eos_replacing_last"]
"""``last``: the final generated token's position. ``eos``: an end-of-sequence token
fed at the end (SeaKR): it replaces the final token when generation stopped on EOS or a
stop string, and is appended after it when the token budget ran out."""
SignalDistribution = Literal["raw", "processed"]
"""``raw``: softmax of the model's logits. ``processed``: the distribution actually
sampled from, after the EOS mask of ``min_new_tokens``, temperature, top-k and top-p."""
FinishReason = Literal["stop", "length"]
"""``stop``: an end-of-sequence token or a stop string; ``length``: the token budget."""


@dataclass(frozen=True)
class DecodingOptions:
    """How tokens are chosen and when decoding stops.

    Decoding is greedy unless ``do_sample`` is true and ``temperature`` is above zero.
    """

    max_new_tokens: int = 256
    """Upper bound on generated tokens."""
    min_new_tokens: int = 0
    """End-of-sequence tokens are masked until this many tokens exist."""
    do_sample: bool = False
    """Sample from the processed distribution instead of taking its argmax."""
    temperature: float = 1.0
    """Softmax temperature for sampling (0 means greedy)."""
    top_k: int | None = None
    """Keep only the ``top_k`` most likely tokens when sampling."""
    top_p: float | None = None
    """Keep the smallest set of tokens whose probability reaches ``top_p`` when sampling."""
    seed: int | None = None
    """Seed of sample 0; sample ``i`` uses ``seed + i``. ``None`` draws fresh seeds."""
    stop: tuple[str, ...] = ()
    """Stop strings; they may span several tokens and are cut from the text."""
    signal_distribution: SignalDistribution = "raw"
    """Distribution that logprobs and entropies are computed from."""
    top_logprobs: int = 0
    """How many alternatives (token, logprob) to record per position."""
    token_logprobs: tuple[int, ...] = ()
    """Token ids whose log-probabilities are recorded at every position, whatever their
    rank (Self-RAG reads its reflection tokens' so)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            msg = f"max_new_tokens must be >= 1, got {self.max_new_tokens}."
            raise AdaptiveRAGError(msg)
        if not 0 <= self.min_new_tokens <= self.max_new_tokens:
            msg = (
                f"min_new_tokens must be in [0, max_new_tokens={self.max_new_tokens}], "
                f"got {self.min_new_tokens}."
            )
            raise AdaptiveRAGError(msg)
        if self.temperature < 0:
            msg = f"temperature must be >= 0, got {self.temperature}."
            raise AdaptiveRAGError(msg)
        if self.top_k is not None and self.top_k < 1:
            msg = f"top_k must be >= 1 or None, got {self.top_k}."
            raise AdaptiveRAGError(msg)
        if self.top_p is not None and not 0 < self.top_p <= 1:
            msg = f"top_p must be in (0, 1] or None, got {self.top_p}."
            raise AdaptiveRAGError(msg)
        if any(not s for s in self.stop):
            msg = f"stop strings must be non-empty, got {list(self.stop)!r}."
            raise AdaptiveRAGError(msg)
        if not 0 <= self.top_logprobs <= 20:
            msg = f"top_logprobs must be in [0, 20], got {self.top_logprobs}."
            raise AdaptiveRAGError(msg)
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in self.token_logprobs):
            msg = (
                f"token_logprobs must be a tuple of token ids (integers >= 0), got "
                f"{self.token_logprobs!r}."
            )
            raise AdaptiveRAGError(msg)

    @property
    def sampling(self) -> bool:
        """Whether tokens are sampled (``do_sample`` and a positive temperature)."""
        return self.do_sample and self.temperature > 0


@dataclass(frozen=True)
class CaptureOptions:
    """Which internal signals to read while decoding, beyond logprobs and entropies."""

    logprobs: bool = False
    """The caller reads the generated tokens' log-probabilities. [`ChatTransformers`][]
    always records them; a served model must return them (``logprobs=True``) or fail."""
    attention: bool = False
    """Record each generated token's head-averaged attention row (any kernel)."""
    attention_layer: int = -1
    """Decoder layer whose attention is read (negative counts from the last)."""
    attention_head_max: bool = False
    """Also record the per-position maximum over heads."""
    hidden: bool = False
    """Record one hidden state at the end of each sample."""
    hidden_layer: int = -1
    """Decoder layer whose hidden state is read (negative counts from the last)."""
    hidden_site: HiddenSite = "residual"
    """Read the layer's output or its MLP sub-block's output."""
    hidden_at: HiddenPosition = "last"
    """Where the hidden state is read: ``last``, the final generated token; ``eos``, an
    end-of-sequence token fed in place of a stop string's last token or after a length
    ending's last token; ``eos_replacing_last``, an end-of-sequence token fed in place of
    the last token for every ending (SeaKR's vLLM patch; a length ending's last token is
    then not fed, so its attention row, if captured, is the EOS's)."""


def capture_covers(loop: CaptureOptions, request: CaptureOptions) -> bool:
    """Whether hooks set for ``loop`` read every signal ``request`` asks for.

    Only the hooked layers matter: ``hidden_at`` is each request's own (it decides which
    tokens that request feeds at its end).
    """
    if request.attention and not (
        loop.attention
        and loop.attention_layer == request.attention_layer
        and (loop.attention_head_max or not request.attention_head_max)
    ):
        return False
    return not request.hidden or (
        loop.hidden
        and loop.hidden_layer == request.hidden_layer
        and loop.hidden_site == request.hidden_site
    )


def capture_union(a: CaptureOptions, b: CaptureOptions) -> CaptureOptions | None:
    """Hooks serving both ``a`` and ``b``, or ``None`` when they need different layers."""
    attention = a if a.attention else b
    hidden = a if a.hidden else b
    union = CaptureOptions(
        logprobs=a.logprobs or b.logprobs,
        attention=a.attention or b.attention,
        attention_layer=attention.attention_layer,
        attention_head_max=a.attention_head_max or b.attention_head_max,
        hidden=a.hidden or b.hidden,
        hidden_layer=hidden.hidden_layer,
        hidden_site=hidden.hidden_site,
        hidden_at=hidden.hidden_at,
    )
    return union if capture_covers(union, a) and capture_covers(union, b) else None


@dataclass
class GenerationTrace:
    """One generated sample and its per-token signals (numpy only, no tensors).

    ``T`` is the number of generated tokens (end-of-sequence excluded) and ``P`` the
    number of prompt tokens.
    """

    prompt_ids: np.ndarray
    """Prompt token ids, shape ``(P,)``."""
    token_ids: np.ndarray
    """Generated token ids, shape ``(T,)``; tokens of a stop string are kept."""
    tokens: list[str]
    """Text piece of each token; ``"".join(tokens) == text`` (stop strings cut)."""
    text: str
    """The generated text, without a stop string or special tokens."""
    logprobs: np.ndarray
    """Log-probability of each chosen token, shape ``(T,)``."""
    entropies: np.ndarray
    """Entropy (nats) of each next-token distribution, shape ``(T,)``."""
    finish_reason: FinishReason
    """Why decoding stopped."""
    logsumexp: np.ndarray | None = None
    """``logsumexp`` of the raw logits at each position, shape ``(T,)`` (energy score)."""
    stop_string: str | None = None
    """The stop string that ended decoding, if any."""
    seed: int | None = None
    """Seed this sample was drawn with (``None`` for greedy samples)."""
    attention: np.ndarray | None = None
    """Shape ``(T, P + T)``: row ``t`` is the head-averaged attention of the position of
    token ``t`` over positions ``0 .. P + t`` (zeros after)."""
    attention_head_max: np.ndarray | None = None
    """Like ``attention`` with the maximum over heads instead of the mean."""
    hidden: np.ndarray | None = None
    """Hidden state at the requested layer, site and position, shape ``(d,)``."""
    top_token_ids: np.ndarray | None = None
    """Most likely token ids at each position, shape ``(T, top_logprobs)``."""
    top_logprobs: np.ndarray | None = None
    """Their log-probabilities, shape ``(T, top_logprobs)``."""
    top_tokens: list[tuple[str, ...]] | None = None
    """A served model's alternatives as text, per position in the order of
    ``top_logprobs`` (a server gives no token ids)."""
    token_logprobs: np.ndarray | None = None
    """Log-probabilities of ``DecodingOptions.token_logprobs`` at each position, shape
    ``(T, len(token_logprobs))``; ``None`` when none were asked for (or the model cannot
    give them: a served model)."""
    entropy_outside_mass: np.ndarray | None = None
    """``None`` when ``entropies`` are exact (over the whole vocabulary). A served model's
    entropies are lower bounds from its top-k log-probabilities
    (``top_k_entropy``); this is the probability
    mass outside those ``k`` at each position, shape ``(T,)``, which bounds the error."""

    @property
    def num_prompt_tokens(self) -> int:
        """``P``, the prompt length in tokens."""
        return int(self.prompt_ids.shape[0])

    @property
    def num_tokens(self) -> int:
        """``T``, the number of generated tokens."""
        return int(self.token_ids.shape[0])


@dataclass(frozen=True)
class TokenEvent:
    """A generated token released by the decoder (after stop-string hold-back)."""

    sample: int
    index: int
    token_id: int
    piece: str
    logprob: float
    entropy: float
    top_token_ids: tuple[int, ...] = ()
    top_logprobs: tuple[float, ...] = ()


class TraceModel(Protocol):
    """What the graphs need from a model ([`ChatTransformers`][] or a test double)."""

    @property
    def decoding(self) -> DecodingOptions:
        """The model's own decoding settings (the graphs change budget and stops only)."""
        ...

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
        """Generate from a completion prompt; see ``ChatTransformers.generate_trace``."""
        ...

    @property
    def attention_available(self) -> bool:
        """Whether attention rows can be captured."""
        ...

    def check_attention(self, layer: int) -> None:
        """Fail, naming the fix, unless the attention rows of ``layer`` can be captured."""
        ...

    def check_hidden(self, layer: int, site: HiddenSite) -> None:
        """Fail, naming the fix, unless the hidden state at ``layer``/``site`` exists."""
        ...


GraphModel: TypeAlias = "TraceModel | BaseLanguageModel[Any]"
"""What a graph takes as its model: [`ChatTransformers`][] (or another
[`TraceModel`][]), or any LangChain chat model or LLM, run as a
[`ServedModel`][]."""
