"""Secrets: which values are secret, and the one place they are redacted or withheld.

Every writer (snapshots, logs, the index, printed output), every prompt builder and every tool
asks one `Secrets` object. It is built once per command from the settings and the environment.

What counts as a secret (docs/reference.md, "What counts as a secret"):

- every model's API key (`api_key_env`, each of `fallback_models`' own, and OPENAI_API_KEY),
  stripped of surrounding whitespace, unless it is shorter than MIN_SECRET_LENGTH or a known
  placeholder (PLACEHOLDER_KEYS);
- the value of every variable named in `secret_env`, whatever it is (MIN_NAMED_SECRET_LENGTH
  characters or more): naming it is the operator saying so;
- the credentials in every model's `base_url` (`user:pass@`, fallbacks' included) and every
  `extra_headers` value (and each word of it, for "Bearer TOKEN"), under the same rule as the API key;
  the same of the OTLP exporter's headers and endpoints (OTEL_EXPORTER_OTLP_HEADERS and the rest);
- the credentials in every URL in the environment (`DATABASE_URL=postgres://u:pass@...`), and the
  value of every variable named like a token that is nothing but one (`GITHUB_PAT`, `SLACK_WEBHOOK`:
  `CREDENTIAL_VALUE_NAME`), under the same rule.

The cycle builds one `Secrets` from its settings, and every writer (log, transcript, notes,
snapshots, index, hooks, metrics) and every child's environment uses it.

Each secret is redacted in every form `agent.common.secret_forms.forms` lists (escaped, URL-encoded,
base64, hex, reversed), and so is every fragment of a form of `FRAGMENT` (8) characters or more
(`agent.common.secret_fragments`: a key printed in two pieces is still the key); a URL that carries any
of them is refused (`found_in`).
"""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Any, Iterable, Mapping
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

from agent.common.outcomes import UsageError
from agent.common.secret_forms import forms
from agent.common.secret_fragments import Fragments

REDACTED = "[REDACTED]"

# A value shorter than this is not a secret unless named in secret_env: replacing every "abc" in
# notes would do harm, and no real key is that short.
MIN_SECRET_LENGTH = 8
# Even a variable named in secret_env must hold this much: redacting "ab" would wreck every file.
MIN_NAMED_SECRET_LENGTH = 4

# What people put in the key variable for servers that ignore it (compared without case).
PLACEHOLDER_KEYS = frozenset(
    {
        "anything",
        "lm-studio",
        "lmstudio",
        "ollama",
        "none",
        "null",
        "empty",
        "dummy",
        "sk-dummy",
        "sk-no-key-required",
        "no-key",
        "nokey",
        "no-key-required",
        "not-needed",
        "notneeded",
        "placeholder",
        "sk-placeholder",
        "sk-xxx",
        "sk-xxxx",
        "changeme",
        "token-abc123",
        "local",
        "llama.cpp",
        "llamacpp",
        "vllm",
        "sk-local",
        "sk-1234",
        "test",
        "key",
        "secret",
        "password",
    }
)

# The key sent to a loopback endpoint when none is set (local servers ignore it); never redacted.
NO_KEY_PLACEHOLDER = "sk-no-key-required"

# Variable names that usually hold credentials; child processes never see them.
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|COOKIE|SESSION|AUTH|PRIVATE|WEBHOOK|(?:^|_)(?:PAT|DSN)(?:$|_)", re.IGNORECASE
)
# Variables whose whole value is a credential (a personal access token, a webhook URL, a DSN): their
# values are secrets wherever they appear, not only withheld from children. (KEY, TOKEN and the
# rest also name paths and switches, SSH_AUTH_SOCK, KEYBOARD, whose values must not be redacted.)
CREDENTIAL_VALUE_NAME = re.compile(r"WEBHOOK|(?:^|_)(?:PAT|DSN)(?:$|_)", re.IGNORECASE)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_secret_value(value: str) -> bool:
    """Whether an unnamed credential (API key, URL password, header value) counts as a secret."""
    value = value.strip()
    return len(value) >= MIN_SECRET_LENGTH and value.lower() not in PLACEHOLDER_KEYS


def credentials_in_env(env: Mapping[str, str]) -> list[str]:
    """The credentials an environment holds by their form: every URL's `user:pass`, and the value of
    each variable CREDENTIAL_VALUE_NAME names (the caller applies is_secret_value)."""
    found = []
    for name, value in env.items():
        if CREDENTIAL_VALUE_NAME.search(name):
            found.append(value.strip())
        if "@" in value and "://" in value:
            found += [c for word in value.split() for c in url_credentials(word)]
    return found


def is_loopback_url(url: str | None) -> bool:
    """Whether `url` names this machine (localhost or a loopback address)."""
    try:
        host = urlsplit(url or "").hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_credentials(url: str | None) -> list[str]:
    """The `user:pass` of a URL and its password, as written and percent-decoded."""
    try:
        netloc = urlsplit(url or "").netloc
    except ValueError:
        return []
    userinfo, at, _host = netloc.rpartition("@")
    if not at:
        return []
    password = userinfo.partition(":")[2]
    return [v for v in dict.fromkeys([userinfo, unquote(userinfo), password, unquote(password)]) if v]


def without_credentials(url: str | None) -> str | None:
    """`url` with any `user:pass@` removed: the form to show in messages."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unparseable URL)"
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def endpoint_host(url: str | None) -> str | None:
    """An endpoint as an incident's key and a person name it: the URL's host and port, without
    credentials (`http://u:p@10.0.0.5:8000/v1` -> `10.0.0.5:8000`); a bare host as it is; None: none."""
    if not url:
        return None
    try:
        netloc = urlsplit(url if "//" in url else f"//{url}").netloc
    except ValueError:
        return "(an unparseable URL)"
    return netloc.rpartition("@")[2] or None


OTLP_HEADERS = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def otlp_credentials(env: Mapping[str, str]) -> list[str]:
    """The values of the OTLP exporter's headers (`key=value,key2=value2`, values percent-encoded),
    each whole and each word of it ("Bearer TOKEN"), and the credentials in its endpoints: secrets
    whether or not tracing is on (the variables may be set machine-wide)."""
    found = []
    for name in OTLP_HEADERS:
        for pair in env.get(name, "").split(","):
            value = unquote(pair.partition("=")[2]).strip()
            found += [value, *value.split()] if value else []
    for name in OTLP_ENDPOINTS:
        found += url_credentials(env.get(name))
    return found


def model_base_url(settings: Any, env: Mapping[str, str]) -> str | None:
    return settings.base_url or env.get("OPENAI_BASE_URL") or None


def api_key(settings: Any, env: Mapping[str, str]) -> str:
    """The API key to send: the variable's value stripped of surrounding whitespace, or the
    placeholder for a loopback endpoint when it is unset. A control character inside the key
    (a newline from a badly joined file) is a usage error naming the variable, never a header."""
    name = settings.api_key_env
    key = env.get(name, "").strip()
    bad = _CONTROL.search(key)
    if bad:
        raise UsageError(
            f"the environment variable {name} holds a control character ({bad.group()!r}) inside "
            f"the API key at position {bad.start()}; set it to the key alone"
        )
    if key:
        return key
    if is_loopback_url(model_base_url(settings, env)):
        return NO_KEY_PLACEHOLDER
    raise UsageError(
        f"the openai provider needs an API key: set the environment variable {name} (a loopback base_url needs none)"
    )


def request_headers(settings: Any) -> dict[str, str]:
    """`extra_headers` stripped, or a usage error naming a header whose value holds a control character."""
    headers = {}
    for name, value in settings.extra_headers.items():
        value = str(value).strip()
        if _CONTROL.search(value) or _CONTROL.search(str(name)):
            raise UsageError(f"setting 'extra_headers': header {name.strip()!r} holds a control character")
        headers[name] = value
    return headers


class Secrets:
    """The secret values of one command, and what may be shown or passed on without them."""

    def __init__(self, values: Iterable[str] = (), names: Iterable[str] = ()):
        self.names = frozenset(names)
        self.values = tuple(
            sorted({v for v in values if v and len(v) >= MIN_NAMED_SECRET_LENGTH}, key=len, reverse=True)
        )
        found: dict[str, str] = {}
        for value in self.values:
            found.update({value: "raw"} if len(value) < MIN_SECRET_LENGTH else forms(value))
        self.forms = dict(sorted(found.items(), key=lambda item: len(item[0]), reverse=True))
        self._short = [form for form in self.forms if len(form) < MIN_SECRET_LENGTH]  # named, 4-7 characters
        self._fragments = Fragments(self.forms)
        self._hex_fragments = Fragments(form.lower() for form, kind in self.forms.items() if kind == "hex")

    @classmethod
    def from_settings(cls, settings: Any, env: Mapping[str, str] | None = None) -> "Secrets":
        """The secrets by the rule in this module's docstring."""
        env = os.environ if env is None else env
        named = set(getattr(settings, "secret_env", ()))
        values = []
        for name in settings.secret_names:
            value = env.get(name, "").strip()
            if name in named or is_secret_value(value):
                values.append(value)
        credentials = url_credentials(model_base_url(settings, env))
        for entry in getattr(settings, "fallback_models", ()):
            credentials += url_credentials(entry.get("base_url")) if isinstance(entry, dict) else []
        for header in getattr(settings, "extra_headers", {}).values():
            credentials += [str(header).strip(), *str(header).split()]
        credentials += credentials_in_env(env)
        credentials += otlp_credentials(env)
        values += [v for v in credentials if is_secret_value(v)]
        return cls(values, settings.secret_names)

    def __bool__(self) -> bool:
        return bool(self.values)

    def redact_text(self, text: str) -> str:
        """`text` with every form of every secret, and every fragment of 8 or more characters of
        one, replaced by [REDACTED]."""
        text = self._fragments.redact(text, REDACTED)
        for form in self._short:
            if form in text:
                text = text.replace(form, REDACTED)
        return text

    def found_in(self, text: str) -> str | None:
        """The kind of secret form `text` carries, whole or as a fragment of 8 or more characters
        ("raw", "base64", "hex", ...), also after percent-decoding it once or twice; None when it
        carries none."""
        decoded = {text, unquote(text), unquote_plus(text), unquote(unquote(text)), unquote_plus(unquote(text))}
        for candidate in decoded:
            number = self._fragments.first(candidate)
            if number is not None:
                return self.forms[self._fragments.texts[number]]
            if self._hex_fragments.first(candidate.lower()) is not None:
                return "hex"
            for form in self._short:
                if form in candidate:
                    return "raw"
        return None

    def redact(self, value: Any) -> Any:
        """`value` with every secret in its strings (keys too) replaced, at any nesting depth."""
        if not self.values:
            return value
        if not isinstance(value, (list, dict)):
            return self._leaf(value)
        out: list | dict = [] if isinstance(value, list) else {}
        stack = [(value, out)]  # iterative: a hostile value nested 100,000 deep must not crash
        while stack:
            source, target = stack.pop()
            items = source.items() if isinstance(source, dict) else ((None, v) for v in source)
            for key, item in items:
                if isinstance(item, (list, dict)):
                    child: list | dict = [] if isinstance(item, list) else {}
                    stack.append((item, child))
                else:
                    child = self._leaf(item)
                if isinstance(target, dict):
                    target[self._leaf(key)] = child
                else:
                    target.append(child)
        return out

    def _leaf(self, value: Any) -> Any:
        return self.redact_text(value) if isinstance(value, str) else value

    def child_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for a child process: no secret variable, no variable holding a secret.

        Removed: the configured secret names, any name that looks like a credential (KEY, TOKEN,
        SECRET, PASSWORD, WEBHOOK, _PAT, ...), any variable whose value contains a known secret (so
        OPENAI_BASE_URL with `user:pass@` goes too) or a URL with credentials, however short.
        """
        env = os.environ if env is None else env
        return {
            k: v
            for k, v in env.items()
            if k not in self.names
            and not SECRET_NAME.search(k)
            and not any(s in v for s in self.values)
            and not ("@" in v and any(url_credentials(word) for word in v.split()))
        }
