"""Tools: one typed definition each, validated arguments, and every refusal path.

No network beyond 127.0.0.1: http_get succeeds only against a loopback server started here
(with http_allow_networks letting loopback in), and refusals are checked before any connect.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest
import yaml

from agent import builtin_tools, plugins, prompt, schema
from agent.builtin_tools import address_problem, fetch
from agent.config import Settings, load_settings
from agent.dispatcher import Kind, dispatch
from agent.outcomes import UsageError
from agent.tools import Registry, Tool, ToolContext, ToolError, build_registry
from tests.helpers import REPO, read_yaml, run_agent_process, run_cli, write_script

PLUGIN_SRC = REPO / "tests" / "plugin_example"


def ctx_for(home: Path, **settings) -> ToolContext:
    return ToolContext(home, Settings(**settings))


def call(ctx: ToolContext, tool: str, registry: Registry | None = None, **args):
    """Dispatch one call to `tool` and return (outcome kind, note)."""
    registry = registry or build_registry(ctx.settings, entry_points=[])
    _, outcome = dispatch(schema.fresh_state(), json.dumps({"tool": tool, "args": args}), registry, ctx)
    return outcome.kind, outcome.note


# ------------------------------------------------------------------------- one definition per tool


def recorder():
    calls = []

    def stamp(ctx: ToolContext, label: str, count: int, loud: bool = False) -> str:
        """Stamp a label a number of times.

        Args:
            label: the text to stamp
            count: how many stamps
        """
        calls.append((label, count, loud))
        return "ok"

    return stamp, calls


def test_prompt_line_schema_and_validation_all_come_from_the_function():
    stamp, _ = recorder()
    tool = Tool.from_function(stamp)
    assert tool.args_schema == {
        "type": "object",
        "properties": {"label": {"type": "string", "description": "the text to stamp"},
                       "count": {"type": "integer", "description": "how many stamps"},
                       "loud": {"type": "boolean"}},
        "required": ["label", "count"], "additionalProperties": False,
    }
    assert tool.prompt_line() == "- stamp(label: string, count: integer, loud?: boolean): Stamp a label a number of times."
    assert tool.action_schema()["properties"]["args"] is tool.args_schema
    assert tool.check_args({"label": "a", "count": 1}) is None


@pytest.mark.parametrize("args, problem", [
    ({"label": "a"}, "missing required argument 'count'"),
    ({"label": "a", "count": 1, "colour": "red"}, "unexpected argument 'colour'"),
    ({"label": "a", "count": "3"}, "'count' must be an integer, got str '3'"),
    ({"label": "a", "count": True}, "'count' must be an integer, got bool True"),
    ({"label": 5, "count": 1}, "'label' must be a string, got int 5"),
    (["a", 1], "args must be a JSON object"),
])
def test_bad_arguments_are_a_tool_error_naming_the_problem_and_the_tool_does_not_run(tmp_path, args, problem):
    stamp, calls = recorder()
    registry = Registry([Tool.from_function(stamp)])
    reply = json.dumps({"tool": "stamp", "args": args})
    after, outcome = dispatch(schema.fresh_state(), reply, registry, ctx_for(tmp_path))
    assert outcome.kind is Kind.TOOL_ERROR
    assert outcome.note.startswith("[TOOL ERROR] stamp: ") and problem in outcome.note
    assert after["notes"] == outcome.note
    assert calls == []


def test_plain_functions_without_a_context_are_tools_too(tmp_path):
    def twice(text: str) -> str:
        """Say it twice."""
        return text * 2

    tool = Tool.from_function(twice)
    assert list(tool.args_schema["properties"]) == ["text"]
    assert call(ctx_for(tmp_path), "twice", Registry([tool]), text="ab") == (Kind.TOOL, '[TOOL] twice({"text": "ab"}) -> abab')


@pytest.mark.parametrize("source, message", [
    ("def f(ctx, x: str):\n    return x\n", "needs a docstring"),
    ("def f(ctx, x):\n    '''Doc.'''\n", "parameter 'x' needs a type annotation"),
    ("def f(ctx, x: dict):\n    '''Doc.'''\n", "parameter 'x': unsupported parameter type"),
    ("def f(ctx, *xs: str):\n    '''Doc.'''\n", "*args/**kwargs"),
])
def test_functions_that_cannot_be_described_are_rejected(source, message):
    namespace: dict = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match=message.replace("*", r"\*")):
        Tool.from_function(namespace["f"])


# ------------------------------------------------------------------------------------------- shell


def test_shell_runs_argv_from_the_home_without_a_shell(tmp_path):
    ctx = ctx_for(tmp_path)
    assert call(ctx, "shell", command="echo $HOME; rm -rf x")[1].endswith("-> $HOME; rm -rf x")
    assert call(ctx, "shell", command="pwd")[1].endswith(f"-> {tmp_path.resolve()}")


@pytest.mark.parametrize("command, why", [
    ("rm -rf scratchpad", "command 'rm' is not allowed"),
    ("/bin/ls", "command '/bin/ls' is not allowed"),
    ("sh -c ls", "command 'sh' is not allowed"),
    ("cat /etc/passwd", "argument '/etc/passwd' names a path outside the home"),
    ("cat ../secret", "argument '../secret' names a path outside the home"),
    ("head --lines=1 ~/.bashrc", "argument '~/.bashrc' names a path outside the home"),
    ("date -f/etc/passwd", "argument '-f/etc/passwd' names a path outside the home"),
    ("tail --file=/etc/passwd", "argument '--file=/etc/passwd' names a path outside the home"),
    ("wc -xf/etc/passwd", "argument '-xf/etc/passwd' names a path outside the home"),
    ("cat -f../x", "argument '-f../x' names a path outside the home"),
    ("", "the command is empty"),
    ("echo 'unclosed", "cannot split the command"),
])
def test_shell_allowlist_refuses_commands_and_paths_outside_it(tmp_path, command, why):
    kind, note = call(ctx_for(tmp_path), "shell", command=command)
    assert kind is Kind.TOOL_ERROR and why in note


def test_shell_allowlist_refuses_a_symlink_that_leads_out_of_the_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "secret.txt").write_text("s3cr3t")
    (home / "link.txt").symlink_to(tmp_path / "secret.txt")
    kind, note = call(ctx_for(home), "shell", command="cat link.txt")
    assert kind is Kind.TOOL_ERROR and "'link.txt' names a path outside the home" in note and "s3cr3t" not in note


def test_shell_allowlist_is_configurable(tmp_path):
    ctx = ctx_for(tmp_path, shell_allowlist=["true"])
    assert call(ctx, "shell", command="true")[0] is Kind.TOOL
    assert "command 'date' is not allowed (allowed: true)" in call(ctx, "shell", command="date")[1]


def test_shell_policy_off_removes_the_tool_and_refuses_a_direct_call(tmp_path):
    settings = Settings(shell_policy="off")
    registry = build_registry(settings, entry_points=[])
    assert "shell" not in registry and "shell" in registry.disabled
    with pytest.raises(ToolError, match="turned off"):
        builtin_tools.shell(ToolContext(tmp_path, settings), "date")


def test_shell_policy_any_runs_any_program(tmp_path):
    kind, note = call(ctx_for(tmp_path, shell_policy="any"), "shell", command="sh -c 'echo one; exit 3'")
    assert kind is Kind.TOOL and note.endswith("-> one; [exit status 3]")


def _alive(pid: int) -> bool:
    """Whether a process is still running, allowing the kernel a moment to deliver SIGKILL."""
    import time

    deadline = time.monotonic() + 2
    while True:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                running = handle.read().rsplit(")", 1)[1].split()[0] not in "ZX"  # a zombie is dead, just unreaped
        except FileNotFoundError:
            running = False
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.01)


def test_shell_timeout_kills_the_whole_process_group(tmp_path):
    ctx = ctx_for(tmp_path, shell_policy="any", shell_timeout=0.5)
    with pytest.raises(ToolError, match=r"timed out after 0.5s and was killed") as caught:
        builtin_tools.shell(ctx, "sh -c 'sleep 100 & echo grandchild $!; sleep 100'")
    grandchild = int(str(caught.value).split("grandchild ")[1].split()[0])
    assert not _alive(grandchild)


def test_shell_kills_background_processes_a_finished_command_left_behind(tmp_path):
    ctx = ctx_for(tmp_path, shell_policy="any", shell_timeout=5)
    out = builtin_tools.shell(ctx, "sh -c 'sleep 100 >/dev/null 2>&1 & echo left $!'")
    assert "[background processes it left running were killed]" in out
    assert not _alive(int(out.split("left ")[1].split()[0]))


def test_shell_output_is_capped_in_bytes_with_a_marker(tmp_path):
    ctx = ctx_for(tmp_path, shell_policy="any", shell_max_output=100)
    out = builtin_tools.shell(ctx, "head -c 5000 /dev/zero")
    assert out.endswith("[output cut at 100 bytes; 4900 more bytes dropped]")
    assert len(out.split("\n[output cut")[0].encode()) == 100


def test_shell_environment_is_scrubbed_of_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-123456789")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdefgh")
    monkeypatch.setenv("CUSTOM_THING", "hidden-by-config")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    out = builtin_tools.shell(ctx_for(tmp_path, shell_policy="any", secret_env=["CUSTOM_THING"]), "env")
    assert "PLAIN_SETTING=visible" in out
    for name in ("OPENAI_API_KEY", "MY_SERVICE_TOKEN", "CUSTOM_THING"):
        assert name not in out


# -------------------------------------------------------------------------------------- file tools


@pytest.fixture
def fhome(tmp_path):
    """A home with a file inside, and a secret outside it."""
    home = tmp_path / "home"
    (home / "scratchpad").mkdir(parents=True)
    (home / "scratchpad" / "active.yaml").write_text("notes: ''\n")
    (home / "inside.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("s3cr3t")
    (tmp_path / "outdir").mkdir()
    return home


@pytest.mark.parametrize("tool, args", [
    ("read_file", {"path": "../secret.txt"}),
    ("read_file", {"path": "sub/../../secret.txt"}),
    ("write_file", {"path": "../evil.txt", "content": "x"}),
    ("append_file", {"path": "../secret.txt", "content": "x"}),
    ("list_dir", {"path": ".."}),
])
def test_file_tools_refuse_dot_dot(fhome, tool, args):
    before = (fhome.parent / "secret.txt").read_text()
    kind, note = call(ctx_for(fhome), tool, **args)
    assert kind is Kind.TOOL_ERROR and "contains '..'" in note
    assert (fhome.parent / "secret.txt").read_text() == before and not (fhome.parent / "evil.txt").exists()


@pytest.mark.parametrize("tool, extra", [("read_file", {}), ("write_file", {"content": "x"}),
                                         ("append_file", {"content": "x"}), ("list_dir", {})])
def test_file_tools_refuse_absolute_paths_outside(fhome, tool, extra):
    target = str(fhome.parent / ("outdir" if tool == "list_dir" else "secret.txt"))
    kind, note = call(ctx_for(fhome), tool, path=target, **extra)
    assert kind is Kind.TOOL_ERROR and "outside the workspace" in note
    assert (fhome.parent / "secret.txt").read_text() == "s3cr3t"


def test_absolute_paths_inside_the_workspace_are_fine(fhome):
    assert call(ctx_for(fhome), "read_file", path=str(fhome / "inside.txt"))[1].endswith("-> inside")


@pytest.mark.parametrize("tool, path, extra", [
    ("read_file", "link.txt", {}), ("write_file", "link.txt", {"content": "x"}),
    ("append_file", "link.txt", {"content": "x"}), ("list_dir", "linkdir", {}),
    ("write_file", "linkdir/new.txt", {"content": "x"}),
])
def test_file_tools_refuse_symlinks_that_resolve_outside(fhome, tool, path, extra):
    (fhome / "link.txt").symlink_to(fhome.parent / "secret.txt")
    (fhome / "linkdir").symlink_to(fhome.parent / "outdir")
    kind, note = call(ctx_for(fhome), tool, path=path, **extra)
    assert kind is Kind.TOOL_ERROR and "resolves through a symlink to" in note and "s3cr3t" not in note
    assert (fhome.parent / "secret.txt").read_text() == "s3cr3t" and list((fhome.parent / "outdir").iterdir()) == []


def test_symlinks_inside_the_workspace_are_followed(fhome):
    (fhome / "alias.txt").symlink_to(fhome / "inside.txt")
    assert call(ctx_for(fhome), "read_file", path="alias.txt")[1].endswith("-> inside")


@pytest.mark.parametrize("path", ["scratchpad/active.yaml", "scratchpad/new.yaml", "logs/cycle_1.log",
                                  "config.yaml", ".agent.lock", "rules.md", "./scratchpad/x"])
def test_runtime_files_are_not_writable(fhome, path):
    before = (fhome / "scratchpad" / "active.yaml").read_text()
    for tool in ("write_file", "append_file"):
        kind, note = call(ctx_for(fhome), tool, path=path, content="forged")
        assert kind is Kind.TOOL_ERROR and "belongs to the runtime" in note
    assert (fhome / "scratchpad" / "active.yaml").read_text() == before
    assert not (fhome / path).exists() or path == "scratchpad/active.yaml"


def test_runtime_files_cannot_be_written_through_a_symlink_either(fhome):
    (fhome / "innocent.yaml").symlink_to(fhome / "scratchpad" / "active.yaml")
    kind, note = call(ctx_for(fhome), "write_file", path="innocent.yaml", content="forged")
    assert kind is Kind.TOOL_ERROR and "belongs to the runtime" in note
    assert (fhome / "scratchpad" / "active.yaml").read_text() == "notes: ''\n"


def test_runtime_files_can_still_be_read(fhome):
    assert call(ctx_for(fhome), "read_file", path="scratchpad/active.yaml")[0] is Kind.TOOL


def test_a_configured_workspace_confines_file_tools_to_that_folder(fhome):
    ctx = ctx_for(fhome, workspace="work")
    assert call(ctx, "write_file", path="a/b.txt", content="hi")[0] is Kind.TOOL
    assert (fhome / "work" / "a" / "b.txt").read_text() == "hi"
    kind, note = call(ctx, "read_file", path=str(fhome / "inside.txt"))
    assert kind is Kind.TOOL_ERROR and "outside the workspace" in note


@pytest.mark.parametrize("workspace", ["../elsewhere", "/tmp", "."])
def test_a_workspace_outside_the_home_is_a_config_error(tmp_path, workspace):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"workspace": workspace}))
    with pytest.raises(UsageError, match="setting 'workspace' must be a relative folder"):
        load_settings(tmp_path, env={})


def test_a_workspace_symlinked_out_of_the_home_is_refused(fhome):
    (fhome / "work").symlink_to(fhome.parent / "outdir")
    kind, note = call(ctx_for(fhome, workspace="work"), "write_file", path="x.txt", content="x")
    assert kind is Kind.TOOL_ERROR and "outside the home" in note
    assert list((fhome.parent / "outdir").iterdir()) == []


def test_read_file_is_capped_with_a_marker(fhome):
    (fhome / "big.txt").write_text("a" * 1000)
    out = builtin_tools.read_file(ctx_for(fhome, file_max_read=10), "big.txt")
    assert out == "a" * 10 + "\n[file is 1000 bytes; only the first 10 were read]"


def test_oversized_writes_and_appends_are_refused_and_change_nothing(fhome):
    ctx = ctx_for(fhome, file_max_write=10)
    kind, note = call(ctx, "write_file", path="inside.txt", content="x" * 11)
    assert kind is Kind.TOOL_ERROR and "11 bytes, over the 10-byte limit" in note
    kind, note = call(ctx, "append_file", path="inside.txt", content="12345")
    assert kind is Kind.TOOL_ERROR and "would be 11 bytes, over the 10-byte limit" in note
    assert (fhome / "inside.txt").read_text() == "inside"


def test_append_file_creates_then_appends(fhome):
    ctx = ctx_for(fhome)
    assert call(ctx, "append_file", path="log/j.txt", content="one\n")[0] is Kind.TOOL
    kind, note = call(ctx, "append_file", path="log/j.txt", content="two\n")
    assert kind is Kind.TOOL and "now 8 bytes" in note
    assert (fhome / "log" / "j.txt").read_text() == "one\ntwo\n"


def test_list_dir_shows_folders_symlinks_and_sizes_and_caps_entries(fhome):
    (fhome / "alias").symlink_to(fhome / "inside.txt")
    out = builtin_tools.list_dir(ctx_for(fhome))
    assert out.splitlines() == ["alias@", "inside.txt (6 bytes)", "scratchpad/"]
    many = fhome / "many"
    many.mkdir()
    for i in range(builtin_tools.MAX_LIST_ENTRIES + 5):
        (many / f"f{i:04d}").touch()
    assert builtin_tools.list_dir(ctx_for(fhome), "many").endswith("\n[5 more entries not shown]")


@pytest.mark.parametrize("tool, args, why", [
    ("read_file", {"path": "nope.txt"}, "no such file"), ("read_file", {"path": ""}, "empty"),
    ("list_dir", {"path": "inside.txt"}, "no such folder"), ("write_file", {"path": "scratchpad", "content": ""}, "runtime"),
])
def test_file_tool_bad_paths_are_explained(fhome, tool, args, why):
    kind, note = call(ctx_for(fhome), tool, **args)
    assert kind is Kind.TOOL_ERROR and why in note


# ---------------------------------------------------------------------------------------- http_get


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict = {}

    def do_GET(self):  # noqa: N802
        self.server.seen.append((self.path, self.headers.get("Host")))
        status, headers, body = self.server.routes.get(self.path, (404, {}, b"not here"))
        if callable(body):
            return body(self)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _big(handler):
    handler.send_response(200)
    handler.send_header("Content-Type", "text/plain")
    handler.end_headers()
    try:
        for _ in range(1000):  # 16 MB if anyone read it all
            handler.wfile.write(b"b" * 16384)
    except (BrokenPipeError, ConnectionResetError):
        handler.server.big_stopped = True


def _slow(handler):
    handler.server.release.wait(10)  # held until the test is over: the client must time out first


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.seen, srv.release, srv.big_stopped = [], threading.Event(), False
    base = f"http://127.0.0.1:{srv.server_port}"
    srv.routes = {
        "/hello": (200, {"Content-Type": "text/plain; charset=utf-8"}, "héllo".encode()),
        "/to-hello": (302, {"Location": "/hello"}, b""),
        "/to-metadata": (302, {"Location": "http://169.254.169.254/latest/meta-data/"}, b""),
        "/to-private": (307, {"Location": "http://10.0.0.1/admin"}, b""),
        "/to-localhost-name": (302, {"Location": f"http://localhost:{srv.server_port}/hello"}, b""),
        "/loop": (302, {"Location": "/loop"}, b""),
        "/to-file": (302, {"Location": "file:///etc/passwd"}, b""),
        "/big": (200, {}, _big),
        "/slow": (200, {}, _slow),
    }
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    srv.base = base
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


LOOPBACK = {"http_allow_networks": ["127.0.0.0/8"]}


@pytest.fixture
def connects(monkeypatch):
    """Every address a connection is opened to (the real connect still happens)."""
    seen = []
    real = socket.create_connection

    def recording(address, *args, **kwargs):
        seen.append(address[0])
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording)
    return seen


def test_http_get_fetches_from_an_allowed_loopback_server(server, tmp_path):
    kind, note = call(ctx_for(tmp_path, **LOOPBACK), "http_get", url=f"{server.base}/hello")
    assert kind is Kind.TOOL and "HTTP 200 OK (text/plain; charset=utf-8)" in note and note.endswith("héllo")


def test_http_get_refuses_loopback_by_default_without_sending_anything(server, tmp_path, connects):
    kind, note = call(ctx_for(tmp_path), "http_get", url=f"{server.base}/hello")
    assert kind is Kind.TOOL_ERROR and "127.0.0.1 is a loopback address" in note
    assert server.seen == [] and connects == []


def test_http_get_checks_names_after_dns_resolution(server, tmp_path, connects):
    kind, note = call(ctx_for(tmp_path), "http_get", url=f"http://localhost:{server.server_port}/hello")
    assert kind is Kind.TOOL_ERROR and "localhost resolves to" in note and "loopback" in note
    assert server.seen == [] and connects == []


def test_http_get_connects_to_the_address_it_checked(server, tmp_path, connects):
    """A name is resolved once per hop and the connection goes to that address (no rebinding)."""
    answers = iter([["127.0.0.1"], ["10.9.9.9"]])  # a rebinding resolver: the second answer is private
    out = fetch(f"http://rebind.test:{server.server_port}/hello", Settings(**LOOPBACK),
                lambda host, port: next(answers))
    assert out.startswith("HTTP 200") and connects == ["127.0.0.1"]
    assert server.seen == [("/hello", f"rebind.test:{server.server_port}")]  # the Host header keeps the name


@pytest.mark.parametrize("answer", [["10.0.0.7"], ["93.184.215.14", "192.168.1.1"], ["::ffff:169.254.169.254"]])
def test_http_get_refuses_a_name_if_any_of_its_addresses_is_not_public(answer, connects):
    with pytest.raises(ToolError, match="resolves to .* http_get only reaches public addresses"):
        fetch("https://public.example/", Settings(), lambda host, port: answer)
    assert connects == []


@pytest.mark.parametrize("path, why", [
    ("/to-metadata", "169.254.169.254 is a cloud metadata address"),
    ("/to-private", "10.0.0.1 is a private address"),
    ("/to-file", "only http and https URLs are allowed, not 'file:'"),
])
def test_http_get_checks_every_redirect_before_connecting(server, tmp_path, connects, path, why):
    kind, note = call(ctx_for(tmp_path, **LOOPBACK), "http_get", url=f"{server.base}{path}")
    assert kind is Kind.TOOL_ERROR and why in note
    assert server.seen == [(path, f"127.0.0.1:{server.server_port}")]
    assert set(connects) == {"127.0.0.1"}


def test_http_get_follows_allowed_redirects(server, tmp_path):
    out = fetch(f"{server.base}/to-hello", Settings(**LOOPBACK))
    assert out.startswith("HTTP 200") and "/hello" in out.splitlines()[0]
    assert [p for p, _ in server.seen] == ["/to-hello", "/hello"]


def test_http_get_resolves_and_checks_the_name_a_redirect_points_to(server, connects):
    answers = {"localhost": ["10.0.0.5"]}  # as if the name pointed into the private network
    with pytest.raises(ToolError, match="localhost resolves to 10.0.0.5: 10.0.0.5 is a private address"):
        fetch(f"{server.base}/to-localhost-name", Settings(**LOOPBACK), lambda host, port: answers[host])
    assert [p for p, _ in server.seen] == ["/to-localhost-name"] and set(connects) == {"127.0.0.1"}


def test_http_get_stops_after_too_many_redirects(server):
    with pytest.raises(ToolError, match="more than 3 redirects"):
        fetch(f"{server.base}/loop", Settings(http_max_redirects=3, **LOOPBACK))
    assert len(server.seen) == 4


@pytest.mark.parametrize("url, why", [
    ("file:///etc/passwd", "only http and https"), ("ftp://example.com/", "only http and https"),
    ("gopher://127.0.0.1/", "only http and https"), ("http://", "no host"),
    ("http://[::1]:1/", "::1 is a loopback address"), ("http://0.0.0.0:1/", "0.0.0.0 is a unspecified address"),
    ("http://169.254.169.254/latest/", "cloud metadata"), ("http://[fd00:ec2::254]/", "cloud metadata"),
    ("http://2130706433:1/", "loopback"),  # 127.0.0.1 written as a number, caught after resolution
])
def test_http_get_refuses_schemes_and_addresses(url, why, connects):
    with pytest.raises(ToolError, match=why):
        fetch(url, Settings())
    assert connects == []


@pytest.mark.parametrize("address, refused", [
    ("127.0.0.1", "loopback"), ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.0.1", "private"),
    ("100.64.0.1", "not a public"), ("169.254.1.1", "link-local"), ("224.0.0.1", "multicast"),
    ("240.0.0.1", "reserved"), ("fe80::1", "link-local"), ("fc00::1", "private"), ("ff02::1", "multicast"),
    ("::ffff:10.0.0.1", "private"), ("64:ff9b::a00:1", "address"), ("2002:a00:1::", "private"),
    ("169.254.169.254", "cloud metadata"), ("100.100.100.200", "cloud metadata"), ("fd00:ec2::254", "cloud metadata"),
    ("168.63.129.16", "cloud metadata"),
    ("93.184.215.14", None), ("2606:4700::1111", None),
])
def test_address_classification(address, refused):
    problem = address_problem(address, [])
    assert (problem is None) if refused is None else (refused in problem)


def test_allowed_networks_never_open_metadata_addresses():
    assert address_problem("127.0.0.1", ["127.0.0.0/8"]) is None
    assert "cloud metadata" in address_problem("169.254.169.254", ["169.254.0.0/16"])
    assert "cloud metadata" in address_problem("169.254.169.254", ["0.0.0.0/0"])


def test_http_get_body_is_capped_and_reading_stops_there(server):
    out = fetch(f"{server.base}/big", Settings(http_max_bytes=1000, **LOOPBACK))
    assert out.endswith("\n[body cut at 1000 bytes; the rest was not read]")
    assert out.split("\n")[1] == "b" * 1000


def test_http_get_times_out(server):
    with pytest.raises(ToolError, match="timed out after 0.3s"):
        fetch(f"{server.base}/slow", Settings(http_timeout=0.3, **LOOPBACK))


def test_https_requests_carry_the_name_for_sni_and_certificate_checks(monkeypatch):
    sent = []

    def fake_send(self, request, **kwargs):
        sent.append(request)
        raise builtin_tools._httpx().ConnectError("stop here")

    monkeypatch.setattr(builtin_tools._httpx().Client, "send", fake_send)
    with pytest.raises(ToolError, match="failed"):
        fetch("https://example.test/x", Settings(), lambda host, port: ["93.184.215.14"])
    (request,) = sent
    assert request.url.host == "93.184.215.14" and request.headers["Host"] == "example.test"
    assert request.extensions["sni_hostname"] == "example.test"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a test certificate")
def test_https_connects_to_the_checked_address_and_verifies_the_name(tmp_path, monkeypatch):
    import ssl

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=example.test", "-addext", "subjectAltName=DNS:example.test"],
                   check=True, capture_output=True, timeout=30)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.seen, srv.routes = [], {"/hello": (200, {"Content-Type": "text/plain"}, b"over tls")}
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)
    srv.socket = server_side.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    monkeypatch.setattr(builtin_tools, "TLS_VERIFY", ssl.create_default_context(cafile=str(cert)))
    try:
        pinned = lambda host, port: ["127.0.0.1"]  # noqa: E731  both names "resolve" to the test server
        out = fetch(f"https://example.test:{srv.server_port}/hello", Settings(**LOOPBACK), pinned)
        assert out.startswith("HTTP 200") and out.endswith("over tls")
        with pytest.raises(ToolError, match="certificate verify failed"):
            fetch(f"https://other.test:{srv.server_port}/hello", Settings(**LOOPBACK), pinned)
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("value, why", [(["not-a-net"], "is not a network"), ("127.0.0.1", "must be a list")])
def test_bad_http_allow_networks_is_a_config_error(tmp_path, value, why):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"http_allow_networks": value}))
    with pytest.raises(UsageError, match=why):
        load_settings(tmp_path, env={})


# ------------------------------------------------------------------------------ config is honoured


def test_a_disabled_tool_is_not_offered_and_not_run(home, tmp_path):
    (home / "config.yaml").write_text(yaml.safe_dump({"tools_disabled": ["echo", "http_get"]}))
    script = write_script(tmp_path, [{"tool": "echo", "args": {"message": "hi"}},
                                     {"tool": "done", "args": {"summary": "s"}}])
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 0
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert "[UNKNOWN TOOL] echo" in notes and "[TOOL] echo" not in notes
    registry = build_registry(load_settings(home, env={}))
    system = prompt.system_prompt(prompt.read_rules(home / "rules.md"), registry)
    assert "echo(" not in system and "http_get(" not in system and "read_file(" in system
    offered = [option["properties"]["tool"]["const"] for option in registry.action_schema()["anyOf"]]
    assert "echo" not in offered and "http_get" not in offered and offered[-2:] == ["update_scratchpad", "done"]


def test_tools_enabled_keeps_only_the_named_tools_and_the_control_tools():
    registry = build_registry(Settings(tools_enabled=["read_file"]), entry_points=[])
    assert registry.names() == ["read_file", "update_scratchpad", "done"]
    assert "shell" in registry.disabled


def test_the_control_tools_cannot_be_disabled(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"tools_disabled": ["done"]}))
    with pytest.raises(UsageError, match="'done' cannot be disabled"):
        load_settings(tmp_path, env={})


# ---------------------------------------------------------------------------------------- plugins


def make_dist(site: Path, name: str, entry_points: dict[str, str], modules: dict[str, str] | None = None) -> None:
    """Install a distribution by hand: a .dist-info with METADATA and entry_points.txt, plus modules."""
    info = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    lines = [f"{key} = {value}" for key, value in entry_points.items()]
    (info / "entry_points.txt").write_text("[agent.tools]\n" + "\n".join(lines) + "\n")
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(source)


def install_example_plugin(site: Path) -> None:
    """tests/plugin_example, installed the way pip would lay it out (entry points from its pyproject)."""
    meta = tomllib.loads((PLUGIN_SRC / "pyproject.toml").read_text())
    make_dist(site, meta["project"]["name"], meta["project"]["entry-points"]["agent.tools"])
    shutil.copytree(PLUGIN_SRC / "agent_plugin_example", site / "agent_plugin_example")


BROKEN = {
    "broken-import": ({"oops": "broken_plugin_mod:tool"}, {"broken_plugin_mod": "raise ImportError('no numpy here')\n"}),
    "broken-object": ({"thing": "broken_plugin_obj:VALUE"}, {"broken_plugin_obj": "VALUE = 42\n"}),
    "broken-nodoc": ({"nodoc": "broken_plugin_nodoc:f"}, {"broken_plugin_nodoc": "def f(x: str):\n    return x\n"}),
    "broken-clash": ({"clash": "broken_plugin_clash:shell"},
                     {"broken_plugin_clash": "def shell(command: str) -> str:\n    '''Pretend.'''\n    return 'x'\n"}),
    "broken-missing": ({"gone": "no_such_module_anywhere:tool"}, {}),
}


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    for module in ["agent_plugin_example", *(m for _, mods in BROKEN.values() for m in mods)]:
        monkeypatch.delitem(sys.modules, module, raising=False)
    return site


def test_the_example_plugin_adds_its_tools_with_their_source(site, tmp_path):
    install_example_plugin(site)
    warnings = []
    registry = build_registry(Settings(), warn=warnings.append)
    assert warnings == []
    assert registry.names()[-5:] == ["shout", "count_words", "repeat", "update_scratchpad", "done"]
    assert {registry[n].source for n in ("shout", "count_words", "repeat")} == {"plugin:agent-plugin-example"}
    assert registry["repeat"].signature() == "repeat(text: string, times?: integer)"
    (tmp_path / "words.txt").write_text("one two three")
    ctx = ctx_for(tmp_path)
    assert call(ctx, "shout", registry, text="hey")[1].endswith("-> HEY")
    assert call(ctx, "count_words", registry, path="words.txt")[1].endswith("-> 3 words in words.txt")
    assert "contains '..'" in call(ctx, "count_words", registry, path="../x")[1]
    assert "raised ValueError: times must be between 1 and 10" in call(ctx, "repeat", registry, text="a", times=99)[1]


def test_broken_plugins_are_reported_and_skipped(site):
    install_example_plugin(site)
    for name, (eps, modules) in BROKEN.items():
        make_dist(site, name, eps, modules)
    warnings = []
    registry = build_registry(Settings(), warn=warnings.append)
    assert "shout" in registry and registry["shell"].source == "built-in"
    report = "\n".join(warnings)
    assert len(warnings) == 5
    assert "plugin broken-import (entry point 'oops = broken_plugin_mod:tool') skipped: ImportError: no numpy here" in report
    assert "plugin broken-object" in report and "must name a function, a Tool or a list of them, got int" in report
    assert "plugin broken-nodoc" in report and "needs a docstring" in report
    assert "plugin broken-clash" in report and "tool 'shell' skipped: a tool with that name already exists" in report
    assert "plugin broken-missing" in report and "ModuleNotFoundError" in report
    assert registry.problems == warnings


def test_plugin_problems_are_printed_once_per_process(monkeypatch, capsys):
    monkeypatch.setattr(plugins, "_reported", set())
    plugins.warn_once("plugin x skipped: boom")
    plugins.warn_once("plugin x skipped: boom")
    assert capsys.readouterr().err == "agent: warning: plugin x skipped: boom\n"


def test_plugins_disabled_skips_a_plugin_or_all(site):
    install_example_plugin(site)
    make_dist(site, "broken-import", *BROKEN["broken-import"])
    warnings = []
    registry = build_registry(Settings(plugins_disabled=["broken-import"]), warn=warnings.append)
    assert "shout" in registry and warnings == []
    registry = build_registry(Settings(plugins_disabled=["*"]), warn=warnings.append)
    assert "shout" not in registry and "broken_plugin_mod" not in sys.modules and warnings == []


def test_plugin_tools_can_be_disabled_like_any_tool(site):
    install_example_plugin(site)
    registry = build_registry(Settings(tools_disabled=["shout"]))
    assert "shout" not in registry and "repeat" in registry


def test_agent_tools_lists_arguments_and_sources(site, home):
    install_example_plugin(site)
    (home / "config.yaml").write_text("tools_disabled: [http_get]\n")
    result = run_cli("tools", "--home", str(home))
    assert result.exit_code == 0
    assert "shout  [plugin:agent-plugin-example]" in result.stdout
    assert "    - times (integer, optional): how many times (1 to 10)" in result.stdout
    assert "read_file  [built-in]" in result.stdout and "done  [control]" in result.stdout
    assert "turned off by config: http_get" in result.stdout
    listed = json.loads(run_cli("tools", "--home", str(home), "--json").stdout)
    by_name = {t["name"]: t for t in listed}
    assert by_name["shout"]["source"] == "plugin:agent-plugin-example" and "http_get" not in by_name
    assert by_name["write_file"]["arguments"][0] == {"name": "path", "type": "string", "required": True,
                                                     "description": 'a path relative to the workspace, e.g. "hello.txt"'}


def test_the_example_plugin_works_end_to_end_in_a_real_cycle_despite_a_broken_plugin(tmp_path):
    site = tmp_path / "site"
    install_example_plugin(site)
    make_dist(site, "broken-import", *BROKEN["broken-import"])
    home = tmp_path / "home"
    home.mkdir()
    script = write_script(tmp_path, [{"tool": "shout", "args": {"text": "plugins work"}},
                                     {"tool": "repeat", "args": {"text": "ok", "times": 3}},
                                     {"tool": "done", "args": {"summary": "used the plugin"}}])
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("agent: warning: plugin broken-import") == 1
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert '[TOOL] shout({"text": "plugins work"}) -> PLUGINS WORK' in notes
    assert "-> ok ok ok" in notes and "[COMPLETED] used the plugin" in notes
