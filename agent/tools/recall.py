"""recall: the model searches the archive, whatever left memory.

The search itself is agent/store/archive.py (SQLite FTS5 over the archive, in logs/agent.db);
this module is the tool: its arguments, its refusals, and a bounded answer. What left a memory
section is found by its words, and by its id (`recall("known-12")`); a record of an entry
active.yaml still holds is one a cycle that did not save left, and is not shown.
"""

from __future__ import annotations

from agent.common.outcomes import AgentError
from agent.store.archive import Match, fts_query, search
from agent.store.db import any_rows
from agent.store.home import Home
from agent.tools.base import Tool, ToolContext, ToolError

MAX_LIMIT = 10
MATCH_CHARS = 300
RESULT_CHARS = 2000


def match_line(match: Match) -> str:
    """One match on one line, clipped: `[cycle id] kind: text`."""
    text = " ".join(match.text.split())
    if len(text) > MATCH_CHARS:
        text = text[: MATCH_CHARS - 1] + "…"
    return f"[{match.cycle_id}] {match.kind.replace('_', ' ')}: {text}"


def saved(home: Home, matches: list[Match]) -> list[Match]:
    """`matches` without what a cycle that did not save left: an entry of a memory section that
    active.yaml still holds (a kill between the archive and active.yaml), and each entry once."""
    if not any(match.entry_id for match in matches):
        return matches
    from agent.scratchpad import load_state

    try:
        state = load_state(home)
    except AgentError:  # an unreadable active.yaml: shown as found
        state = {}
    seen, kept = set(), []
    for match in matches:
        key = (match.section, match.entry_id)
        held = state.get(match.section) if match.section else None
        if match.entry_id and (key in seen or _holds(held, match.entry_id)):
            continue
        seen.add(key)
        kept.append(match)
    return kept


def _holds(entries: object, entry_id: str) -> bool:
    return isinstance(entries, list) and any(isinstance(e, dict) and e.get("id") == entry_id for e in entries)


def recall(ctx: ToolContext, query: str, limit: int = 3) -> str:
    """Search the archive of older notes and completed tasks (moved out of the scratchpad).

    Args:
        query: what to look for, e.g. "disk space warning"
        limit: how many matches to return, best first (1 to 10)
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise ToolError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if fts_query(query) is None:
        raise ToolError("the query has no words to search for")
    home = Home.at(ctx.home)
    try:
        if not any_rows(home, "archive"):
            return "nothing has been archived yet"
        matches = saved(home, search(home, query, limit + MAX_LIMIT))[:limit]
    except AgentError as exc:
        raise ToolError(f"cannot search the archive: {exc}") from None
    if not matches:
        return f"no archived note or task matches {query[:80]!r}"
    lines = [f"{len(matches)} archived item(s), best match first:"]
    for match in matches:
        line = match_line(match)
        if sum(len(kept) + 1 for kept in lines) + len(line) > RESULT_CHARS:
            lines.append(f"[{len(matches) - len(lines) + 1} more not shown]")
            break
        lines.append(line)
    return "\n".join(lines)


TOOL = Tool.from_function(recall, example={"query": "disk space", "limit": 3}, side_effects=False)
