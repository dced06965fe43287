"""The shipped toy model looks facts up by name among look-alike passages."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from langchain_adaptive_rag.prompts import extract_answer
from langchain_adaptive_rag.toyworld import TOY_MODEL_PATH
from langchain_adaptive_rag.toyworld.corpus import build_corpus
from langchain_adaptive_rag.toyworld.questions import iter_questions
from langchain_adaptive_rag.toyworld.world import PRACTICE_POOLS, generate_world
from toyworld_training.data import PRACTICE_SIZES, qa_example
from toyworld_training.train import greedy_answer


@pytest.mark.parametrize("seed", [777_001, 777_002])
def test_birth_years_are_read_by_name_beside_two_other_peoples_passages(seed: int) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(TOY_MODEL_PATH))
    model = AutoModelForCausalLM.from_pretrained(str(TOY_MODEL_PATH), dtype=torch.float32)
    evaluated = generate_world(0)
    world = generate_world(
        seed, sizes=PRACTICE_SIZES, pools=PRACTICE_POOLS, reserved=evaluated.names()
    )
    passages = {d.id or "": d.page_content for d in build_corpus(world)}
    people = sorted(i for i in passages if i.startswith("person"))
    questions = [q for q in iter_questions(world) if q.id.endswith("-when-born")][:12]
    rng = random.Random(seed)
    right = 0
    for question in questions:
        others = [i for i in rng.sample(people, 3) if i not in question.supporting_ids][:2]
        context = [passages[question.supporting_ids[0]], *(passages[i] for i in others)]
        rng.shuffle(context)
        prompt = qa_example(question, context).prompt
        right += extract_answer(prompt + greedy_answer(model, tokenizer, prompt)) == (
            question.answer
        )
    # copying the year after any "was born in" is right about a third of the time
    assert right >= 9, f"{right} of {len(questions)}"
