"""What an MCP server lists and returns, as this agent's tools: names, schemas, results, launch.

Pure functions (no SDK, no event loop) used by tools/mcp.py; each reads untrusted data from a
server or operator config and returns something our Tool, Registry and notes can hold.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from agent.config import Settings
from agent.secrets import SECRET_NAME
from agent.tools.base import TOOL_NAME, ToolError
from agent.tools.children import owner_record

MAX_DESCRIPTION_CHARS = 400
MAX_SCHEMA_DEPTH = 8
MAX_RESULT_CHARS = 65_536
_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

# Started in place of a server on Linux: asks the kernel to SIGKILL it when the agent dies, even
# by SIGKILL when none of our code runs; records its process group (it leads its own session: the
# SDK starts it so) where the agent and the next cycle's sweep find it (agent/tools/children.py);
# then becomes the server (exec keeps the pid, the group and the request).
_DIE_WITH_THE_AGENT = (
    "import ctypes, json, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit('the agent exited before the server started')\n"
    "if sys.argv[3] and os.getsid(0) == os.getpid():\n"
    "    stat = open('/proc/self/stat').read()\n"
    "    noted = dict(json.loads(sys.argv[2]), pgid=os.getpid(), start_time=stat[stat.rfind(')') + 2 :].split()[19])\n"
    "    try:\n"
    "        with open(sys.argv[3] + '.tmp', 'w') as out: out.write(json.dumps(noted))\n"
    "        os.replace(sys.argv[3] + '.tmp', sys.argv[3])\n"
    "    except OSError: pass  # a read-only home: the agent's own close still ends the group\n"
    "os.execv(sys.argv[4], sys.argv[4:])\n"
)


def launch_command(
    command: str, args: list[str], env: dict[str, str], cwd: Path, record: Path | None = None, server: str = ""
) -> list[str]:
    """The argv that starts a server so that it cannot outlive the agent, its process group noted in
    `record` (children.py's group record, made by the server's launcher, naming `server`); ToolError
    if there is no such command."""
    found = str(cwd / command) if os.sep in command else shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None or not os.path.isfile(found):
        raise ToolError(f"command not found: {command}")
    if not os.access(found, os.X_OK):
        raise ToolError(f"cannot run {command}: {found} is not executable")
    if not sys.platform.startswith("linux"):
        return [found, *args]
    owner = json.dumps({**owner_record(), "server": server})
    return [
        sys.executable,
        "-I",
        "-S",
        "-c",
        _DIE_WITH_THE_AGENT,
        str(os.getpid()),
        owner,
        str(record or ""),
        found,
        *args,
    ]


def tool_name(server: str, remote: str) -> str:
    """`<server>__<tool>` within the tool-name pattern; a long name keeps a hash of the whole."""
    raw = f"{server}__{remote}"
    name = re.sub(r"[^A-Za-z0-9_]", "_", raw)
    if not TOOL_NAME.fullmatch(name):  # too long (server names start with a letter)
        name = f"{name[:57]}_{hashlib.sha1(raw.encode()).hexdigest()[:6]}"
    return name


def readable_schema(node: Any, depth: int = 0) -> dict:
    """The part of a JSON schema our argument checks read; the rest ({} accepts anything) is dropped."""
    if not isinstance(node, dict) or depth > MAX_SCHEMA_DEPTH:
        return {}
    return {**_readable_own(node), **_readable_nested(node, depth + 1)}


def _readable_own(node: dict) -> dict[str, Any]:
    """The keywords about the value itself: type, description, enum, const."""
    out: dict[str, Any] = {}
    kind = node.get("type")
    if isinstance(kind, str) and kind in _JSON_TYPES:
        out["type"] = kind
    elif isinstance(kind, list) and kind and all(isinstance(k, str) and k in _JSON_TYPES for k in kind):
        out["type"] = list(kind)
    if isinstance(node.get("description"), str):
        out["description"] = one_line(node["description"], MAX_DESCRIPTION_CHARS)
    if isinstance(node.get("enum"), list) and node["enum"]:
        out["enum"] = node["enum"]
    if "const" in node:
        out["const"] = node["const"]
    return out


def _readable_nested(node: dict, depth: int) -> dict[str, Any]:
    """The keywords that hold schemas (anyOf/oneOf, items, properties, additionalProperties), each
    read at `depth`, and required."""
    out: dict[str, Any] = {}
    options = node.get("anyOf", node.get("oneOf"))
    if isinstance(options, list) and options:
        reduced = [readable_schema(option, depth) for option in options]
        if all(reduced):  # an option we cannot read may accept anything: then so do we
            out["anyOf"] = reduced
    if isinstance(node.get("items"), dict):
        out["items"] = readable_schema(node["items"], depth)
    if isinstance(node.get("properties"), dict):
        out["properties"] = {key: readable_schema(value, depth) for key, value in node["properties"].items()}
    if isinstance(node.get("required"), list):
        out["required"] = [key for key in node["required"] if isinstance(key, str)]
    extra = node.get("additionalProperties")
    if extra is False or isinstance(extra, dict):
        out["additionalProperties"] = False if extra is False else readable_schema(extra, depth)
    return out


def args_schema_of(input_schema: Any) -> dict:
    """A Tool's argument schema (an object with properties and required) from an MCP input schema."""
    reduced = readable_schema(input_schema)
    properties = reduced.get("properties", {})
    required = [key for key in reduced.get("required", []) if key in properties]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def result_text(result: dict) -> str:
    """What a tools/call result says, as text: its content items, else its structured content."""
    parts = []
    for item in result.get("content") or []:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind == "resource":
            resource = item.get("resource") if isinstance(item.get("resource"), dict) else {}
            parts.append(str(resource.get("text") or f"[resource {resource.get('uri', '?')} not shown]"))
        elif kind == "resource_link":
            parts.append(f"[resource link {item.get('uri', '?')}]")
        else:  # image, audio: nothing a text model can read
            parts.append(f"[{kind} {item.get('mimeType', '') if isinstance(item, dict) else ''} content not shown]")
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = f"{text[:MAX_RESULT_CHARS]}\n[result cut at {MAX_RESULT_CHARS} characters]"
    return text


def one_line(text: str, limit: int) -> str:
    """Text on one line, clipped to `limit` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# What a server gets of the agent's environment, unless its `env` in config.yaml names more: what
# finding programs, files, the language and the time takes, never a credential.
SERVER_ENV_ALLOWLIST = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR")


def server_base_env(child_env: dict[str, str]) -> dict[str, str]:
    """The allowlisted part of `child_env` (the agent's environment without its secrets): the names
    in SERVER_ENV_ALLOWLIST and the locale's LC_*."""
    return {k: v for k, v in child_env.items() if k in SERVER_ENV_ALLOWLIST or k.startswith("LC_")}


def server_env(spec: dict, settings: Settings) -> tuple[dict[str, str], list[str]]:
    """(a server's configured env, the values in it that are secrets); "${VAR}" takes the agent's VAR.

    A value is a secret (redacted from the server's results) when its name, or the name of the
    variable it was taken from, is a secret's: the credential names child_env hides.
    """
    env, secrets = {}, []
    for key, value in spec.get("env", {}).items():
        names = [key]
        reference = _ENV_REFERENCE.fullmatch(value)
        if reference:
            names.append(reference.group(1))
            if reference.group(1) not in os.environ:
                raise ToolError(f"env {key}: the variable {reference.group(1)} is not set")
            value = os.environ[reference.group(1)]
        if any(SECRET_NAME.search(name) or name in settings.secret_names for name in names):
            secrets.append(value)
        env[key] = value
    return env, secrets
