"""Test helper: three questions in HotpotQA's format, about the scripted passages' world."""

from __future__ import annotations

__all__ = ["HOTPOT"]

HOTPOT = [
    {
        "_id": "h1",
        "question": "When was the director of film Blue Harbour born?",
        "answer": "1931",
        "supporting_facts": [["Blue Harbour", 0], ["Anna Berg", 0]],
        "context": [
            ["Blue Harbour", ["Blue Harbour is a 1962 film directed by Anna Berg."]],
            ["Anna Berg", ["Anna Berg (born 1931) is a Swedish film director."]],
        ],
        "type": "bridge",
        "level": "easy",
    },
    {
        "_id": "h2",
        "question": "Who was born first, Carl Lind or Maria Holm?",
        "answer": "Maria Holm",
        "supporting_facts": [["Carl Lind", 0], ["Maria Holm", 0]],
        "context": [
            ["Carl Lind", ["Carl Lind was born in Oslo in 1902."]],
            ["Maria Holm", ["Maria Holm was born in 1899 in Bergen."]],
        ],
        "type": "comparison",
        "level": "medium",
    },
    {
        "_id": "h3",
        "question": "In which city was Carl Lind born?",
        "answer": "Oslo",
        "supporting_facts": [["Carl Lind", 0]],
        "context": [
            ["Carl Lind", ["Carl Lind was born in Oslo in 1902."]],
            ["Paris", ["The capital of France is Paris."]],
        ],
        "type": "bridge",
        "level": "hard",
    },
]
"""A bridge, a comparison and a bridge question (easy, medium, hard), with context."""
