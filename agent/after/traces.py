"""OpenTelemetry traces (`otel: true`): each cycle that asked a model, as one trace, after the fact.

Nothing is traced while the cycle runs: the loop only keeps what it would anyway (the
transcript's timeline of model calls, agent/after/transcript.py; the loop's Steps,
agent/cycle/events.py); `agent run`'s cycle gives its report a trace id before aftercare writes
the record (`new_trace_id`, in agent/cycle/run.py), and once the home's lock is released
`send_trace` builds the spans from the report, the timeline and the steps, and sends them in one
OTLP/HTTP request, bounded by `EXPORT_TIMEOUT_S`. A collector that is down, slow or refusing
costs that time and one line (in the cycle log, and `status`'s outlets until an export works
again), never the cycle's result or exit code.

The trace follows the OpenTelemetry GenAI semantic conventions at `SEMCONV_VERSION` (still marked
Development there: pinned, so a later release of them changes nothing here until this does):

    invoke_agent <home>              the cycle: cycle.id, cycle.home, cycle.stop_reason,
      chat <model>                     cycle.exit_code, cycle.cost; events for the gates' decisions
      execute_tool <tool>            one per model call: gen_ai.operation.name chat, provider,
      ...                              request and response model, tokens, finish reasons, cycle.cost
                                     one per action: gen_ai.tool.name, gen_ai.tool.call.id,
                                       cycle.tool.outcome (tool, tool_error, parked, ...)

No message content unless `otel_content` is set; then the transcript's (redacted) messages and
replies, and the tools' arguments and results as the notes show them, redacted again. The SDK and
the exporter (the `[otel]` extra) are imported here only, and this module only when tracing is on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets as random
from typing import TYPE_CHECKING, Any, Iterator

from agent.common.escape import escape_controls
from agent.common.outcomes import StopReason, is_failure
from agent.common.tags import Tag

if TYPE_CHECKING:
    from agent.after.report import CycleReport
    from agent.after.transcript import ModelCall
    from agent.config import Settings
    from agent.cycle.events import Step
    from agent.secrets import Secrets
    from agent.store.home import Home

SEMCONV_VERSION = "1.37.0"  # the GenAI semantic conventions the spans follow
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
PROTOCOL = "http/protobuf"  # the one OTLP protocol the [otel] extra's exporter speaks
EXPORT_TIMEOUT_S = 3.0  # what one cycle's export may take at most, retries included
DEFAULT_ENDPOINT = "http://localhost:4318"
GATE_STOPS = (StopReason.AWAITING_APPROVAL, StopReason.STALLED, StopReason.BUDGET_EXHAUSTED)
_ERRORS = (Tag.TOOL_ERROR, Tag.UNKNOWN_TOOL, Tag.CHECK_FAILED)
_CONTENT_CHARS = 65536  # most characters of one content attribute, with otel_content


def new_trace_id() -> str:
    """A fresh trace id: 32 hexadecimal digits, never all zeros (which OpenTelemetry reserves)."""
    while (trace_id := random.token_hex(16)) == "0" * 32:
        pass
    return trace_id


def endpoint(env: dict[str, str] | os._Environ = os.environ) -> str:
    """Where the traces go, as the exporter resolves it from the standard variables."""
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    return env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip().rstrip("/") or DEFAULT_ENDPOINT + "/v1/traces"


def protocol(env: dict[str, str] | os._Environ = os.environ) -> str:
    return (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or PROTOCOL).strip()


def send_trace(
    home: Home, settings: Settings, report: CycleReport, calls: list[ModelCall], began_ns: int, secrets: Secrets
) -> str | None:
    """Build the cycle's trace and send it; the problem (also logged and kept for `status`), or None."""
    problem = _export(home, settings, report, calls, began_ns, secrets)
    where = _shown_endpoint(secrets)
    if problem is not None:
        problem = secrets.redact_text(problem)  # a header's value may be in the SDK's words
    line = None if problem is None else f"otel: the trace of cycle {report.cycle_id} was not sent to {where}: {problem}"
    if line is not None:
        _append_to_log(home, report.cycle_id, line)
    with contextlib.suppress(Exception):  # never the cycle's result
        from agent.after.outlets import note_outlet

        note_outlet(home, "otel", problem, report.cycle_id)
    return line


def _export(
    home: Home, settings: Settings, report: CycleReport, calls: list[ModelCall], began_ns: int, secrets: Secrets
) -> str | None:
    if protocol() != PROTOCOL:
        return f"OTEL_EXPORTER_OTLP_PROTOCOL is {protocol()!r}: only {PROTOCOL} is supported"
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult
    except ImportError:
        from agent.common.extras import install_hint

        return f"otel is on but the OpenTelemetry SDK is not installed: {install_hint('otel')}"
    content = _content(home, report.cycle_id, secrets) if settings.otel_content else None
    try:
        with _quiet_sdk() as said:
            spans = Trace(home, settings, report, secrets, content).spans(calls, began_ns)
            exporter = OTLPSpanExporter(timeout=EXPORT_TIMEOUT_S)
            try:
                result = exporter.export(spans)
            finally:
                exporter.shutdown()
    except Exception as exc:  # a bad variable (a malformed header list), the SDK's own bug: never the cycle's
        return escape_controls(f"{type(exc).__name__}: {exc}")[:300]
    if result is SpanExportResult.SUCCESS:
        return None
    why = said[-1] if said else "the collector did not take it"
    return escape_controls(" ".join(why.split()))[:300] + f" (within {EXPORT_TIMEOUT_S:g} s)"


@contextlib.contextmanager
def _quiet_sdk() -> Iterator[list[str]]:
    """The SDK's own log records, kept instead of printed (cron mails stderr, and a record may hold
    a response the collector wrote): the caller makes one line of the last."""
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            with contextlib.suppress(Exception):
                said.append(record.getMessage())

    logger = logging.getLogger("opentelemetry")
    handler, propagated = Keep(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield said
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagated


def _shown_endpoint(secrets: Secrets) -> str:
    from agent.secrets import without_credentials

    return secrets.redact_text(without_credentials(endpoint()) or "?")


def _append_to_log(home: Home, cycle_id: str, line: str) -> None:
    """The one line, at the end of the cycle's own log (no other process writes it)."""
    from agent.after.cycle_log import CycleLog

    with contextlib.suppress(Exception), CycleLog(home.cycle_log(cycle_id), _NoSecrets()) as log:
        log(line)


class _NoSecrets:
    """The line is redacted already."""

    def redact_text(self, text: str) -> str:
        return text

    def redact(self, value: Any) -> Any:
        return value


def _content(home: Home, cycle_id: str, secrets: Secrets) -> dict[int, dict]:
    """{call: its transcript record} (redacted when written, and again here)."""
    from agent.after.transcript import read_transcript

    return {record["call"]: secrets.redact(record) for _, record in read_transcript(home, cycle_id) if "call" in record}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:_CONTENT_CHARS]


class Trace:
    """The spans of one cycle, built with the SDK, ended, not yet sent."""

    def __init__(
        self, home: Home, settings: Settings, report: CycleReport, secrets: Secrets, content: dict[int, dict] | None
    ):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        self.home, self.settings, self.report, self.secrets, self.content = home, settings, report, secrets, content
        self.ended: list = []
        trace_id = int(report.trace_id or new_trace_id(), 16)

        class OneTrace(RandomIdGenerator):  # every span in the trace id the record already holds
            def generate_trace_id(self) -> int:
                return trace_id

        class Keep(SpanProcessor):  # ended spans, sent together in one request
            def on_end(inner, span) -> None:  # noqa: N805
                self.ended.append(span)

        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "agent"}
        provider = TracerProvider(resource=Resource.create(attributes), id_generator=OneTrace(), shutdown_on_exit=False)
        provider.add_span_processor(Keep())
        self.tracer = provider.get_tracer("agent", schema_url=SCHEMA_URL)

    def spans(self, calls: list[ModelCall], began_ns: int) -> list:
        from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

        report = self.report
        ends = [c.ended_ns for c in calls] + [s.ended_ns for s in report.steps]
        ended_ns = max([began_ns + int(report.duration_s * 1e9), *ends])
        root = self.tracer.start_span(
            f"invoke_agent {self.home.root.name}",
            kind=SpanKind.INTERNAL,
            start_time=began_ns,
            attributes=self._root_attributes(),
        )
        inside = set_span_in_context(root)
        for call in calls:
            self._model_call(call, inside)
        for step in report.steps:
            self._step(step, inside)
        if report.stop_reason in {reason.value for reason in GATE_STOPS}:
            detail = self.secrets.redact_text(report.stop_detail or "")
            root.add_event("cycle.gate", {"cycle.gate.decision": report.stop_reason, "cycle.gate.detail": detail})
        if is_failure(report.stop_reason):
            root.set_status(Status(StatusCode.ERROR, self.secrets.redact_text(report.error or report.stop_reason)))
        root.end(end_time=ended_ns)
        return self.ended

    def _root_attributes(self) -> dict:
        report = self.report
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.home.root.name,
            "gen_ai.conversation.id": report.cycle_id,
            "cycle.home": str(self.home.root),
            "cycle.id": report.cycle_id,
            "cycle.stop_reason": report.stop_reason,
            "cycle.exit_code": report.exit_code,
            "cycle.iterations": report.iterations,
            "gen_ai.usage.input_tokens": report.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": report.usage.completion_tokens,
        }
        if report.cost is not None:
            attributes["cycle.cost"] = report.cost
        error_kind = getattr(report, "error_kind", None)
        if report.stop_reason == StopReason.ERROR.value:
            attributes["error.type"] = error_kind if isinstance(error_kind, str) else "error"
        return attributes

    def _model_call(self, call: ModelCall, inside) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        provider, _, name = call.model.partition(":")
        completion = call.completion
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": name or provider,
            "cycle.call": call.call,
            "cycle.call.purpose": call.purpose,
        }
        if completion is not None:
            attributes["gen_ai.response.model"] = completion.response_model or name or provider
            attributes["gen_ai.usage.input_tokens"] = completion.usage.prompt_tokens
            attributes["gen_ai.usage.output_tokens"] = completion.usage.completion_tokens
            if completion.finish_reason:
                attributes["gen_ai.response.finish_reasons"] = [completion.finish_reason]
            cost = self._cost(call.model, completion.usage)
            if cost is not None:
                attributes["cycle.cost"] = cost
        attributes.update(self._call_content(call.call))
        span = self.tracer.start_span(
            f"chat {name or provider}", context=inside, kind=SpanKind.CLIENT, start_time=call.began_ns
        )
        span.set_attributes(attributes)
        if completion is None:
            span.set_attribute("error.type", call.error_kind or call.error or "error")
            span.set_status(Status(StatusCode.ERROR, call.error_kind or call.error or "error"))
        span.end(end_time=max(call.ended_ns, call.began_ns))

    def _call_content(self, number: int) -> dict[str, str]:
        """With otel_content: the messages sent and the reply, as the transcript has them."""
        record = (self.content or {}).get(number)
        if record is None:
            return {}
        sent = [
            {"role": m.get("role"), "parts": [{"type": "text", "content": m.get("content")}]}
            for m in record.get("messages") or []
            if isinstance(m, dict)
        ]
        parts: list[dict] = [{"type": "text", "content": record.get("reply")}] if record.get("reply") else []
        for made in record.get("tool_calls") or []:
            function = made.get("function") or {} if isinstance(made, dict) else {}
            parts.append({"type": "tool_call", "id": made.get("id"), "name": function.get("name"),
                          "arguments": function.get("arguments")})  # fmt: skip
        reply = [{"role": "assistant", "parts": parts, "finish_reason": record.get("finish_reason")}]
        return {"gen_ai.input.messages": _json(sent), "gen_ai.output.messages": _json(reply)}

    def _step(self, step: Step, inside) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        outcome = step.outcome
        tool = self.secrets.redact_text(escape_controls(str(outcome.tool)))[:100] if outcome.tool else None
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": self.secrets.redact_text(step.call_id or f"{self.report.cycle_id}/{step.n}"),
            "cycle.tool.outcome": outcome.kind.action or "",
            "cycle.iteration": step.n,
        }
        if tool is not None:
            attributes["gen_ai.tool.name"] = tool
        if self.settings.otel_content:
            attributes["gen_ai.tool.call.arguments"] = _json(self.secrets.redact(outcome.args))
            if outcome.result is not None:
                attributes["gen_ai.tool.call.result"] = self.secrets.redact_text(outcome.result)[:_CONTENT_CHARS]
        span = self.tracer.start_span(
            f"execute_tool {tool or outcome.kind.action}",
            context=inside,
            kind=SpanKind.INTERNAL,
            start_time=step.began_ns,
            attributes=attributes,
        )
        if outcome.kind is Tag.APPROVAL:
            span.add_event("cycle.gate", {"cycle.gate.decision": "parked"}, timestamp=step.ended_ns)
        elif outcome.kind is Tag.CHECK_FAILED:
            span.add_event("cycle.gate", {"cycle.gate.decision": "check_failed"}, timestamp=step.ended_ns)
        if outcome.kind in _ERRORS or outcome.kind is Tag.PARSE_ERROR:
            span.set_attribute("error.type", outcome.kind.action or "error")
            span.set_status(Status(StatusCode.ERROR, outcome.kind.action or "error"))
        span.end(end_time=max(step.ended_ns, step.began_ns))

    def _cost(self, model: str, usage: Any) -> float | None:
        if not self.settings.prices:
            return None
        from agent.gates.budgets import cycle_cost

        return cycle_cost(self.settings.prices, model, usage)
