"""The text of generated tokens: each token's decoded piece, and stop-string bookkeeping.

An incomplete UTF-8 character decodes to nothing and its text comes with the token that
completes it, so the pieces of a sequence always join to its decoded text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

__all__ = [
    "clip_pieces",
    "decoded_piece",
    "longest_stop_prefix",
    "next_piece",
    "text_decoder",
    "token_pieces",
]


def longest_stop_prefix(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a stop string."""
    best = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:size]):
                best = size
                break
    return best


def clip_pieces(pieces: list[str], length: int) -> list[str]:
    """Cut ``pieces`` so that their concatenation has ``length`` characters."""
    clipped: list[str] = []
    used = 0
    for piece in pieces:
        keep = max(0, min(len(piece), length - used))
        clipped.append(piece[:keep])
        used += keep
    return clipped


def text_decoder(tokenizer: object) -> Callable[[list[int]], str]:
    """The tokenizer's ``decode(ids, skip_special_tokens=True)`` without tokenization clean-up.

    For a fast tokenizer whose class keeps transformers' own ``decode`` and ``_decode``,
    that is exactly its Rust tokenizer's ``decode`` (transformers' wrapper around it costs
    about twice the decoding itself, and the decoding loop decodes every sample's text
    at every token); any other tokenizer is called as it is.
    """
    backend = getattr(tokenizer, "_tokenizer", None)
    kind = type(tokenizer)
    transformers_decode, fast_decode = _transformers_decoders()
    if (
        backend is not None
        and getattr(kind, "decode", None) is transformers_decode
        and getattr(kind, "_decode", None) is fast_decode
    ):
        rust_decode: Callable[..., str] = backend.decode

        def decode_fast(ids: list[int]) -> str:
            return rust_decode(ids, skip_special_tokens=True)

        return decode_fast

    def decode(ids: list[int]) -> str:
        return str(
            tokenizer.decode(  # type: ignore[attr-defined]
                ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
            )
        )

    return decode


@functools.cache
def _transformers_decoders() -> tuple[object, object]:
    """The ``decode`` of transformers' tokenizers and the ``_decode`` of its fast ones."""
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # another layout of transformers: every tokenizer is called as is
        return None, None
    return PreTrainedTokenizerBase.decode, TokenizersBackend._decode


def next_piece(tokenizer: object, ids: Sequence[int], text: str) -> str:
    """Text that the last of ``ids`` adds to ``text``, the decoded text of the others.

    An incomplete UTF-8 character decodes to nothing; its text comes with the token that
    completes it, so the pieces of a sequence always join to its decoded text.

    Args:
        tokenizer: A HuggingFace tokenizer.
        ids: Token ids decoded so far, the new one last.
        text: Text of the pieces before the new token.

    Returns:
        The new token's piece.
    """
    return decoded_piece(text_decoder(tokenizer), ids, text)


def decoded_piece(decode: Callable[[list[int]], str], ids: Sequence[int], text: str) -> str:
    """[`next_piece`][] with the tokenizer's decoding function ([`text_decoder`][])."""
    decoded = decode(list(ids))
    if decoded.endswith("\ufffd"):
        return ""
    if decoded.startswith(text):
        return decoded[len(text) :]
    return decoded[len(_common_prefix(decoded, text)) :]


def token_pieces(tokenizer: object, ids: Sequence[int]) -> list[str]:
    """Decoded text piece of each token of ``ids`` (see [`next_piece`][])."""
    decode = text_decoder(tokenizer)
    pieces: list[str] = []
    text = ""
    for end in range(1, len(ids) + 1):
        piece = decoded_piece(decode, ids[:end], text)
        pieces.append(piece)
        text += piece
    return pieces


def _common_prefix(a: str, b: str) -> str:
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return a[:size]
