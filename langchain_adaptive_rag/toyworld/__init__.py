"""The embedded toy world: a synthetic encyclopaedia, its questions and a trained tiny model.

No pretrained LLM is needed to see the adaptive methods work: the shipped model memorised
the *known* facts of a seeded world, has never seen its *unknown* facts (they live only
in the passage corpus) and learned to read passages given as ``Context:``. Its token
entropy is low on what it knows and high where it would have to guess.

Each method runs on it with the toy world's prompts ([`TOY_PROMPTS`][]) and its toy
configuration ([`toy_config`][]: the answer budget that fits the toy answers and the
thresholds calibrated for the shipped model; a method's own defaults answer worse).

Example:
    ```python
    from langchain_adaptive_rag import create_adaptive_rag_graph
    from langchain_adaptive_rag.toyworld import (
        TOY_PROMPTS, load_toy_model, toy_config, toy_retriever
    )

    graph = create_adaptive_rag_graph(
        load_toy_model(), toy_retriever(), "dragin",
        config=toy_config("dragin"), prompts=TOY_PROMPTS,
    )
    graph.invoke({"question": "When was the director of film Lost Valley born?"})["answer"]
    # '1934'
    ```

"""

from typing import TYPE_CHECKING

from langchain_adaptive_rag.lazy_exports import lazy_exports
from langchain_adaptive_rag.toyworld.corpus import build_corpus
from langchain_adaptive_rag.toyworld.model import (
    TOY_MODEL_PATH,
    TOY_SEED,
    load_toy_model,
    toy_corpus,
    toy_questions,
    toy_retriever,
    toy_world,
)
from langchain_adaptive_rag.toyworld.prompts import TOY_PROMPTS
from langchain_adaptive_rag.toyworld.questions import (
    QuestionCategory,
    QuestionType,
    ToyQuestion,
    evaluation_questions,
    training_questions,
)
from langchain_adaptive_rag.toyworld.world import (
    PRACTICE_POOLS,
    WORLD_POOLS,
    City,
    Film,
    NamePools,
    Person,
    ToyWorld,
    WorldSizes,
    generate_world,
)

if TYPE_CHECKING:
    from langchain_adaptive_rag.toyworld.comparison import TOY_CONFIGS, TOY_METHODS, toy_config

_EXPORTS: dict[str, str] = {
    "TOY_CONFIGS": "langchain_adaptive_rag.toyworld.comparison",
    "TOY_METHODS": "langchain_adaptive_rag.toyworld.comparison",
    "toy_config": "langchain_adaptive_rag.toyworld.comparison",
}
"""Names that load the graphs (imported on first use, so the toy world itself stays light)."""

__all__ = [
    "PRACTICE_POOLS",
    "TOY_CONFIGS",
    "TOY_METHODS",
    "TOY_MODEL_PATH",
    "TOY_PROMPTS",
    "TOY_SEED",
    "WORLD_POOLS",
    "City",
    "Film",
    "NamePools",
    "Person",
    "QuestionCategory",
    "QuestionType",
    "ToyQuestion",
    "ToyWorld",
    "WorldSizes",
    "build_corpus",
    "evaluation_questions",
    "generate_world",
    "load_toy_model",
    "toy_config",
    "toy_corpus",
    "toy_questions",
    "toy_retriever",
    "toy_world",
    "training_questions",
]

__getattr__, __dir__ = lazy_exports("langchain_adaptive_rag.toyworld", _EXPORTS, globals(), __all__)
