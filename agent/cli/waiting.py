"""What `agent status` says of the calls parked for the operator (agent/gates/approvals.py): how many
wait, and since when. Its own module so that `status` loads no other command's module."""

from __future__ import annotations

from agent.cli.common import clip, seconds_since
from agent.common.outcomes import InvalidScratchpad
from agent.common.times import age_text
from agent.gates.approvals import pending_calls
from agent.store.home import Home


def approvals_status(home: Home) -> tuple[dict, list[str]]:
    """What `agent status` tells of parked calls: ({"approvals": ...} for --json, its text lines).
    The lines are empty when nothing waits; unreadable records are said, never raised."""
    try:
        waiting = pending_calls(home)
    except InvalidScratchpad as exc:
        return {"approvals": None, "approvals_error": str(exc)}, [f"approvals: unknown: {clip(exc, 200)}"]
    ages = [age_s for age_s in (seconds_since(r.get("parked")) for r in waiting) if age_s is not None]
    data = {
        "pending": len(waiting),
        "ids": [r["id"] for r in waiting],
        "oldest_parked": min((r["parked"] for r in waiting if isinstance(r.get("parked"), str)), default=None),
        "oldest_age_s": round(max(ages), 1) if ages else None,
    }
    if not waiting:
        return {"approvals": data}, []
    oldest = f", the oldest parked {age_text(data['oldest_age_s'])} ago" if ages else ""
    return {"approvals": data}, [
        f"approvals: {len(waiting)} call(s) wait for you{oldest} "
        f"(ids {', '.join(data['ids'])}; agent approvals lists them)"
    ]
