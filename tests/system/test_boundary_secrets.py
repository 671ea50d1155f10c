"""One set of secrets from every credential the home knows, as root and as an ordinary user.

Real cycles against real HTTP endpoints on 127.0.0.1: a fallback model's own key and the
credentials in its base_url are redacted from everything the cycle writes, even when its endpoint
echoes them; a fallback with its own endpoint must name its key (or say `inherit`); the primary's
extra_headers never reach another endpoint.
"""

from __future__ import annotations

import json

from tests.helpers import tree_digest
from tests.models.openai_server import OpenAIServer, Reply
from tests.users import AgentUser, done, everything_in

PRIMARY_KEY = "sk-primary-4b7e2a9c1d6f"
FALLBACK_KEY = "sk-fallback-8c3f5a1e9b2d"
URL_PASSWORD = "pw-in-url-6d2b9f4a7c"
TEAM_TOKEN = "team-token-9f8e7d6c5b"
KEYS = {"OPENAI_API_KEY": PRIMARY_KEY, "FALLBACK_KEY": FALLBACK_KEY}
TASK = ["agent", "task", "add"]


def _home(user: AgentUser, primary: OpenAIServer, fallback: dict, **config) -> tuple:
    home = user.make_home(
        {
            "model": "openai:primary-model",
            "base_url": primary.base_url,
            "max_retries": 0,
            "fallback_models": [fallback],
            **config,
        }
    )
    assert user.agent("task", "add", "say hello", "--home", str(home)).returncode == 0
    return home


def _echo(request) -> Reply:
    """An endpoint that quotes what it was sent in its error, as some proxies do."""
    auth = next((v for k, v in request.headers.items() if k.lower() == "authorization"), "")
    return Reply.error(400, f"invalid credentials: {auth} at {request.path} (password {URL_PASSWORD})")


def _leaks(home, result, *secrets: str) -> list[str]:
    """The secrets found in what the cycle wrote or printed (config.yaml, the operator's, holds some)."""
    written = b"".join(everything_in(home / name) for name in ("logs", "scratchpad", "workspace"))
    written += (result.stdout + result.stderr).encode()
    return [s for s in secrets if s.encode() in written]


def test_a_fallbacks_own_key_echoed_by_its_endpoint_is_redacted_everywhere(agent_user):
    with OpenAIServer(default=Reply.error(503, "overloaded")) as primary, OpenAIServer(default=_echo) as fallback:
        entry = {"model": "openai:second-model", "base_url": fallback.base_url, "api_key_env": "FALLBACK_KEY"}
        home = _home(agent_user, primary, entry)
        result = agent_user.agent("run", "--home", str(home), "--json", env=KEYS)
        assert fallback.chat_requests, result.stderr  # the fallback was asked, and answered with the key
    assert json.loads(result.stdout)["stop_reason"] == "error"
    assert "invalid credentials" in next((home / "logs").glob("cycle_*.log")).read_text()
    assert _leaks(home, result, FALLBACK_KEY, PRIMARY_KEY) == []


def test_the_credentials_in_a_fallbacks_base_url_are_redacted_everywhere(agent_user):
    with OpenAIServer(default=Reply.error(503, "overloaded")) as primary, OpenAIServer(default=_echo) as fallback:
        url = fallback.base_url.replace("http://", f"http://agent:{URL_PASSWORD}@")
        home = _home(
            agent_user, primary, {"model": "openai:second-model", "base_url": url, "api_key_env": "FALLBACK_KEY"}
        )
        result = agent_user.agent("run", "--home", str(home), "--json", env=KEYS)
        assert fallback.chat_requests, result.stderr
    assert _leaks(home, result, URL_PASSWORD, FALLBACK_KEY) == []


def test_a_fallback_with_its_own_endpoint_and_no_key_named_is_refused_with_one_line(agent_user):
    with OpenAIServer(default=Reply.error(503, "overloaded")) as primary, OpenAIServer() as fallback:
        home = _home(agent_user, primary, {"model": "openai:second-model", "base_url": fallback.base_url})
        before = tree_digest(home)
        result = agent_user.agent("run", "--home", str(home), "--json", env=KEYS)
        assert primary.chat_requests == [] and fallback.chat_requests == []
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "agent: error: setting 'fallback_models': entry 1 (openai:second-model) has its own base_url but no "
        "api_key_env: add api_key_env: VARIABLE (its own key), or api_key_env: inherit to send it the primary's key"
    ]
    assert tree_digest(home) == before


def test_extra_headers_go_only_to_the_endpoint_they_were_configured_for(agent_user):
    done_reply = Reply.chat(done("said hello"))
    with OpenAIServer(default=Reply.error(503, "overloaded")) as primary, OpenAIServer(default=done_reply) as fallback:
        entry = {"model": "openai:second-model", "base_url": fallback.base_url, "api_key_env": "inherit"}
        home = _home(agent_user, primary, entry, extra_headers={"X-Team-Token": TEAM_TOKEN})
        result = agent_user.agent("run", "--home", str(home), "--json", env=KEYS)
        assert result.returncode == 0, result.stderr
        sent = [{k.lower(): v for k, v in r.headers.items()} for r in fallback.chat_requests]
        asked = [{k.lower(): v for k, v in r.headers.items()} for r in primary.chat_requests]
    assert asked and all(h.get("x-team-token") == TEAM_TOKEN for h in asked)
    assert sent and all("x-team-token" not in h for h in sent)
    assert all(h.get("authorization") == f"Bearer {PRIMARY_KEY}" for h in sent)  # inherit: the primary's key, as asked
    assert _leaks(home, result, TEAM_TOKEN, PRIMARY_KEY) == []
