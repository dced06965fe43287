"""Token pieces: the decoding loop's text decoder equals the tokenizer's ``decode``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from langchain_adaptive_rag.engine.token_text import next_piece, text_decoder, token_pieces

TEXTS = ["Anna Berg was born in 1931 in Oslo.", "Ærø, København: ñandú — 東京 🙂 done"]


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2", "mistral", "gemma"])
def test_the_text_decoder_equals_decode_on_every_prefix(
    tiny_model_dirs: dict[str, Path], arch: str
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dirs[arch])
    decode = text_decoder(tokenizer)
    assert decode.__name__ == "decode_fast"  # transformers' own fast tokenizer: the shortcut
    specials = [i for i in (tokenizer.bos_token_id, tokenizer.eos_token_id) if i is not None]
    for text in TEXTS:
        ids = [*specials[:1], *tokenizer.encode(text, add_special_tokens=False), *specials]
        for end in range(1, len(ids) + 1):  # partial characters and special tokens included
            want = tokenizer.decode(
                ids[:end], skip_special_tokens=True, clean_up_tokenization_spaces=False
            )
            assert decode(ids[:end]) == want
        pieces = token_pieces(tokenizer, ids)
        assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=True)
        assert pieces[-1] == next_piece(tokenizer, ids, "".join(pieces[:-1]))


def test_a_tokenizer_with_its_own_decoding_is_called_as_it_is(llama_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(llama_dir)

    class Shouting(type(tokenizer)):  # type: ignore[misc]
        def _decode(self, token_ids: Any, **kwargs: Any) -> str:
            return str(super()._decode(token_ids, **kwargs)).upper()

    tokenizer.__class__ = Shouting
    decode = text_decoder(tokenizer)
    ids = tokenizer.encode(TEXTS[0], add_special_tokens=False)
    assert decode(ids) == TEXTS[0].upper() == "".join(token_pieces(tokenizer, ids))
