"""Search-o1's Reason-in-Documents step: the documents condensed before they are inserted.

The reasoning model reads the previous reasoning steps, the current query and the
retrieved pages, and writes the helpful information after ``**Final Information**``;
that text, not the pages, goes between the result tags. Everything here follows
sunnynexus/Search-o1@6ced48f: the prompt (``scripts/prompts.py#L69-L107``), the previous
steps (``scripts/run_search_o1.py#L565-L583``) and the extraction
(``scripts/evaluate.py#L20-L29``).
"""

from __future__ import annotations

import re

__all__ = [
    "NO_HELPFUL_INFORMATION",
    "extract_final_information",
    "previous_steps",
    "reason_in_documents_prompt",
]

NO_HELPFUL_INFORMATION = "No helpful information found."
"""What the step yields when the model wrote no ``**Final Information**``."""

_FINAL = "\n**Final Information**"
_MODIFIED = "\n**Modified Reasoning Steps**"
_ELLIPSIS = "...\n\n"
_FIELD = re.compile(r"<<(prev_reasoning|search_query|document)>>")

_PROMPT = (  # the official text; three input headings end with two spaces
    "**Task Instruction:**\n"
    "\n"
    "You are tasked with reading and analyzing web pages based on the following inputs: "
    "**Previous Reasoning Steps**, **Current Search Query**, and **Searched Web "
    "Pages**. Your objective is to extract relevant and helpful information for "
    "**Current Search Query** from the **Searched Web Pages** and seamlessly integrate "
    "this information into the **Previous Reasoning Steps** to continue reasoning for "
    "the original question.\n"
    "\n"
    "**Guidelines:**\n"
    "\n"
    "1. **Analyze the Searched Web Pages:**\n"
    "- Carefully review the content of each searched web page.\n"
    "- Identify factual information that is relevant to the **Current Search Query** "
    "and can aid in the reasoning process for the original question.\n"
    "\n"
    "2. **Extract Relevant Information:**\n"
    "- Select the information from the Searched Web Pages that directly contributes to "
    "advancing the **Previous Reasoning Steps**.\n"
    "- Ensure that the extracted information is accurate and relevant.\n"
    "\n"
    "3. **Output Format:**\n"
    "- **If the web pages provide helpful information for current search query:** "
    "Present the information beginning with `**Final Information**` as shown below.\n"
    "**Final Information**\n"
    "\n"
    "[Helpful information]\n"
    "\n"
    "- **If the web pages do not provide any helpful information for current search "
    "query:** Output the following text.\n"
    "\n"
    "**Final Information**\n"
    "\n"
    "No helpful information found.\n"
    "\n"
    "**Inputs:**\n"
    "- **Previous Reasoning Steps:**  \n"
    "<<prev_reasoning>>\n"
    "\n"
    "- **Current Search Query:**  \n"
    "<<search_query>>\n"
    "\n"
    "- **Searched Web Pages:**  \n"
    "<<document>>\n"
    "\n"
    "Now you should analyze each web page and find helpful information based on the "
    'current search query "<<search_query>>" and previous reasoning steps.\n'
)


def previous_steps(output: str, begin_query: str, begin_result: str) -> str:
    """The reasoning so far as the step reads it: numbered lines, the middle elided.

    Each line of the output (blank lines dropped once) becomes ``Step i: ...``; when
    there are more than five pieces, the first, the last four and every piece holding a
    query or a result tag are kept, and each run of the others becomes one ``...``.

    Args:
        output: The text generated and inserted so far, the current query included.
        begin_query: The query's opening tag.
        begin_result: The result's opening tag.

    Returns:
        The previous reasoning steps.
    """
    lines = output.replace("\n\n", "\n").split("\n")
    numbered = "".join(f"Step {i}: {line}\n\n" for i, line in enumerate(lines, start=1))
    pieces = numbered.split("\n\n")
    if len(pieces) <= 5:
        return "\n\n".join(pieces).strip("\n")
    kept = ""
    for i, piece in enumerate(pieces):
        if i == 0 or i >= len(pieces) - 4 or begin_query in piece or begin_result in piece:
            kept += piece + "\n\n"
        elif not kept.endswith("\n\n" + _ELLIPSIS):
            kept += _ELLIPSIS
    return kept.strip("\n")


def reason_in_documents_prompt(previous: str, query: str, documents: str) -> str:
    """The Reason-in-Documents prompt (the question itself is not shown, as in the code).

    Args:
        previous: [`previous_steps`][] of the output.
        query: The current search query.
        documents: The pages, formatted as the protocol formats documents.

    Returns:
        The prompt.
    """
    values = {"prev_reasoning": previous, "search_query": query, "document": documents}
    return _FIELD.sub(lambda match: values[match.group(1)], _PROMPT)


def extract_final_information(output: str) -> str:
    """The information the step inserts, read from its output.

    The text after the last ``**Final Information**`` with its line breaks removed (not
    replaced) and backticks stripped; else the text after ``**Modified Reasoning
    Steps**``; else [`NO_HELPFUL_INFORMATION`][].
    """
    if _FINAL in output:
        return output.split(_FINAL)[-1].replace("\n", "").strip("`").strip()
    if _MODIFIED in output:
        return output.split(_MODIFIED)[-1].strip("`").strip()
    return NO_HELPFUL_INFORMATION
