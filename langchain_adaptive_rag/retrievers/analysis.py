"""Text analysis for BM25: lower-case word tokens, English stop words, optional stemming.

The analyzer is data ([`BM25Analyzer`][]), not a callable, so a saved index records
exactly how its terms were made and a load with other settings is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from langchain_adaptive_rag.errors import AdaptiveRAGError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["BM25Analyzer", "english_analyzer"]

Stemmer = Literal["english"]
"""Snowball stemmers offered (PyStemmer's ``english`` is Porter2)."""

_WORD = re.compile(r"\w+", re.UNICODE)
TOKEN_PATTERN = _WORD.pattern
"""Index terms are the ``\\w+`` runs of the lower-cased text."""


StopWords = Literal["lucene", "spacy"]
"""English stop-word lists: Lucene's 33 words (Elasticsearch's ``english`` analyzer) or
spaCy's 326."""

LUCENE_STOP_WORDS = frozenset(
    {
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into"),
        *("is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then"),
        *("there", "these", "they", "this", "to", "was", "will", "with"),
    }
)
"""Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``."""


@lru_cache(maxsize=2)
def _stop_words(name: StopWords) -> frozenset[str]:
    if name == "lucene":
        words = LUCENE_STOP_WORDS
    else:
        from spacy.lang.en.stop_words import STOP_WORDS

        words = frozenset(STOP_WORDS)
    return words | {"s", "t"}  # left by apostrophes (Elasticsearch drops possessive 's)


@lru_cache(maxsize=4)
def _stem_function(language: str) -> Callable[[list[str]], list[str]]:
    try:
        import Stemmer
    except ImportError as error:  # pragma: no cover - PyStemmer is a dependency
        msg = "Stemming needs PyStemmer. Fix: pip install PyStemmer."
        raise AdaptiveRAGError(msg) from error
    stem: Callable[[list[str]], list[str]] = Stemmer.Stemmer(language).stemWords
    return stem


@dataclass(frozen=True)
class BM25Analyzer:
    r"""How texts become index terms; recorded in every saved index.

    Terms are the ``\w+`` runs of the lower-cased text, without English stop words (plus
    the ``s``/``t`` left by apostrophes), then stemmed when ``stemmer`` is set. The default
    is close to Elasticsearch's ``english`` analyzer, which the papers' index used: Lucene's
    stop words and English (Porter2) stemming.
    """

    stemmer: Stemmer | None = "english"
    """Snowball stemmer (PyStemmer) applied to each term, or ``None`` for none. English
    stemming is the default because it finds more gold passages on HotpotQA, 2Wiki and
    SQuAD (``benchmarks/retrieval_recall.py``, numbers in docs/benchmarks.md)."""
    stopwords: StopWords | None = "lucene"
    """Stop words dropped before stemming: ``lucene`` (Elasticsearch's English list, the
    default), ``spacy`` (spaCy's longer English list) or ``None`` to keep all."""

    def __post_init__(self) -> None:
        if self.stemmer not in (None, "english"):
            msg = f"BM25Analyzer.stemmer must be 'english' or None, got {self.stemmer!r}."
            raise AdaptiveRAGError(msg)
        if self.stopwords not in (None, "lucene", "spacy"):
            msg = (
                f"BM25Analyzer.stopwords must be 'lucene', 'spacy' or None, got {self.stopwords!r}."
            )
            raise AdaptiveRAGError(msg)

    def words(self, text: str) -> list[str]:
        """The text's lower-case words, stop words removed, before stemming."""
        words = _WORD.findall(text.lower())
        if self.stopwords is None:
            return words
        stop = _stop_words(self.stopwords)
        return [w for w in words if w not in stop]

    def __call__(self, text: str) -> list[str]:
        """Index terms of ``text`` in order, repeats kept."""
        words = self.words(text)
        if self.stemmer is None:
            return words
        return _stem_function(self.stemmer)(words)

    def stem_words(self, words: list[str]) -> list[str]:
        """Stem already analysed words (identity without a stemmer)."""
        if self.stemmer is None:
            return words
        return _stem_function(self.stemmer)(words)

    def to_dict(self) -> dict[str, object]:
        """The settings as recorded in an index's manifest."""
        return {"pattern": TOKEN_PATTERN, "lowercase": True, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> BM25Analyzer:
        """Settings read back from a manifest (see ``to_dict``).

        Raises:
            AdaptiveRAGError: The manifest names a pattern or settings this version lacks.
        """
        if data.get("pattern") != TOKEN_PATTERN or data.get("lowercase") is not True:
            msg = (
                f"The index's analyzer {dict(data)!r} uses a token pattern this version does "
                f"not have (expected pattern {TOKEN_PATTERN!r}, lower-cased). Fix: rebuild "
                "the index with this version (adaptive-rag index ...)."
            )
            raise AdaptiveRAGError(msg)
        stemmer = data.get("stemmer")
        stopwords = data.get("stopwords")
        return cls(stemmer=stemmer, stopwords=stopwords)  # type: ignore[arg-type]


def english_analyzer(text: str) -> list[str]:
    """Lower-case word tokens without punctuation or spaCy's English stop words, unstemmed.

    Args:
        text: Any text.

    Returns:
        Its terms in order, repeats kept (``BM25Analyzer(stemmer=None, stopwords="spacy")``).
    """
    return BM25Analyzer(stemmer=None, stopwords="spacy")(text)
