"""The container image: the repository's Containerfile, built and run with no image registry.

The base is Debian made here by `mmdebstrap` and brought in with `podman import` (cached in
podman's store under a tag keyed by its package list, so a second run skips it); the package and
its dependencies are wheels that `pip wheel` builds on the host; the build has no network.
podman runs with the `runc` runtime (crun refuses hybrid cgroups) and explicit ulimits.

Each test runs real cycles in the image, as its unprivileged user, with the home on a named
volume, then reads the home on the host: `active.yaml` as a file, the records through `agent
history --json` (never the index file itself: its format is the store's business).

The last test holds issue #32's contract for acceptance checks where no sandbox can run (refused
unless `checks_unsandboxed: true`); it passes once #32 is merged, and fails before.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, run_cli, wait_for

pytestmark = pytest.mark.slow

PODMAN = ["podman", "--runtime", "runc"]
# podman's default open-file limit (1048576) is above this machine's hard limit (20000), which runc
# then fails to set: explicit limits, under it (nproc counts the image user's processes).
LIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
# docs/operations.md's podman settings under which bubblewrap starts in the container.
SANDBOX_SETTINGS = ["--security-opt", "seccomp=unconfined", "--security-opt", "unmask=/proc/*"]
# The Kubernetes CronJob's securityContext (docs/operations.md), as podman's flags: every capability
# dropped, no new privileges, a read-only root with a /tmp of its own (the runtime's seccomp profile
# and masked /proc are podman's defaults); the sandbox variant adds SANDBOX_SETTINGS.
POD_SETTINGS = ["--cap-drop=ALL", "--security-opt", "no-new-privileges", "--read-only", "--tmpfs", "/tmp"]
# The local base: the Debian release of the Containerfile's default BASE, with what the image's
# `install-debs` lines ask for already in it (the build has no network to fetch them).
SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "bubblewrap", "ca-certificates")
BASE_REPOSITORY = "localhost/scratchpad-agent-test-base"
HOME_IN_IMAGE = "/data/agent"
AGENT_UID = 10001
REPLIES = f"{HOME_IN_IMAGE}/replies.yaml"
TIMEOUT = 900  # seconds: a guard against a hung podman, never a wait for something to happen


def podman(*args: str, check: bool = True, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    done = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args[:3])} ... exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="module")
def tools() -> None:
    missing = [tool for tool in ("podman", "runc", "mmdebstrap") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (rootful podman: the volume's files keep the image user's uid on the host)")
    if not missing:
        return
    why = f"the image test needs {', '.join(missing)} (.ci/run installs the tools; CI runs as root)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run this test, but {why}", pytrace=False)
    pytest.skip(why)


def _base_image(folder: Path) -> str:
    """The local Debian base, made once per package list and kept in podman's store."""
    key = hashlib.sha256(f"{SUITE} minbase {' '.join(sorted(BASE_PACKAGES))}".encode()).hexdigest()[:12]
    tag = f"{BASE_REPOSITORY}:{key}"
    if podman("image", "exists", tag, check=False).returncode == 0:
        return tag
    tarball = folder / "base.tar"
    made = subprocess.run(
        ["mmdebstrap", "--quiet", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(tarball)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert made.returncode == 0, f"mmdebstrap failed:\n{made.stderr}"
    podman("import", str(tarball), tag)
    tarball.unlink()
    stale = podman("images", "--filter", f"reference={BASE_REPOSITORY}", "--format", "{{.Tag}}").stdout.split()
    for old in set(stale) - {key}:  # bases made for an older package list
        podman("rmi", f"{BASE_REPOSITORY}:{old}", check=False)
    return tag


def _wheels(folder: Path) -> Path:
    """The package and every dependency as wheels (the [mcp] and [otel] extras' too: every image has
    them), built on the host at the image's pinned versions.
    The package is built from a copy of its sources: a build in the clone would reuse its build/
    folder, where a module deleted since the last build still lies."""
    source = folder / "source"
    shutil.copytree(REPO / "agent", source / "agent", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    wheels = folder / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--wheel-dir", str(wheels)]
        + ["--constraint", str(REPO / "container" / "constraints.txt"), f"{source}[mcp,otel]"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert built.returncode == 0, f"pip wheel failed:\n{built.stderr}"
    return wheels


def _same_python(base: str) -> None:
    """Wheels of compiled dependencies (PyYAML, pydantic-core) fit one Python version: the host's
    must be the base's."""
    version = podman("run", "--rm", *LIMITS, base, "python3", "-c", "import sys; print(sys.version_info[:2])")
    theirs, ours = version.stdout.strip(), str(tuple(sys.version_info[:2]))
    if theirs != ours:
        why = f"the base's python3 is {theirs}, this test runs on {ours}: the host's wheels would not install"
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


@pytest.fixture(scope="module")
def base(tools, tmp_path_factory) -> str:
    made = _base_image(tmp_path_factory.mktemp("base"))
    _same_python(made)
    return made


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> Path:
    """The build context: container/ and the wheels."""
    folder = tmp_path_factory.mktemp("context")
    shutil.copytree(REPO / "container", folder / "container")
    _wheels(folder)
    shutil.rmtree(folder / "source")
    return folder


def build(base: str, context: Path, tag: str, *args: str) -> subprocess.CompletedProcess:
    """The repository's Containerfile built on the local base: no network, no registry."""
    return podman(
        "build",
        "--pull=never",  # the base is local: nothing is fetched from a registry
        "--network=none",
        "--isolation=oci",  # a build container under runc (chroot isolation cannot have --network=none)
        "--layers=false",  # leaves no intermediate images behind
        "--force-rm",
        *LIMITS,
        "--build-arg",
        f"BASE={base}",
        "--build-arg",
        "PIP_NO_INDEX=1",
        *args,
        "--file",
        str(REPO / "Containerfile"),
        "--tag",
        tag,
        str(context),
        check=False,
    )


@pytest.fixture(scope="module")
def image(base, context) -> str:
    """The image, with the host's wheels. Removed at the end (the base stays cached)."""
    tag = f"localhost/scratchpad-agent-test:{uuid.uuid4().hex[:12]}"
    built = build(base, context, tag)
    assert built.returncode == 0, built.stdout + built.stderr
    yield tag
    podman("rmi", "--force", tag, check=False)


class Volume:
    """A named volume holding one home: run commands in the image against it, read it on the host."""

    def __init__(self, image: str):
        self.image = image
        self.name = f"scratchpad-agent-test-{uuid.uuid4().hex[:12]}"
        podman("volume", "create", self.name)
        self.path = Path(podman("volume", "inspect", "--format", "{{.Mountpoint}}", self.name).stdout.strip())

    def run(self, *argv: str, options: list[str] = ()) -> subprocess.CompletedProcess:
        """`argv` in a fresh container of the image, the volume at the home (`--rm`: nothing left)."""
        return podman(
            "run", "--rm", *LIMITS, *options, "--volume", f"{self.name}:{HOME_IN_IMAGE}", self.image, *argv, check=False
        )

    def put(self, name: str, text: str) -> None:
        """A file the operator places in the home, owned by the image's user."""
        path = self.path / name
        path.write_text(text)
        os.chown(path, AGENT_UID, AGENT_UID)
        path.chmod(0o600)

    def replies(self, *replies: dict) -> str:
        """A scripted model's replies, in the home; the model argument that names them."""
        self.put("replies.yaml", yaml.safe_dump([json.dumps(reply) for reply in replies]))
        return f"scripted:{REPLIES}"

    def history(self) -> list[dict]:
        """The home's cycles, newest first, as `agent history --json` on the host reads them."""
        result = run_cli("history", "--json", "--home", str(self.path))
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def active(self) -> dict:
        return yaml.safe_load((self.path / "scratchpad" / "active.yaml").read_text())

    def owners(self) -> set[int]:
        return {os.lstat(path).st_uid for path in [self.path, *self.path.rglob("*")]}

    def remove(self) -> None:
        podman("volume", "rm", "--force", self.name, check=False)


@pytest.fixture
def volume(image):
    made = Volume(image)
    yield made
    made.remove()


def tool(name: str, **args) -> dict:
    return {"tool": name, "args": args}


def init(volume: Volume, *options: str) -> None:
    made = volume.run("agent", "init", *options, HOME_IN_IMAGE)
    assert made.returncode == 0, made.stderr


def configure(volume: Volume, line: str) -> None:
    """One more setting in the home's config.yaml (appended: the file stays the image user's)."""
    with (volume.path / "config.yaml").open("a") as config:
        config.write(f"\n{line}\n")


def queue(volume: Volume, task: str, *options: str) -> None:
    """`agent task add` in the container (as the image's user: the home stays its own)."""
    added = volume.run("agent", "task", "add", task, *options)
    assert added.returncode == 0, added.stderr


def shell_policy(volume: Volume, options: list[str] = ()) -> tuple[dict, dict]:
    """What `agent status --json` and `agent doctor --json` in the container say of the shell."""
    status = volume.run("agent", "status", "--json", options=options)
    assert status.returncode == 0, status.stderr
    doctor = volume.run("agent", "doctor", "--json", "--model", f"scripted:{REPLIES}", options=options)
    shell = next(check for check in json.loads(doctor.stdout) if check["check"] == "shell")
    return json.loads(status.stdout)["shell_policy"], shell


# ------------------------------------------------------------------------------ a cycle in the image


def test_a_scripted_cycle_runs_in_the_image_as_its_user_and_the_host_reads_the_home(volume):
    init(volume, "--template", "demo")
    model = volume.replies(
        tool("echo", message="Hello!"), tool("shell", command="whoami"), tool("done", summary="Said hello")
    )
    ran = volume.run("agent", "run", "--model", model)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "[COMPLETED] Said hello" in ran.stdout

    active = volume.active()  # on the host
    assert active["current_task"] == "Write the word hello into hello.txt"
    assert [task["task"] for task in active["completed_tasks"]] == ["Run the echo tool with a hello message"]
    assert '[TOOL] shell({"command": "whoami"}) -> agent' in active["notes"]  # the model's shell: the image's user
    [record] = volume.history()
    assert (record["stop_reason"], record["exit_code"], record["model"]) == ("done", 0, model)
    assert record["task_before"] == "Run the echo tool with a hello message"
    assert volume.owners() == {AGENT_UID}  # everything the cycle made in the volume is the unprivileged user's

    # The host's reading left the home as it was for the container's user: a second cycle runs. Its task has
    # a check, which no sandbox here can run: the done is refused (the boundary's rule) and the cap stops it.
    writes = volume.replies(tool("write_file", path="hello.txt", content="hello"), tool("done", summary="Wrote it"))
    again = volume.run("agent", "run", "--model", writes, "--max-iterations", "2")
    assert again.returncode == 3, again.stdout + again.stderr
    assert "[CHECK FAILED]" in again.stdout and "checks_unsandboxed" in again.stdout
    assert [r["task_before"] for r in volume.history()] == [
        "Write the word hello into hello.txt",
        "Run the echo tool with a hello message",
    ]
    assert volume.owners() == {AGENT_UID}


def test_the_image_runs_as_an_unprivileged_user_with_the_home_on_a_volume(image):
    config = json.loads(podman("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == "agent" and list(config["Volumes"]) == [HOME_IN_IMAGE]
    assert f"AGENT_HOME={HOME_IN_IMAGE}" in config["Env"]
    ids = podman("run", "--rm", *LIMITS, image, "id", "-u").stdout.split()
    assert ids == [str(AGENT_UID)]


def test_a_build_with_a_bad_embedded_model_value_or_without_the_packages_wheel_says_which(base, context, tmp_path):
    tag = f"localhost/scratchpad-agent-test-refused:{uuid.uuid4().hex[:12]}"
    bad_value = build(base, context, tag, "--build-arg", "EMBEDDED_MODEL=yes")
    assert bad_value.returncode != 0
    assert "build-venv: EMBEDDED_MODEL must be on or off, not 'yes'" in bad_value.stderr
    no_wheel = tmp_path / "context"
    shutil.copytree(context, no_wheel, ignore=shutil.ignore_patterns("scratchpad_agent-*.whl"))
    missing = build(base, no_wheel, tag)
    assert missing.returncode != 0
    assert "build-venv: wheels/ must hold one scratchpad_agent wheel (pip wheel --no-deps" in missing.stderr
    assert podman("image", "exists", tag, check=False).returncode == 1  # neither left an image


def test_the_loop_refuses_a_pause_that_is_not_whole_seconds_and_touches_nothing(volume):
    for pause in ("soon", "0", "-5"):
        refused = volume.run("agent-loop", pause)
        assert refused.returncode == 2
        assert refused.stderr == f"agent-loop: the pause must be a whole number of seconds above 0, not '{pause}'\n"
    assert list(volume.path.iterdir()) == []  # no home was made


ECHO_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


server.run()
'''


def test_a_home_with_an_mcp_server_and_traces_runs_in_the_image(volume):
    """The [mcp] and [otel] extras are in the image: the server's tool answers, the cycle has a trace
    (sent nowhere: no collector listens, which the log says and the exit code does not)."""
    init(volume)
    volume.put("echo_server.py", ECHO_SERVER)
    configure(volume, "otel: true")
    configure(
        volume, f"mcp_servers: {{echo: {{command: /opt/agent/bin/python, args: [{HOME_IN_IMAGE}/echo_server.py]}}}}"
    )
    queue(volume, "Echo through MCP")
    model = volume.replies(tool("echo__echo", text="through mcp"), tool("done", summary="echoed"))
    no_collector = ["--env", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9"]
    ran = volume.run("agent", "run", "--model", model, options=no_collector)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert '[TOOL] echo__echo({"text": "through mcp"}) -> through mcp' in volume.active()["notes"]
    [record] = volume.history()
    assert (record["stop_reason"], len(record["trace_id"])) == ("done", 32)
    assert volume.owners() == {AGENT_UID}


def test_a_plain_cycle_in_the_image_loads_neither_the_mcp_nor_the_otel_packages(volume):
    assert volume.run("python", "-c", "import mcp, opentelemetry.sdk").returncode == 0  # they are there
    init(volume)
    queue(volume, "Say hi")
    model = volume.replies(tool("done", summary="hi"))
    probe = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print('LOADED', json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = ['agent', 'run', '--json', '--model', {model!r}]\n"
        "from agent.cli import entry\n"
        "entry()\n"
    )
    ran = volume.run("python", "-c", probe)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report, loaded = ran.stdout.split("LOADED ", 1)
    assert json.loads(report)["stop_reason"] == "done"
    assert not {name for name in json.loads(loaded) if name.split(".")[0] in ("mcp", "mcp_types", "opentelemetry")}


# ------------------------------------------------------------------------ the shell in a container


def test_under_the_runtimes_defaults_the_shell_is_the_allowlist_and_doctor_and_status_say_why(volume):
    init(volume)
    policy, doctor = shell_policy(volume)
    assert policy["policy"] == "allowlist" and policy["warning"], policy
    assert policy["why"].startswith("auto: the sandbox is unavailable (bwrap cannot make the sandbox here"), policy
    assert doctor["detail"] == f"allowlist: {policy['why']}" and doctor["warning"], doctor
    assert "docs/operations.md" in doctor["fix"] and "shell_policy: allowlist" in doctor["fix"]  # bwrap is there

    # What the model gets is the allowlist: a command that writes is refused.
    queue(volume, "Write a file")
    model = volume.replies(tool("shell", command="echo hi > made.txt"), tool("done", summary="tried"))
    ran = volume.run("agent", "run", "--model", model)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "shell policy: allowlist (auto: the sandbox is unavailable" in ran.stdout + _cycle_log(volume)
    assert not (volume.path / "workspace" / "made.txt").exists()


def test_under_the_documented_podman_settings_the_shell_runs_in_the_sandbox(volume):
    init(volume)
    policy, doctor = shell_policy(volume, SANDBOX_SETTINGS)
    assert policy["policy"] == "sandbox" and not policy["warning"], policy
    assert policy["why"].startswith("auto: bubblewrap works here"), policy
    assert doctor["ok"] and not doctor["warning"], doctor

    queue(volume, "Write a file")
    model = volume.replies(tool("shell", command="echo made > made.txt"), tool("done", summary="made"))
    ran = volume.run("agent", "run", "--model", model, options=SANDBOX_SETTINGS)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    made = volume.path / "workspace" / "made.txt"
    assert made.read_text() == "made\n"  # a redirection: only the sandbox runs one
    assert volume.owners() == {AGENT_UID}


@pytest.mark.parametrize(
    ("variant", "options", "made"),
    [("allowlist", POD_SETTINGS, False), ("sandbox", POD_SETTINGS + SANDBOX_SETTINGS, True)],
)
def test_the_kubernetes_variants_security_context_as_podman_flags_gives_the_shell_the_docs_promise(
    volume, variant, options, made
):
    init(volume)
    settings = [*options, "--env", f"AGENT_SHELL_POLICY={variant}"]
    policy, doctor = shell_policy(volume, settings)
    assert policy["policy"] == variant and not policy["warning"], policy
    assert doctor["ok"] and not doctor["warning"], doctor
    queue(volume, "Write a file")
    model = volume.replies(tool("shell", command="echo made > made.txt"), tool("done", summary="tried"))
    ran = volume.run("agent", "run", "--model", model, options=settings)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (volume.path / "workspace" / "made.txt").exists() is made  # a redirection: only the sandbox runs one
    assert volume.owners() == {AGENT_UID}


def _cycle_log(volume: Volume) -> str:
    return "\n".join(path.read_text() for path in sorted((volume.path / "logs").glob("cycle_*.log")))


# ----------------------------------------------------------------------------- compose.yaml's loop


def ended_cycles(volume: Volume) -> list[dict]:
    """The cycles that have a record, once the loop has made the home (none before)."""
    if not (volume.path / "logs").is_dir() or not (volume.path / "config.yaml").exists():
        return []
    return [record for record in volume.history() if record.get("exit_code") is not None]


def test_the_compose_loop_runs_a_cycle_keeps_the_key_out_of_the_home_and_stops_on_sigterm(volume, tmp_path):
    service = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["agent"]
    [mount] = service["volumes"]
    assert mount.split(":")[1] == HOME_IN_IMAGE
    init(volume)  # the loop's own `agent init` keeps it
    queue(volume, "Say who runs the loop")  # else the cycle is idle: no task, no model call
    key = f"sk-test-{uuid.uuid4().hex}"
    env_file = tmp_path / "agent.env"
    env_file.write_text(f"OPENAI_API_KEY={key}\nAGENT_MODEL=scripted:{REPLIES}\n")
    volume.replies(tool("shell", command="whoami"), tool("done", summary="looped"))
    name = f"scratchpad-agent-test-loop-{uuid.uuid4().hex[:12]}"
    podman(
        "run",
        "--detach",
        "--name",
        name,
        *LIMITS,
        "--env-file",
        str(env_file),
        "--volume",
        f"{volume.name}:{HOME_IN_IMAGE}",
        volume.image,
        *service["command"],
    )
    try:
        wait_for(lambda: ended_cycles(volume), "the loop's first cycle", 300)
        podman("stop", "--time", "120", name)  # SIGTERM; SIGKILL only if the loop ignored it for 2 minutes
        state = json.loads(podman("inspect", name).stdout)[0]["State"]
        assert state["ExitCode"] == 143, podman("logs", name).stderr  # the loop's own exit on SIGTERM, not a kill
    finally:
        podman("rm", "--force", name, check=False)
    [record] = volume.history()
    assert (record["stop_reason"], record["exit_code"]) == ("done", 0)
    assert '[TOOL] shell({"command": "whoami"}) -> agent' in volume.active()["notes"]
    assert volume.owners() == {AGENT_UID}
    everything = b"".join(path.read_bytes() for path in volume.path.rglob("*") if path.is_file())
    assert key.encode() not in everything


# --------------------------------------------------- issue #32's contract: passes once #32 is merged


CHECKED_TASK = "Write hello into hello.txt"


def test_issue_32_a_check_is_refused_where_no_sandbox_runs_unless_checks_unsandboxed_is_set(volume):
    """In the container under the runtime's defaults no sandbox runs: an acceptance check is
    refused with a note naming the opt-in, never run; with `checks_unsandboxed: true` it runs
    and doctor and the cycle log flag it."""
    init(volume)
    configure(volume, "max_iterations: 2")  # a refused done then ends the cycle at the limit, its notes saved
    queue(volume, CHECKED_TASK, "--check", "grep -qx hello hello.txt")
    model = volume.replies(tool("write_file", path="hello.txt", content="hello\n"), tool("done", summary="wrote it"))

    volume.run("agent", "run", "--model", model)
    assert (volume.path / "workspace" / "hello.txt").read_text() == "hello\n"  # the check would pass if it ran
    refused = volume.active()
    assert refused["current_task"] == CHECKED_TASK, "#32: a check where no sandbox runs must not run (done refused)"
    assert "checks_unsandboxed" in refused["notes"], "#32: the refusal's note names the opt-in"

    configure(volume, "checks_unsandboxed: true")
    ran = volume.run("agent", "run", "--model", model)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert CHECKED_TASK in [task["task"] for task in volume.active()["completed_tasks"]]
    newest = max((volume.path / "logs").glob("cycle_*.log")).read_text()
    assert "checks_unsandboxed" in newest, "#32: every cycle log flags the opt-in"
    doctor = volume.run("agent", "doctor", "--json", "--model", model)
    assert "checks_unsandboxed" in doctor.stdout, "#32: doctor flags the opt-in"
