"""`agent doctor`'s checks of an openai: model: the key, the endpoint's model list, and one real
one-token chat completion with the response format a cycle would use.

Timeouts are generous: llama-cpp-python's server answers /v1/models only between generations
(one lock), so a busy server is slow, not down. No redirect is followed with the key. A model
id the endpoint does not list is a warning: many servers (llama.cpp, vLLM with aliases, Ollama's
`name:latest`) answer under other names, and the chat check says whether this one does. The
doctor writes nothing: a probed format is shown, not remembered.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import PurePosixPath

from agent.common.outcomes import UsageError
from agent.config import Settings
from agent.models import ModelError
from agent.models.base import Request
from agent.models.openai.compat import OpenAIModel, refused
from agent.models.openai.format_ladder import OPENAI_ENDPOINT
from agent.secrets import api_key, is_loopback_url, model_base_url, request_headers, without_credentials
from agent.store.home import Home
from agent.tools import build_registry

DOCTOR_TIMEOUT_FLOOR = 60.0  # seconds; at least request_timeout


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    warning: bool = False  # ok, but worth a look

    def as_dict(self) -> dict:
        return {"check": self.name, "ok": self.ok, "warning": self.warning, "detail": self.detail, "fix": self.fix}


def doctor_timeout(settings: Settings) -> float:
    return max(DOCTOR_TIMEOUT_FLOOR, settings.request_timeout)


def key_check(settings: Settings, env) -> Check:
    name = settings.api_key_env
    if env.get(name):
        return Check("key", True, f"{name} is set")
    if is_loopback_url(model_base_url(settings, env)):
        return Check("key", True, f"{name} is not set: a loopback endpoint needs none")
    return Check(
        "key", False, f"{name} is not set", f"export {name}=... (a server on 127.0.0.1 / localhost needs none)"
    )


def _normalized(model_id: str) -> str:
    """A model id compared loosely: case, a path or .gguf suffix, Ollama's ':latest' ignored."""
    name = PurePosixPath(model_id.strip()).name.lower()
    for suffix in (":latest", ".gguf"):
        name = name.removesuffix(suffix)
    return name


def matching_id(wanted: str, ids: list[str]) -> str | None:
    """The listed id that names `wanted`, exactly or loosely; None when none does."""
    if wanted in ids:
        return wanted
    return next((i for i in ids if _normalized(i) == _normalized(wanted)), None)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # never resend the key elsewhere
        return None


START_IT = "start the server, or fix base_url / OPENAI_BASE_URL"


def unreachable(shown: str, exc: BaseException, waited: float, timeout: float) -> str:
    """Why the endpoint could not be reached, with the time really waited: a refusal is instant."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, BaseException) and refused(reason):
        return f"{shown} refused the connection (nothing listens there; answered in {waited:.1f}s)"
    if isinstance(reason, TimeoutError) or "timed out" in str(reason):
        return f"no answer from {shown} within {timeout:g}s"
    return f"cannot reach {shown} (after {waited:.1f}s): {reason}"


def probe_models_endpoint(base_url: str, headers: dict[str, str], model_name: str, timeout: float) -> Check:
    """GET {base_url}/models: is the endpoint there, does it take the key, does it list the model."""
    url = base_url.rstrip("/") + "/models"
    shown = without_credentials(url)
    request = urllib.request.Request(url, headers={**headers, "Accept": "application/json"})
    started = time.monotonic()
    try:
        with urllib.request.build_opener(_NoRedirects).open(request, timeout=timeout) as response:
            body = json.loads(response.read(4_000_000).decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return Check(
                "endpoint",
                False,
                f"{shown} refused the key (HTTP {exc.code})",
                "check the key in the variable named by api_key_env",
            )
        if 300 <= exc.code < 400:
            return Check(
                "endpoint",
                False,
                f"{shown} redirects (HTTP {exc.code}); the key is not sent after a redirect",
                "set base_url to where it redirects",
            )
        return Check(
            "endpoint",
            False,
            f"{shown} answered HTTP {exc.code}",
            "check base_url (OpenAI-compatible servers usually end in /v1)",
        )
    except (urllib.error.URLError, OSError) as exc:
        return Check("endpoint", False, unreachable(shown, exc, time.monotonic() - started, timeout), START_IT)
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
        return Check(
            "endpoint",
            False,
            f"{shown} did not answer JSON",
            "check base_url points at an OpenAI-compatible API (usually ending in /v1)",
        )
    models = body.get("data") if isinstance(body, dict) else None
    ids = [str(m.get("id")) for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    found = matching_id(model_name, ids)
    if found == model_name:
        return Check("endpoint", True, f"{without_credentials(base_url)} is up and serves {model_name}")
    if found is not None:
        return Check("endpoint", True, f"{without_credentials(base_url)} is up and lists {model_name} as {found}")
    listed = ", ".join(ids[:8]) + (", …" if len(ids) > 8 else "")
    return Check(
        "endpoint",
        True,
        f"{without_credentials(base_url)} is up but does not list model {model_name} "
        f"({len(ids)} listed{': ' + listed if ids else ''}); many servers answer any "
        f"name, see the chat check",
        "use one of the listed names if the chat check fails",
        warning=True,
    )


def chat_check(home: Home, settings: Settings, env, model_name: str) -> Check:
    """One real chat completion of one token, with the format a cycle would send (probed if unknown)."""
    import openai

    timeout = doctor_timeout(settings)
    quick = settings.replace(max_output_tokens=1, max_retries=0, request_timeout=timeout)
    model = OpenAIModel(model_name, quick, env, home.root)
    lines: list[str] = []
    model.start(lines.append)
    model.memory.home = None  # the doctor reads only: a probed format is shown, not remembered
    model.client = openai.OpenAI(
        api_key=api_key(quick, env),
        base_url=model.base_url,
        timeout=timeout,
        max_retries=0,
        default_headers=request_headers(quick) or None,
        http_client=openai.DefaultHttpxClient(follow_redirects=False, timeout=timeout),
    )
    started = time.monotonic()
    try:
        model.complete(Request("Reply with one JSON action.", "Say OK.", build_registry(quick).action_schema()))
    except ModelError as exc:
        return Check(
            "chat",
            False,
            f"a one-token chat completion failed: {exc}",
            "check the model name and that the server has it loaded",
        )
    refused = [line for line in lines if "refused" in line]
    return Check(
        "chat",
        True,
        f"a one-token chat completion answered in {time.monotonic() - started:.1f}s with "
        f"response_format {model.sent_as}"
        + (
            " (tools taken; whether the model calls them shows in the first cycle)"
            if model.sent_as == "tool_calls"
            else ""
        )
        + (f" ({len(refused)} format(s) refused first)" if refused else ""),
    )


def openai_checks(home: Home, settings: Settings, env, model: OpenAIModel) -> list[Check]:
    """The endpoint's model list, then a real chat completion (only if the endpoint answered)."""
    try:
        headers = {"Authorization": f"Bearer {api_key(settings, env)}", **request_headers(settings)}
    except UsageError as exc:
        return [Check("key", False, str(exc).splitlines()[0], f"fix {settings.api_key_env}")]
    endpoint = probe_models_endpoint(
        model.base_url or OPENAI_ENDPOINT, headers, model.model_name, doctor_timeout(settings)
    )
    if not endpoint.ok:
        return [endpoint]
    return [endpoint, chat_check(home, settings, env, model.model_name)]
