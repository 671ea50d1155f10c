"""What counts as a secret (docs/reference.md, "What counts as a secret"), and the forms it is found in."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agent.common.outcomes import UsageError
from agent.config import Settings
from agent.secrets import (
    NO_KEY_PLACEHOLDER,
    REDACTED,
    Secrets,
    api_key,
    is_loopback_url,
    is_secret_value,
    request_headers,
    url_credentials,
    without_credentials,
)
from tests.helpers import leaked_pieces

KEY = "sk-proj-Zq81mN0pL2vX7cRt"
LIVE_KEY = "sk-live-7Hq2ZxP9wLm4Rt8Vb3Nc6Ys1KdJ0Fg5A"
TOKEN = "tok-fedcba9876543210SECRET"


def secrets_for(env: dict, **settings) -> Secrets:
    return Secrets.from_settings(Settings(**settings), env)


@pytest.mark.parametrize(
    "placeholder", ["anything", "lm-studio", "ollama", "sk-no-key-required", "EMPTY", "dummy", "None", "not-needed"]
)
def test_a_known_placeholder_key_is_not_a_secret(placeholder: str) -> None:
    secrets = secrets_for({"OPENAI_API_KEY": placeholder})
    assert secrets.redact_text(f"Echo: {placeholder} is running") == f"Echo: {placeholder} is running"


def test_a_short_key_is_not_a_secret_but_a_short_secret_env_value_is() -> None:
    secrets = secrets_for({"OPENAI_API_KEY": "abc123", "PIN": "4711x"}, secret_env=["PIN"])
    assert secrets.redact_text("abc123 4711x") == f"abc123 {REDACTED}"


def test_a_placeholder_named_in_secret_env_is_a_secret() -> None:
    assert secrets_for({"LOCAL_KEY": "anything"}, secret_env=["LOCAL_KEY"]).redact_text("anything") == REDACTED


def test_a_real_key_is_a_secret_even_for_a_loopback_endpoint() -> None:
    secrets = secrets_for({"OPENAI_API_KEY": f"  {KEY}\n"}, base_url="http://127.0.0.1:8080/v1")
    assert secrets.redact_text(f"k={KEY}") == f"k={REDACTED}"


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:1234/v1"])
def test_a_loopback_endpoint_needs_no_key(base_url: str) -> None:
    assert api_key(Settings(base_url=base_url), {}) == NO_KEY_PLACEHOLDER


def test_a_remote_endpoint_without_a_key_is_a_usage_error_naming_the_variable() -> None:
    with pytest.raises(UsageError, match="MY_KEY"):
        api_key(Settings(api_key_env="MY_KEY", base_url="https://api.example.com/v1"), {})


@pytest.mark.parametrize("bad", ["sk-abc\ndef123456", "sk-abc\x00def123456", "sk-abc\rdef123456"])
def test_a_control_character_inside_the_key_is_a_usage_error_that_shows_no_key(bad: str) -> None:
    with pytest.raises(UsageError, match="OPENAI_API_KEY") as refused:
        api_key(Settings(), {"OPENAI_API_KEY": bad})
    assert "abc" not in str(refused.value) and "def123456" not in str(refused.value)


def test_extra_header_values_are_stripped_and_control_characters_refused() -> None:
    assert request_headers(Settings(extra_headers={"X-A": " v \n"})) == {"X-A": "v"}
    with pytest.raises(UsageError, match="X-B"):
        request_headers(Settings(extra_headers={"X-B": "a\nb"}))


def test_base_url_credentials_and_header_values_are_secrets_and_hidden_from_children() -> None:
    url = "https://agent:pa55-w0rd-long@llm.example.com/v1"
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": url, "PATH": "/bin"}
    secrets = secrets_for(env, extra_headers={"X-Token": "Bearer hdr-abcdef012345", "X-Title": "agent-x"})
    assert secrets.redact_text("pa55-w0rd-long;hdr-abcdef012345; agent-x") == f"{REDACTED};{REDACTED}; agent-x"
    assert secrets.child_env(env) == {"PATH": "/bin"}
    assert without_credentials(url) == "https://llm.example.com/v1"


@pytest.mark.parametrize(
    "form",
    [
        repr(KEY + "\n"),
        json.dumps(KEY + "\r\n"),
        KEY + "\n",
        base64.b64encode(KEY.encode()).decode(),
        base64.urlsafe_b64encode(b"x" + KEY.encode()).decode().rstrip("="),
        KEY.encode().hex(),
        KEY.encode().hex().upper(),
        KEY[::-1],
        "".join(f"%{b:02X}" for b in KEY.encode()),
    ],
    ids=["repr", "json", "trailing_newline", "base64", "urlsafe_base64_shifted", "hex", "HEX", "reversed", "percent"],
)
def test_every_form_of_a_secret_is_redacted_and_found(form: str) -> None:
    secrets = Secrets([KEY])
    assert secrets.found_in(f"https://x.example/?q={form}")
    redacted = secrets.redact_text(f"before {form} after")
    assert REDACTED in redacted and Secrets([KEY]).found_in(redacted) is None


def test_ordinary_text_carries_no_secret() -> None:
    assert Secrets([KEY]).found_in("https://example.com/search?q=the+weather+in+paris") is None


def test_redaction_works_at_any_nesting_depth():
    """10,000 levels: ten times Python's recursion limit, so a recursive redact would fail."""
    secrets = Secrets.from_settings(Settings(secret_env=["DEPLOY_TOKEN"]), {"DEPLOY_TOKEN": TOKEN})
    value: list = [TOKEN]
    for _ in range(10_000):
        value = [value, {TOKEN: TOKEN}]
    redacted = secrets.redact(value)
    for _ in range(10_000):
        assert redacted[1] == {"[REDACTED]": "[REDACTED]"}
        redacted = redacted[0]
    assert redacted == ["[REDACTED]"]


@hsettings(max_examples=200, deadline=None)
@given(
    before=st.text(max_size=60),
    after=st.text(max_size=60),
    start=st.integers(0, len(LIVE_KEY) - 8),
    size=st.integers(8, len(LIVE_KEY)),
)
def test_any_fragment_anywhere_in_any_text_is_redacted(before, after, start, size):
    secrets = Secrets([LIVE_KEY])
    piece = LIVE_KEY[start : start + size]
    shown = secrets.redact_text(before + piece + after)
    assert not leaked_pieces(shown, LIVE_KEY) and REDACTED in shown
    assert secrets.found_in(f"https://x.example/{before}{piece}{after}") is not None


def test_text_without_a_fragment_is_left_as_it_is():
    secrets = Secrets.from_settings(Settings(), {"OPENAI_API_KEY": LIVE_KEY})
    text = "sk-live is a prefix, 7Hq2ZxP is seven characters, and " + LIVE_KEY[:7] + "|" + LIVE_KEY[7:14]
    assert secrets.redact_text(text) == text
    assert secrets.found_in("https://example.com/?q=" + LIVE_KEY[:7]) is None


@pytest.mark.parametrize(
    ("value", "secret"),
    [(KEY, True), (f"  {KEY}\n", True), ("short", False), ("  abcdefg ", False), ("Sk-No-Key-Required", False)],
)
def test_an_unnamed_value_is_a_secret_when_long_enough_and_no_placeholder(value: str, secret: bool) -> None:
    assert is_secret_value(value) is secret


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://127.8.9.10/v1", True),
        ("http://api.localhost/v1", True),
        ("http://[::1]/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://127.0.0.1.evil.example/v1", False),  # a name that starts like a loopback address
        ("http://localhost.evil.example/v1", False),
        ("http://[::1/v1", False),  # unparseable: not loopback, and no exception
        ("", False),
        (None, False),
    ],
)
def test_loopback_means_this_machine_and_nothing_that_only_looks_like_it(url, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback


def test_url_credentials_are_found_as_written_and_decoded_and_shown_nowhere() -> None:
    url = "https://me:p%40ss-w0rd!@host.example/v1"
    assert url_credentials(url) == ["me:p%40ss-w0rd!", "me:p@ss-w0rd!", "p%40ss-w0rd!", "p@ss-w0rd!"]
    assert url_credentials("https://host.example/v1") == [] and url_credentials("http://[::1") == []
    assert without_credentials(url) == "https://host.example/v1"
    assert without_credentials("http://u:p@[::1") == "(an unparseable URL)"  # never the URL itself
    assert without_credentials(None) is None


def test_a_header_name_with_a_control_character_is_refused_too() -> None:
    with pytest.raises(UsageError, match="control character"):
        request_headers(Settings(extra_headers={"X-A\r\nX-Injected": "v"}))


def test_a_secret_is_redacted_in_keys_and_values_and_other_leaves_are_kept() -> None:
    secrets = Secrets([KEY])
    data = {KEY: [f"a {KEY} b", 3, None, True, {"k": KEY}], "plain": 1.5}
    assert secrets.redact(data) == {REDACTED: [f"a {REDACTED} b", 3, None, True, {"k": REDACTED}], "plain": 1.5}
    assert data[KEY][0] == f"a {KEY} b"  # the input is not changed in place
    assert Secrets().redact(data) is data  # no secret: nothing copied


def test_values_too_short_even_to_name_are_no_secret() -> None:
    secrets = Secrets(["ab", "", "abc"])
    assert not secrets and secrets.redact_text("ab abc") == "ab abc"


def test_child_env_drops_named_credential_like_and_secret_holding_variables() -> None:
    secrets = Secrets([TOKEN], names=["DEPLOY"])
    env = {
        "PATH": "/bin",
        "DEPLOY": "x",
        "GITHUB_TOKEN": "y",
        "my_password": "z",
        "HARMLESS": f"prefix-{TOKEN}",
        "LANG": "C",
    }
    assert secrets.child_env(env) == {"PATH": "/bin", "LANG": "C"}


def test_a_cycle_builds_one_secrets_and_the_model_tools_and_files_share_it(home, monkeypatch):
    """`agent run` on an openai: model whose tool fetches a URL: one Secrets, built by the command."""
    from tests.helpers import configure, read_active, run_openai
    from tests.models.openai_server import OpenAIServer, Reply

    built: list[Secrets] = []
    real = Secrets.__init__

    def counted(self, *args, **kwargs):
        built.append(self)
        real(self, *args, **kwargs)

    with OpenAIServer() as server:
        fetch = {"tool": "http_get", "args": {"url": f"{server.base_url}/models"}}
        server.add(Reply.chat(fetch), Reply.chat({"tool": "done", "args": {"summary": "fetched"}}))
        configure(
            home,
            {"current_task": "fetch"},
            tool_calling="text",
            response_format="json_object",
            http_allow_networks=["127.0.0.0/8"],
            max_retries=0,
        )
        monkeypatch.setattr(Secrets, "__init__", counted)
        result = run_openai(home, server.base_url, env={"OPENAI_API_KEY": LIVE_KEY})
    assert result.exit_code == 0, result.output
    assert "[TOOL] http_get(" in read_active(home)["notes"]  # the tool ran, with the cycle's Secrets
    assert len(built) == 1 and built[0].values == (LIVE_KEY,)


def test_credentials_in_any_url_of_the_environment_and_token_named_values_are_secrets():
    env = {
        "DATABASE_URL": "postgres://app:hunter2pass@db.internal/app",
        "GITHUB_PAT": "ghp_0123456789abcdef",
        "SLACK_WEBHOOK": "https://hooks.slack.com/services/T0/B0/abcdefgh12345678",
        "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",  # named like a credential, but a path: withheld, not redacted
    }
    secrets = Secrets.from_settings(Settings(), env)
    text = "db hunter2pass, pat ghp_0123456789abcdef, hook T0/B0/abcdefgh12345678, sock /tmp/ssh-agent.sock"
    assert secrets.redact_text(text) == "db [REDACTED], pat [REDACTED], hook [REDACTED], sock /tmp/ssh-agent.sock"


def test_a_child_gets_no_url_with_credentials_nor_a_pat_or_webhook_but_keeps_path_names():
    env = {
        "DATABASE_URL": "postgres://u:pw@db/app",  # a password too short to redact is still withheld
        "GITHUB_PAT": "x",
        "PAT_FILE": "y",
        "SLACK_WEBHOOK": "z",
        "PATH": "/usr/bin",
        "MY_PATH": "/opt",
        "PLAIN": "https://example.com/a@b",
    }
    assert Secrets().child_env(env) == {"PATH": "/usr/bin", "MY_PATH": "/opt", "PLAIN": "https://example.com/a@b"}
