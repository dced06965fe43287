"""The official agentic-search loops, restated from their code for parity tests.

Not the package's code: each function follows one repository's loop for a single
question, with the model a list of outputs (the i-th generation gets the i-th, cut as
that code's generator cuts it) and the search a function from a query to ``(title, text)``
pairs. Sources (commit, file, lines):

- Search-o1 ``sunnynexus/Search-o1@6ced48f``: ``scripts/run_search_o1.py`` L397-L417
  (generation with ``stop=[END]`` kept, ``extract_between``), L496-L613 (turn loop, search
  condition, limit and repeat messages, finishing), L565-L583 (previous steps), L634-L671
  (documents, insertion), L678-L685 (turn limit); ``scripts/evaluate.py`` L20-L43
  (``infogen`` and ``qa`` extraction); ``scripts/prompts.py`` L69-L155, L357-L370.
- Search-R1 ``PeterGriffinJin/Search-R1@a14dc3a``: ``search_r1/llm_agent/generation.py``
  L54-L75 (cut), L234-L310 (turns, final turn), L385-L436 (actions, observations),
  L460-L469 (passages); ``verl/utils/reward_score/qa_em.py`` L19-L46 (answer). AutoRefine
  (``syr-cn/AutoRefine@8363788``) and ZeroSearch (``Alibaba-NLP/ZeroSearch@2d4cdca``) run
  the same loop with their tags, turn counts and passages.
- R1-Searcher ``RUCAIBox/R1-Searcher@631167c``: ``evaluation/eval_search_loacl.py``
  L172-L173, L179-L297.
- ReSearch ``Agent-RL/ReSearch@4bdb872``: ``src/flashrag/pipeline/active_pipeline.py``
  L33-L105; ``src/verl/utils/reward_score/re_search.py`` L48-L98.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

Search = Callable[[str], list[tuple[str, str]]]


@dataclass
class OfficialRun:
    """What an official loop did: its output after the prompt, answer, queries, prompts."""

    output: str = ""
    answer: str | None = None
    queries: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    """Every generation's prompt, in call order (turns and Reason-in-Documents)."""


def _cut_at_stop(text: str, stops: list[str]) -> tuple[str, str | None]:
    """vLLM's stop: the text before the stop string that completes first, and that string."""
    hits = [(text.find(s) + len(s), s) for s in stops if s in text]
    if not hits:
        return text, None
    end, stop = min(hits)
    return text[: end - len(stop)], stop


# -- Search-o1 ---------------------------------------------------------------------------

BEGIN_Q, END_Q = "<|begin_search_query|>", "<|end_search_query|>"
BEGIN_R, END_R = "<|begin_search_result|>", "<|end_search_result|>"


def _extract_between(text: str, start: str, end: str) -> str | None:
    matches = re.findall(re.escape(start) + r"(.*?)" + re.escape(end), text, flags=re.DOTALL)
    return matches[-1].strip() if matches else None


def _o1_previous(output: str) -> str:
    steps = output.replace("\n\n", "\n").split("\n")
    joined = "".join(f"Step {i + 1}: {step}\n\n" for i, step in enumerate(steps))
    pieces = joined.split("\n\n")
    if len(pieces) <= 5:
        return "\n\n".join(pieces).strip("\n")
    out = ""
    for i, piece in enumerate(pieces):
        if i == 0 or i >= len(pieces) - 4 or BEGIN_Q in piece or BEGIN_R in piece:
            out += piece + "\n\n"
        elif out[-len("\n\n...\n\n") :] != "\n\n...\n\n":
            out += "...\n\n"
    return out.strip("\n")


def _o1_infogen(output: str) -> str:
    if "\n**Final Information**" in output:
        found = output.split("\n**Final Information**")[-1].replace("\n", "")
        return found.strip("```").strip()  # noqa: B005 (the official call)
    if "\n**Modified Reasoning Steps**" in output:
        found = output.split("\n**Modified Reasoning Steps**")[-1]
        return found.strip("```").strip()  # noqa: B005 (the official call)
    return "No helpful information found."


def _o1_answer(output: str) -> str:
    matches = re.findall(r"\\boxed\{(.*)\}", output)
    if not matches:
        return ""
    found = matches[-1]
    inner = re.findall(r"\\text\{(.*)\}", found)
    return (inner[-1] if inner else found).strip("()")


def official_search_o1(
    prompt: str,
    outputs: list[str],
    search: Search,
    reason_outputs: list[str],
    reason_prompt: Callable[[str, str, str], str],
    *,
    max_search: int = 10,
    max_turn: int = 15,
) -> OfficialRun:
    """Search-o1's loop; each page is ``{"id", "title", "context"}`` (a passage's fields)."""
    run, turns, reasons = OfficialRun(), iter(outputs), iter(reason_outputs)
    count, executed, turn = 0, set(), 0
    while True:
        turn += 1
        run.prompts.append(prompt + run.output)
        text, stop = _cut_at_stop(next(turns), [END_Q])
        text += stop or ""  # include_stop_str_in_output=True
        run.output += text
        query = _extract_between(text, BEGIN_Q, END_Q)
        if query and run.output.rstrip().endswith(END_Q):
            if count < max_search and query not in executed:
                run.queries.append(query)
                pages = "".join(
                    f"**Web Page {i + 1}:**\n"
                    + json.dumps(
                        {"id": i + 1, "title": t, "context": x}, ensure_ascii=False, indent=2
                    )
                    + "\n"
                    for i, (t, x) in enumerate(search(query))
                )
                run.prompts.append(reason_prompt(_o1_previous(run.output), query, pages))
                analysis = _o1_infogen(next(reasons))
                count += 1
                executed.add(query)
                run.output += f"\n\n{BEGIN_R}{analysis}{END_R}\n\n"
            elif count >= max_search:
                run.output += (
                    f"\n{BEGIN_R}\nThe maximum search limit is exceeded. You are not allowed to "
                    f"search.\n{END_R}\n"
                )
            elif query in executed:
                run.output += (
                    f"\n{BEGIN_R}\nYou have searched this query. Please refer to previous "
                    f"results.\n{END_R}\n"
                )
        else:
            break
        if turn >= max_turn:
            break
    run.answer = _o1_answer(run.output)
    return run


# -- Search-R1, ZeroSearch, AutoRefine ---------------------------------------------------

INVALID = (
    "\nMy previous action is invalid. If I want to search, I should put the query between "
    "<search> and </search>. If I want to give the final answer, I should put the answer "
    "between <answer> and </answer>. Let me try again.\n"
)


def _r1_cut(response: str) -> str:
    if "</search>" in response:
        return response.split("</search>")[0] + "</search>"
    if "</answer>" in response:
        return response.split("</answer>")[0] + "</answer>"
    return response


def search_r1_passages(docs: list[tuple[str, str]]) -> str:
    """Search-R1's ``_passages2string`` over ``title\\ntext`` contents."""
    return "".join(f"Doc {i + 1}(Title: {t}) {x}\n" for i, (t, x) in enumerate(docs))


def zerosearch_passages(docs: list[tuple[str, str]]) -> str:
    """ZeroSearch's wiki results: ``Doc i: text`` lines."""
    return "\n".join(f"Doc {i + 1}: {x}" for i, (_, x) in enumerate(docs))


def official_search_r1(
    prompt: str,
    outputs: list[str],
    search: Search,
    *,
    max_turns: int = 4,
    result_tags: tuple[str, str] = ("<information>", "</information>"),
    passages: Callable[[list[tuple[str, str]]], str] = search_r1_passages,
    no_documents: str = "",
) -> OfficialRun:
    """Search-R1's rollout: ``max_turns`` turns that may search, then one that may not."""
    run, turns = OfficialRun(), iter(outputs)
    for final in [False] * max_turns + [True]:
        run.prompts.append(prompt + run.output)
        response = _r1_cut(next(turns))
        match = re.search(r"<(search|answer)>(.*?)</\1>", response, re.DOTALL)
        run.output += response
        if match and match.group(1) == "answer":
            break
        if final:
            break
        if match:
            query = match.group(2).strip()
            run.queries.append(query)
            docs = search(query)
            found = passages(docs) if docs else no_documents
            run.output += f"\n\n{result_tags[0]}{found.strip()}{result_tags[1]}\n\n"
        else:
            run.output += INVALID
    blocks = re.findall(r"<answer>(.*?)</answer>", run.output, re.DOTALL)
    run.answer = blocks[-1].strip() if blocks else None
    return run


# -- R1-Searcher -------------------------------------------------------------------------


def official_r1_searcher(prompt: str, outputs: list[str], search: Search) -> OfficialRun:
    """R1-Searcher's local evaluation loop (raw lines ``<id> Title: t Text:  x``)."""
    run, turns = OfficialRun(answer="I don't know."), iter(outputs)
    stops = ["<|im_end|>", "<|endoftext|>", "<|end_of_query|>", "</answer>"]
    for k in range(16):
        run.prompts.append(prompt + run.output)
        text, stop = _cut_at_stop(next(turns), stops)
        if k == 9:
            break
        if "<answer>" in text and stop == "</answer>":
            run.answer = text.split("<answer>")[-1].split("</answer>")[0]
            run.output += text + "</answer>"
            break
        if "<|begin_of_query|>" in text and stop == "<|end_of_query|>":
            query = text.split("<|begin_of_query|>")[-1].split("<|end_of_query|>")[0]
            query = query.replace('"', "").replace("'", "").replace("\t", " ").replace("...", "")
            if not query:
                run.output += text.strip()
                break
            run.queries.append(query)
            lines = [f"{i} Title: {t} Text:  {x}" for i, (t, x) in enumerate(search(query))]
            bare = [re.sub(r"^\d+\s+", "", line) for line in lines]
            content = "".join(f"({j + 1}){doc}\n" for j, doc in enumerate(bare))
            run.output += (
                text.strip()
                + "<|end_of_query|>\n\n<|begin_of_documents|>\n"
                + (content or "None")
                + "<|end_of_documents|>\n\n"
            )
            continue
        run.output += text
        break
    return run


# -- ReSearch ----------------------------------------------------------------------------


def _research_query(text: str) -> str:
    end = text.rfind("</search>")
    start = text.rfind("<search>", 0, end)
    return "" if start == -1 else text[start + len("<search>") : end].strip()


def _research_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    depth, at = 0, start
    while at < len(text):
        if text[at] == "{":
            depth += 1
        elif text[at] == "}":
            depth -= 1
            if depth == 0:
                return text[start + len("\\boxed{") : at]
        at += 1
    return None


def official_research(
    prompt: str, outputs: list[str], search: Search, *, turns: int = 20
) -> OfficialRun:
    """ReSearch's evaluation loop (contents ``"title"\\ntext``; no search limit)."""
    run, scripted = OfficialRun(), iter(outputs)
    for _ in range(turns):
        run.prompts.append(prompt + run.output)
        text, stop = _cut_at_stop(next(scripted), ["</search>"])
        if stop is None:  # end of sequence
            run.output += text
            break
        output = text + "</search>"
        query = _research_query(output)
        if query:
            run.queries.append(query)
            found = "".join(f'"{t}"\n{x}\n\n' for t, x in search(query)).strip()
        else:
            found = "nothing to search"
        run.output += f"{output} <result>\n{found}\n</result>"
    block = re.search(r"<answer>(.*?)</answer>", run.output.strip(), re.DOTALL)
    run.answer = _research_boxed(block.group(1)) if block else None
    return run
