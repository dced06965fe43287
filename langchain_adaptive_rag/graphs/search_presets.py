r"""The agentic searchers' protocols, each as its official code runs it.

Every preset is a [`SearchProtocol`][langchain_adaptive_rag.graphs.search_protocol.SearchProtocol]
read from the searcher's own repository (commit and lines in ``source``; docs/methods.md
tabulates them). Where the official loops differ from this package's in a way that changes
no answer, the difference is stated on the preset:

- Every loop here stops a turn at the query's closing tag (Search-R1, ZeroSearch and
  AutoRefine generate the whole turn and cut it after the first ``</search>``, else the
  first ``</answer>``): the same action is read, except when an answer block closes inside
  an open search block.
- A search asked for in a run's last turn is not run, since no turn would read its
  documents (the official loops run it, or discard the turn, and answer the same).
- Documents are the retriever's passages: ``metadata["title"]`` is the title (the
  official corpora's titles carry quotes), the passage text is the text.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Literal

from langchain_adaptive_rag.graphs.search_protocol import (
    SearchDemonstration,
    SearchProtocol,
    SearchStep,
)

__all__ = [
    "AUTOREFINE",
    "HOTPOTQA_SEARCH_DEMONSTRATIONS",
    "R1_SEARCHER",
    "RESEARCH",
    "SEARCH_O1",
    "SEARCH_O1_FEWSHOT",
    "SEARCH_PROTOCOLS",
    "SEARCH_R1",
    "ZEROSEARCH",
    "SearchProtocolName",
]

_SEARCH_O1_PROMPT = (
    "You are a reasoning assistant with the ability to perform web searches to help you "
    "answer the user's question accurately. You have special tools:\n\n"
    "- To perform a search: write <|begin_search_query|> your query here "
    "<|end_search_query|>.\n"
    "Then, the system will search and analyze relevant web pages, then provide you with "
    "helpful information in the format <|begin_search_result|> ...search results... "
    "<|end_search_result|>.\n\n"
    "You can repeat the search process multiple times if necessary. The maximum number of "
    "search attempts is limited to {max_searches}.\n\n"
    "Once you have all the information you need, continue your reasoning.\n\n"
    "Example:\n"
    'Question: "Alice David is the voice of Lara Croft in a video game developed by which '
    'company?"\n'
    "Assistant thinking steps:\n"
    "- I need to find out who voices Lara Croft in the video game.\n"
    "- Then, I need to determine which company developed that video game.\n\n"
    "Assistant:\n"
    "<|begin_search_query|>Alice David Lara Croft voice<|end_search_query|>\n\n"
    "(System returns processed information from relevant web pages)\n\n"
    "Assistant thinks: The search results indicate that Alice David is the voice of Lara "
    "Croft in a specific video game. Now, I need to find out which company developed that "
    "game.\n\n"
    "Assistant:\n"
    "<|begin_search_query|>video game developed by Alice David Lara Croft"
    "<|end_search_query|>\n\n"
    "(System returns processed information from relevant web pages)\n\n"
    "Assistant continues reasoning with the new information...\n\n"
    "Remember:\n"
    "- Use <|begin_search_query|> to request a web search and end with "
    "<|end_search_query|>.\n"
    "- When done searching, continue your reasoning.\n\n"
    "Please answer the following question. You should think step by step to solve it.\n\n"
    "Provide your final answer in the format \\boxed{YOUR_ANSWER}.\n\n"
    "Question:\n{question}\n\n"
)

SEARCH_O1 = SearchProtocol(
    name="search_o1",
    prompt=_SEARCH_O1_PROMPT,
    query_tags=("<|begin_search_query|>", "<|end_search_query|>"),
    answer_tags=("\\boxed{", "}"),
    result_tags=("<|begin_search_result|>", "<|end_search_result|>"),
    stop=("<|end_search_query|>",),
    result_template="\n\n<|begin_search_result|>{documents}<|end_search_result|>\n\n",
    doc_template="**Web Page {index}:**\n{json}\n",
    answer_reader="last_boxed",
    query_from="first_open",
    no_action="end",
    empty_query="end",
    reason_in_documents=True,
    repeat_message=(
        "\n<|begin_search_result|>\nYou have searched this query. Please refer to previous "
        "results.\n<|end_search_result|>\n"
    ),
    limit_message=(
        "\n<|begin_search_result|>\nThe maximum search limit is exceeded. You are not "
        "allowed to search.\n<|end_search_result|>\n"
    ),
    max_searches=10,
    max_turns=15,
    turn_max_tokens=8192,
    answer_opener="\\boxed{",
    answer_closer="}",
    thought_format="{thought}",
    answer_format="\\boxed{{answer}}",
    case_start="Please answer the following question.",
    source=(
        "sunnynexus/Search-o1@6ced48f: scripts/prompts.py#L131-L155 (multi-hop QA "
        "instruction), #L357-L370 (open-QA task), #L69-L107 (Reason-in-Documents); "
        "scripts/run_search_o1.py#L40-L43 (tags), #L198-L205 (10 searches, 15 turns for "
        "multi-hop QA), #L387-L409 (stop strings, 8192 tokens a turn), #L412-L417 and "
        "#L529-L613 (query, limit and repeat messages, end), #L634-L671 (documents, "
        "insertion); scripts/evaluate.py#L20-L43 (answer)"
    ),
)
r"""Search-o1 (Li et al., 2025): ``<|begin_search_query|>`` tags, ``\boxed{}`` answer.

The multi-hop QA prompt. A turn stops at the query's closing tag (or the end of
sequence); a turn without a query, or with an empty one, ends the run. A repeated query
and a query past the limit get the official messages instead of documents. With
``SearchAgentConfig.reason_in_documents`` (the default for this preset) the documents
are condensed by the Reason-in-Documents step before they are inserted. The official
code searches Bing and fetches whole pages (up to 10 a query); here each passage is one
"web page" whose JSON record has its ``id``, ``title`` and ``context``."""

_SEARCH_R1_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> "
    "first every time you get new information. After reasoning, if you find you lack some "
    "knowledge, you can call a search engine by <search> query </search> and it will "
    "return the top searched results between <information> and </information>. You can "
    "search as many times as your want. If you find no further external knowledge needed, "
    "you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)

_INVALID_ACTION = (
    "\nMy previous action is invalid. If I want to search, I should put the query between "
    "<search> and </search>. If I want to give the final answer, I should put the answer "
    "between <answer> and </answer>. Let me try again.\n"
)

SEARCH_R1 = SearchProtocol(
    name="search_r1",
    prompt=_SEARCH_R1_PROMPT,
    query_tags=("<search>", "</search>"),
    answer_tags=("<answer>", "</answer>"),
    result_tags=("<information>", "</information>"),
    stop=("</search>", "</answer>"),
    result_template="\n\n<information>{documents}</information>\n\n",
    doc_template="Doc {index}(Title: {title}) {text}\n",
    strip_documents=True,
    answer_reader="last_block",
    question_mark=True,
    query_from="first_open",
    no_action="retry",
    invalid_message=_INVALID_ACTION,
    empty_query="search",
    max_searches=4,
    max_turns=5,
    turn_max_tokens=500,
    thought_format="<think> {thought} </think>",
    answer_format="<answer> {answer} </answer>",
    case_start="Question: ",
    source=(
        "PeterGriffinJin/Search-R1@a14dc3a: scripts/data_process/nq_search.py#L32-L36 and "
        "#L61-L63 (prompt, question); search_r1/llm_agent/generation.py#L54-L75 (turn "
        "cut), #L385-L436 (actions, invalid message, information block), #L460-L469 "
        "(documents), #L234-L310 (4 turns, then one without search); "
        "scripts/nq_hotpotqa/evaluate.sh#L21 and #L63-L65 (500 tokens a turn, top 3); "
        "verl/utils/reward_score/qa_em.py#L19-L46 (answer)"
    ),
)
"""Search-R1 (Jin et al., 2025): ``<search>``, ``<information>``, ``<answer>``.

Four turns that may search, then one that may only answer; a turn with no complete
search or answer block gets the official "My previous action is invalid" message and
the model tries again. An empty query is searched (and finds nothing here)."""

ZEROSEARCH = replace(
    SEARCH_R1,
    name="zerosearch",
    doc_template="Doc {index}: {text}",
    doc_separator="\n",
    no_documents="No information available",
    max_searches=5,
    max_turns=6,
    source=(
        "Alibaba-NLP/ZeroSearch@2d4cdca: inference.py#L97-L101 (Search-R1's prompt); "
        "llm_agent/generation.py#L171-L183 (turn cut), #L523-L579 (actions, "
        "information block), #L590 and #L602-L615 (documents, 'No information "
        "available'), #L400-L432 (final turn); README.md#L120-L127 (5 turns, top 5)"
    ),
)
"""ZeroSearch (Sun et al., 2025): Search-R1's protocol and prompt, documents written
``Doc i: text`` without titles, five searching turns (its README's evaluation runs; top 5
there, ``retrieve_topk`` here)."""

R1_SEARCHER = SearchProtocol(
    name="r1_searcher",
    prompt=(
        "The User asks a question, and the Assistant solves it.\n"
        "The Assistant first thinks about the reasoning process in the mind and then "
        "provides the User with the final answer.\n"
        "The output format of reasoning process and final answer are enclosed within "
        '<think> </think> and <answer> </answer> tags, respectively, i.e., "<think> '
        'reasoning process here </think>\n\n<answer> final answer here </answer>".\n'
        "During the thinking process, the Assistant can perform searching for uncertain "
        'knowledge if necessary with the format of "<|begin_of_query|> search query (only '
        'keywords) here <|end_of_query|>". **A query must involve only a single triple**.\n'
        "Then, the system will provide the Assistant with helpful information with the "
        'format of "<|begin_of_documents|> ...search results... <|end_of_documents|>".\n\n'
        "User:{question}\nAssistant: <think>"
    ),
    query_tags=("<|begin_of_query|>", "<|end_of_query|>"),
    answer_tags=("<answer>", "</answer>"),
    result_tags=("<|begin_of_documents|>", "<|end_of_documents|>"),
    stop=("<|end_of_query|>", "</answer>"),
    result_template="\n\n<|begin_of_documents|>\n{documents}<|end_of_documents|>\n\n",
    doc_template="({index})Title: {title} Text:  {text}\n",
    no_documents="None",
    answer_reader="last_turn_block",
    no_answer="I don't know.",
    strip_turn=True,
    query_from="last_open",
    strip_query=False,
    query_replacements=(('"', ""), ("'", ""), ("\t", " "), ("...", "")),
    no_action="end",
    empty_query="end",
    max_turns=9,
    turn_max_tokens=512,
    thought_format="{thought}",
    answer_format="</think>\n\n<answer> {answer} </answer>",
    case_start="User:",
    source=(
        "RUCAIBox/R1-Searcher@631167c: evaluation/eval_search_loacl.py#L58-L62 (prompt "
        "v0), #L172-L173 (stop strings, 512 tokens), #L203-L260 (9 turns, answer, query "
        "and its cleaning, 'I don't know.'), #L270-L285 (documents, insertion); "
        "README.md#L165-L171 (prompt v0 for local evaluation)"
    ),
)
"""R1-Searcher (Song et al., 2025): ``<|begin_of_query|>`` and ``<|begin_of_documents|>``.

The base-model completion prompt ``v0`` (ending ``Assistant: <think>``); the answer is
read only from a turn that stopped at ``</answer>``; any other end, an empty query, or a
ninth turn that searches answers "I don't know."."""

RESEARCH = SearchProtocol(
    name="research",
    prompt=(
        "A conversation between User and Assistant. The user asks a question, and the "
        "assistant solves it. The assistant first thinks about the reasoning process in the "
        "mind and then provides the user with the answer. During thinking, the assistant "
        "can invoke the wikipedia search tool to search for fact information about specific "
        "topics if needed. The reasoning process and answer are enclosed within <think> "
        "</think> and <answer> </answer> tags respectively, and the search query and result "
        "are enclosed within <search> </search> and <result> </result> tags respectively. "
        "For example, <think> This is the reasoning process. </think> <search> search query "
        "here </search> <result> search result here </result> <think> This is the "
        "reasoning process. </think> <answer> The final answer is \\[ \\boxed{answer here} "
        "\\] </answer>. In the last part of the answer, the final exact answer is enclosed "
        "within \\boxed{} with latex format. User: {question}. Assistant:"
    ),
    query_tags=("<search>", "</search>"),
    answer_tags=("<answer>", "</answer>"),
    result_tags=("<result>", "</result>"),
    stop=("</search>",),
    result_template=" <result>\n{documents}\n</result>",
    doc_template='"{title}"\n{text}\n\n',
    strip_documents=True,
    answer_reader="first_block_boxed",
    query_from="last_open",
    unopened_query="empty",
    no_action="end",
    empty_query="message",
    empty_query_message="nothing to search",
    turn_max_tokens=8192,
    answer_opener="<answer> The final answer is \\[ \\boxed{",
    answer_closer="}",
    thought_format="<think> {thought} </think>",
    answer_format="<answer> The final answer is \\[ \\boxed{{answer}} \\] </answer>",
    case_start="User: ",
    source=(
        "Agent-RL/ReSearch@4bdb872 (branch re-search): "
        "src/verl/utils/dataset/template.py#L1-L10 (base-model prompt); "
        "src/flashrag/pipeline/active_pipeline.py#L33-L105 (stop string, query, 'nothing "
        "to search', documents, result block, no search limit); "
        "src/verl/utils/reward_score/re_search.py#L48-L98 (answer); "
        "scripts/evaluation/eval_config.yaml#L19 (top 5)"
    ),
)
r"""ReSearch (Chen et al., 2025): ``<search>`` and ``<result>``, the answer a
``\boxed{}`` inside ``<answer>``. The base-model prompt; only ``</search>`` stops a turn
(the answer ends at the end of sequence); no search limit but the token budget; an empty
query gets "nothing to search"."""

AUTOREFINE = replace(
    SEARCH_R1,
    name="autorefine",
    prompt=(
        "You are a helpful assistant excel at answering questions with multi-turn search "
        "engine calling. To answer questions, you must first reason through the available "
        "information using <think> and </think>. If you identify missing knowledge, you may "
        "issue a search request using <search> query </search> at any time. The retrieval "
        "system will provide you with the three most relevant documents enclosed in "
        "<documents> and </documents>. After each search, you need to summarize and refine "
        "the existing documents in <refine> and </refine>. You may send multiple search "
        "requests if needed. Once you have sufficient information, provide a concise final "
        "answer using <answer> and </answer>. For example, <answer> Donald Trump </answer>. "
        "Question: {question}\n"
    ),
    result_tags=("<documents>", "</documents>"),
    result_template="\n\n<documents>{documents}</documents>\n\n",
    max_searches=3,
    max_turns=4,
    turn_max_tokens=512,
    source=(
        "syr-cn/AutoRefine@8363788: preprocess/data_process/utils.py#L2-L10 (prompt); "
        "search_r1/llm_agent/generation.py#L54-L75 (turn cut), #L353-L436 (actions, "
        "documents block, invalid message), #L460-L469 (documents), #L233-L310 (final "
        "turn); cmd/eval.sh#L14-L64 (3 turns, 512 tokens a turn, top 3); "
        "verl/utils/reward_score/qa_em.py#L147-L157 (answer)"
    ),
)
"""AutoRefine (Shi et al., 2025): Search-R1's loop with ``<documents>`` and a
``<refine>`` step the model writes itself (no code reads it); three searching turns and
one to answer."""

HOTPOTQA_SEARCH_DEMONSTRATIONS: tuple[SearchDemonstration, ...] = (
    SearchDemonstration(
        question="In which country was the composer of the opera Carmen born?",
        steps=(
            SearchStep(
                thought="I need to find out who composed the opera Carmen.",
                query="composer of the opera Carmen",
                documents=(
                    (
                        "Carmen",
                        "Carmen is an opera in four acts by the French composer Georges Bizet.",
                    ),
                ),
            ),
            SearchStep(
                thought="Carmen was composed by Georges Bizet. Now I need to find out where "
                "Georges Bizet was born.",
                query="Georges Bizet birthplace",
                documents=(
                    (
                        "Georges Bizet",
                        "Georges Bizet was a French composer of the Romantic "
                        "era. He was born in Paris in 1838.",
                    ),
                ),
            ),
        ),
        conclusion="Georges Bizet was born in Paris, France.",
        answer="France",
    ),
    SearchDemonstration(
        question="In which city is the university that Isaac Newton attended?",
        steps=(
            SearchStep(
                thought="I need to find out which university Isaac Newton attended.",
                query="university Isaac Newton attended",
                documents=(
                    (
                        "Isaac Newton",
                        "Isaac Newton was an English mathematician and "
                        "physicist. He studied at Trinity College, Cambridge.",
                    ),
                ),
            ),
            SearchStep(
                thought="Isaac Newton attended the University of Cambridge. Now I need to "
                "find out which city it is in.",
                query="University of Cambridge city",
                documents=(
                    (
                        "University of Cambridge",
                        "The University of Cambridge is a public "
                        "research university in Cambridge, England.",
                    ),
                ),
            ),
        ),
        conclusion="The University of Cambridge is in the city of Cambridge.",
        answer="Cambridge",
    ),
)
"""Two worked multi-hop searches (the package's, on HotpotQA's first two demonstrations'
questions), for base models that have not seen a search protocol."""

SEARCH_O1_FEWSHOT = replace(
    SEARCH_O1,
    name="search_o1_fewshot",
    demonstrations=HOTPOTQA_SEARCH_DEMONSTRATIONS,
    reason_in_documents=False,
    source=SEARCH_O1.source + "; the demonstrations and the documents inserted whole are "
    "the package's (for base models)",
)
"""Search-o1's prompt with two worked searches before the question, the documents
inserted as they were found (no Reason-in-Documents): the form a base model such as
Gemma 3 270M can follow."""

SearchProtocolName = Literal[
    "search_o1",
    "search_o1_fewshot",
    "search_r1",
    "zerosearch",
    "r1_searcher",
    "research",
    "autorefine",
]
"""The presets' names."""

SEARCH_PROTOCOLS: MappingProxyType[str, SearchProtocol] = MappingProxyType(
    {
        protocol.name: protocol
        for protocol in (
            SEARCH_O1,
            SEARCH_O1_FEWSHOT,
            SEARCH_R1,
            ZEROSEARCH,
            R1_SEARCHER,
            RESEARCH,
            AUTOREFINE,
        )
    }
)
"""Every preset by name (read-only)."""
