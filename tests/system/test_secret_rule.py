"""What counts as a secret (CLAUDE.md, "What counts as a secret"), and the forms it is found in."""

from __future__ import annotations

import base64
import json

import pytest

from agent.common.escape import escape_json, escape_tree
from agent.common.outcomes import UsageError
from agent.config import Settings
from agent.secrets import NO_KEY_PLACEHOLDER, REDACTED, Secrets, api_key, request_headers, without_credentials

KEY = "sk-proj-Zq81mN0pL2vX7cRt"


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


def test_json_output_escapes_what_a_terminal_obeys_and_stays_the_same_data() -> None:
    data = {"t": "a\u202eb\x9bc\x7f"}
    text = escape_json(json.dumps(data, ensure_ascii=False))
    assert "\u202e" not in text and "\x9b" not in text and json.loads(text) == data


def test_escape_tree_escapes_keys_and_values_each_onto_one_line() -> None:
    assert escape_tree({"k\x1b": ["a\nb\x07\u2028", 1]}) == {"k\\x1b": ["a\\nb\\x07\\u2028", 1]}
