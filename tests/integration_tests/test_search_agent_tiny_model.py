"""A released searcher's loading path, on a tiny model whose tokenizer has the tags.

A Search-R1 checkpoint (``PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-em-ppo``) runs as
``ChatTransformers(model=...)`` with the ``search_r1`` preset inside the model's chat
template. Here the same code loads a tiny random Llama saved with Search-R1's tags added to
its tokenizer (one id each, as text: a tag that a tokenizer marks special is dropped from
decoded text, as every special token is) and a chat template. Its layers are made to add nothing
(attention and MLP outputs zeroed), so the next token depends on the current one alone, and
its output rows send the template's last token to ``<search>``, ``<search>`` to " Anna",
" Anna" to ``</search>``, ``<answer>`` to " 1931" and " 1931" to ``</answer>``: the model
writes the same query in every turn, and the answer when asked for one. The references are
transformers' own: its chat template over the official prompt, and ``generate``'s greedy
tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from langchain_adaptive_rag import ChatTransformers, create_search_agent_graph
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.search_agent import SearchAgentConfig
from langchain_adaptive_rag.graphs.search_presets import SEARCH_O1_FEWSHOT, SEARCH_R1
from langchain_adaptive_rag.testing import create_tiny_model
from tests.helpers.scripted import TitledTableRetriever

TAGS = ("<search>", "</search>", "<information>", "</information>", "<answer>", "</answer>")
QUESTION = "When was Anna Berg born"
FOUND = [("Anna Berg", "Anna Berg (born 1931) is a Swedish film director.")]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = create_tiny_model(tmp_path_factory.mktemp("search-r1") / "llama")
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.add_tokens(list(TAGS))  # as text, as in Qwen2.5's vocabulary, one id each
    tokenizer.save_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    model.resize_token_embeddings(len(tokenizer))
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        template_end = tokenizer(SEARCH_R1.chat_templated(tokenizer).prompt)["input_ids"][-1]
        word = tokenizer(" Anna", add_special_tokens=False)["input_ids"]
        year = tokenizer(" 1931", add_special_tokens=False)["input_ids"]
        assert len(word) == len(year) == 1, "each a single token of the tiny tokenizer"
        tag = tokenizer.convert_tokens_to_ids
        chain = [
            (template_end, tag("<search>")),
            (tag("<search>"), word[0]),
            (word[0], tag("</search>")),
            (tag("<answer>"), year[0]),
            (year[0], tag("</answer>")),
        ]
        embeddings, rows = model.model.embed_tokens.weight, model.lm_head.weight
        embeddings[:, : len(chain)] = 0.0  # the chain's own dimensions
        for dim, (current, following) in enumerate(chain):
            embeddings[current] = 0.0
            embeddings[current, dim] = 1.0
            rows[following, dim] = 100.0
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def llm(model_dir: Path) -> ChatTransformers:
    return ChatTransformers(model=str(model_dir))


def test_the_templated_prompt_is_the_official_prompt_as_one_user_turn(
    llm: ChatTransformers,
) -> None:
    tokenizer = llm.hf_tokenizer
    assert all(len(tokenizer.encode(t, add_special_tokens=False)) == 1 for t in TAGS)
    chat = SEARCH_R1.chat_templated(tokenizer)
    expected = tokenizer.apply_chat_template(
        [{"role": "user", "content": SEARCH_R1.render_prompt(QUESTION, 4)}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert chat.name == "search_r1_chat"
    assert chat.render_prompt(QUESTION, 4) == expected
    assert expected.startswith("<|im_start|>user\nAnswer the given question.")
    assert expected.endswith(
        "Question: When was Anna Berg born?\n<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_tokenizer_without_a_template_or_a_protocol_with_demonstrations_is_refused(
    llm: ChatTransformers,
) -> None:
    class Plain:
        chat_template = None

        def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("not called")

    with pytest.raises(AdaptiveRAGError, match="without a chat template"):
        SEARCH_R1.chat_templated(Plain())
    with pytest.raises(AdaptiveRAGError, match="demonstrations"):
        SEARCH_O1_FEWSHOT.chat_templated(llm.hf_tokenizer)


def test_the_released_searchers_path_searches_reads_and_answers(
    llm: ChatTransformers, model_dir: Path
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    protocol = SEARCH_R1.chat_templated(llm.hf_tokenizer)
    retriever = TitledTableRetriever(table={"Anna": FOUND})
    config = SearchAgentConfig(protocol=protocol, generate_max_length=64, force_answer=True)
    result = create_search_agent_graph(llm, retriever, config=config).invoke({"question": QUESTION})

    # transformers' greedy tokens from the same prompt: the first turn, to its stop tag
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    reference = AutoModelForCausalLM.from_pretrained(model_dir)
    ids = tokenizer(protocol.render_prompt(QUESTION, 4), return_tensors="pt")["input_ids"]
    out = reference.generate(ids, do_sample=False, max_new_tokens=3, pad_token_id=3)
    first_turn = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=False)
    assert first_turn == "<search> Anna</search>"

    # the documents block as Search-R1 writes it (generation.py: stripped, then wrapped)
    block = f"\n\n<information>Doc 1(Title: {FOUND[0][0]}) {FOUND[0][1]}</information>\n\n"
    # four searching turns, then the answering turn asks again (not run: no turn would read it)
    assert retriever.queries == ["Anna"] * 4, result["text"]
    # the last turn's search is not run; the forced answer follows its opening tag
    assert result["text"] == (first_turn + block) * 4 + first_turn + "<answer> 1931</answer>"
    assert result["answer"] == "1931"
    assert result["counts"]["retrievals"] == 4
