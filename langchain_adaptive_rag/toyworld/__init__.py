"""The embedded toy world: a synthetic encyclopaedia, its questions and a trained tiny model.

No pretrained LLM is needed to see the adaptive methods work: the shipped model memorised
the *known* facts of a seeded world, has never seen its *unknown* facts (they live only
in the passage corpus) and learned to read passages given as ``Context:``. Its token
entropy is low on what it knows and high where it would have to guess.

Example:
    ```python
    from langchain_adaptive_rag import create_dragin_graph
    from langchain_adaptive_rag.toyworld import (
        TOY_PROMPTS, load_toy_model, toy_questions, toy_retriever
    )

    graph = create_dragin_graph(load_toy_model(), toy_retriever(), prompts=TOY_PROMPTS)
    question = toy_questions()[0]
    graph.invoke({"question": question.question})["answer"]
    ```

"""

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

__all__ = [
    "PRACTICE_POOLS",
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
    "toy_corpus",
    "toy_questions",
    "toy_retriever",
    "toy_world",
    "training_questions",
]
