"""Acceptance checks: the operator's test that a task really happened before `done` is accepted.

`agent task add TEXT --check "COMMAND"` binds a shell command line to the task TEXT. The binding
lives in active.yaml under the top-level key `checks` ({task text: command}), a key the runtime
owns: update_scratchpad refuses it (it is not a model field), the file tools cannot write
scratchpad/, and the dispatcher never writes it. Keeping it in the state itself means one atomic
write covers a queued task and its check, and a snapshot, a restore or a fork carries both.

The model may see its task's check (it is in the prompt's scratchpad) and may reorder its queue,
but a checked task leaves current_task and pending_actions only through an accepted `done` or an
operator's `agent task drop`: an update_scratchpad that would rename or remove it is refused
(`checked_tasks_removed`), and so is one that puts another task in front of a checked current task
(`checked_task_displaced`). So renaming the task, or finishing a task of the model's own in front
of it, cannot dodge its check.

A check runs as `/bin/sh -c COMMAND` (the operator wrote it: it is not under the model's shell
policy) in the workspace, in its own process group, killed whole at `check_timeout`. Exit 0
passes; anything else refuses the done. It runs in the same sandbox as the model's commands
with the workspace read-only, so a check that runs the model's code cannot reach a secret,
change what it checks or touch the host. Where no sandbox can start (or the workspace is the
whole home) it is refused, with a note saying why, unless the operator opted in by name with
`checks_unsandboxed: true`: then it runs on the host with secrets removed from its environment
(doctor and every cycle log say so). Either way Python does not import from the workspace
(PYTHONSAFEPATH=1): a `json` module file the model planted is not the `json` a check imports.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.gates.base import Action, Gate
from agent.memory.task_checks import check_for, checked_task_displaced, checked_tasks_removed
from agent.tools import ToolContext, ToolError
from agent.tools.sandbox import CHECK_ENV, Sandbox, SandboxUnavailable, checks_sandbox_problem
from agent.tools.shell import run_capped

# Bytes of a check's output kept (the note shows a clipped, redacted part of it).
CHECK_OUTPUT_BYTES = 8192


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    output: str
    why: str  # "exit 0", "exit 1", "timed out after 60s", "could not start: ..."


def run_check(ctx: ToolContext, command: str) -> CheckResult:
    """Run one check in the workspace (created if missing) in the sandbox, read-only, bounded by
    ctx.settings.check_timeout; on the host only with checks_unsandboxed, else refused."""
    timeout = ctx.settings.check_timeout
    try:
        workspace = ctx.workspace
        workspace.mkdir(parents=True, exist_ok=True)
        no_sandbox = checks_sandbox_problem(ctx.home, ctx.settings)
        if no_sandbox and not ctx.settings.checks_unsandboxed:
            return CheckResult(False, "", f"was refused: {CHECK_REFUSED.format(why=no_sandbox)}")
        if no_sandbox:
            proc = _on_the_host(ctx, workspace, command)
            output, _, timed_out = run_capped(proc, CHECK_OUTPUT_BYTES, timeout)
        else:
            with Sandbox(workspace, ctx.settings, writable=False, env=CHECK_ENV) as box:
                proc = box.start(command)
                output, _, timed_out = run_capped(proc, CHECK_OUTPUT_BYTES, timeout)
    except (OSError, ToolError, SandboxUnavailable) as exc:
        return CheckResult(False, "", f"could not start: {exc}")
    text = output.decode("utf-8", errors="replace")
    if timed_out:
        return CheckResult(False, text, f"timed out after {timeout:g}s and was killed")
    return CheckResult(proc.returncode == 0, text, f"exit {proc.returncode}")


CHECK_REFUSED = (
    "checks run only in the sandbox, which cannot run here ({why}); a check may run the model's code, so it "
    "never runs on the host unless the operator sets checks_unsandboxed: true"
)


def _on_the_host(ctx: ToolContext, workspace, command: str):
    """checks_unsandboxed: the check on the host, as the operator, secrets removed from its environment."""
    import subprocess  # here, not at the top: only a task with a check runs one

    return subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=workspace,
        env={**ctx.child_env(), **CHECK_ENV},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def done_refusal(state: dict, ctx: ToolContext) -> str | None:
    """Why `done` may not complete the current task (its check failed), or None to accept it."""
    try:
        command = check_for(state, state["current_task"])
    except ValueError as exc:
        return f"done refused: {exc}"
    if command is None:
        return None
    result = run_check(ctx, command)
    if result.passed:
        return None
    output = " ".join(result.output.split()) or "(no output)"
    return f"done refused: the check `{command}` {result.why}: {output}"


class CheckGate(Gate):
    """The operator's acceptance checks: `done` completes a checked task only when its check passes,
    and update_scratchpad may not rename or drop a checked task to dodge it."""

    def on_action(self, state: dict, action: Action) -> str | None:
        if action.after is None:
            return None
        dodged = checked_tasks_removed(state, action.after)
        if dodged:
            return (
                f"task '{dodged[0]}' has an operator check: it leaves the queue only through done "
                f"(when the check passes) or `agent task drop`"
            )
        displaced = checked_task_displaced(state, action.after)
        if displaced is not None:
            return (
                f"task '{displaced}' has an operator check: it stays the current task until done (when the "
                f"check passes) or `agent task drop 0`; the queue behind it is yours to order"
            )
        return None

    def on_done(self, state: dict, action: Action) -> str | None:
        return done_refusal(state, action.ctx)  # runs the task's acceptance check, if it has one
