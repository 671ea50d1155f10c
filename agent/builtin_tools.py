"""The built-in tools. Each is a plain typed function; `TOOLS` turns them into `Tool`s.

Safe by default:
- shell runs argv (never a shell) under a policy (allowlist, any, off), from the home, with a
  scrubbed environment, a timeout that kills the whole process group, and an output cap;
- file tools are confined to the workspace, refuse `..` and symlinks that lead out, cap sizes,
  and never write the runtime's own files;
- http_get refuses non-public addresses (after DNS and on every redirect) and connects to the
  very address it checked, with a timeout and a body cap.
"""

from __future__ import annotations

import ipaddress
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .tools import Tool, ToolContext, ToolError

if TYPE_CHECKING:  # imported where used, so a cycle that runs no command never loads them
    import subprocess

MAX_LIST_ENTRIES = 200


def echo(ctx: ToolContext, message: str) -> str:
    """Return the message unchanged (a way to record something in notes).

    Args:
        message: the text to echo
    """
    return message


# ---------------------------------------------------------------------------------------- shell


def shell(ctx: ToolContext, command: str) -> str:
    """Run one command (split like a shell would, but no pipes, redirects or variables) and return its output.

    Args:
        command: the command line, e.g. "date -u" or "ls -l"
    """
    import shlex, subprocess
    settings = ctx.settings
    if settings.shell_policy == "off":
        raise ToolError("the shell tool is turned off in this home's config")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ToolError(f"cannot split the command: {exc}") from None
    if not argv:
        raise ToolError("the command is empty")
    if settings.shell_policy == "allowlist":
        if "/" in argv[0] or argv[0] not in settings.shell_allowlist:
            allowed = ", ".join(settings.shell_allowlist)
            raise ToolError(f"command '{argv[0]}' is not allowed (allowed: {allowed})")
        outside = _argument_outside_home(ctx.home, argv[1:])
        if outside:
            raise ToolError(f"argument '{outside}' names a path outside the home; under the allowlist "
                            f"policy commands may only name paths inside it")
    try:
        proc = subprocess.Popen(
            argv, cwd=ctx.home, env=ctx.child_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
    except FileNotFoundError:
        raise ToolError(f"command not found: {argv[0]}") from None
    except OSError as exc:
        raise ToolError(f"cannot run {argv[0]}: {exc.strerror}") from None
    output, cut, timed_out = _read_capped(proc, settings.shell_max_output, settings.shell_timeout)
    text = output.decode("utf-8", errors="replace")
    if cut:
        text += f"\n[output cut at {settings.shell_max_output} bytes; {cut} more bytes dropped]"
    if timed_out:
        raise ToolError(f"timed out after {settings.shell_timeout:g}s and was killed; output so far: {text[:200]}")
    if _kill_group(proc):  # the command exited but left children behind in its group
        text = f"{text.rstrip()}\n[background processes it left running were killed]"
    if proc.returncode != 0:
        return f"{text.rstrip()}\n[exit status {proc.returncode}]".lstrip()
    return text.rstrip("\n")


def _path_candidates(arg: str) -> list[str]:
    """Every path an argument may carry: itself, or for an option the value after `=`, the value
    stuck to a short option (`-f/etc/passwd`), and any tail starting at `/` or `~` (`-xf/etc`)."""
    if not arg.startswith("-"):
        return [arg]
    found = [arg.split("=", 1)[1]] if "=" in arg else []
    if not arg.startswith("--") and len(arg) > 2:
        found.append(arg[2:])
    found += [arg[i:] for i, ch in enumerate(arg) if ch in "/~"]
    return found


def _argument_outside_home(home: Path, args: list[str]) -> str | None:
    """The first argument that names a path outside the home (absolute, `..`, ~, a symlink out)."""
    root = home.resolve()
    for arg in args:
        for value in _path_candidates(arg):
            if value.startswith(("/", "~")) or ".." in Path(value).parts:
                return arg
            if not value or value.startswith("-"):
                continue
            candidate = root / value
            try:
                if (candidate.is_symlink() or candidate.exists()) and not candidate.resolve().is_relative_to(root):
                    return arg
            except OSError:  # a name too long to be a path is not a path
                continue
    return None


def _read_capped(proc: subprocess.Popen, cap: int, timeout: float) -> tuple[bytes, int, bool]:
    """Read a child's output keeping at most `cap` bytes; kill its process group on timeout.

    If the cycle is interrupted meanwhile (SIGTERM, Ctrl-C), the group is killed before the
    interruption goes on: a command must never outlive the cycle that started it.
    """
    try:
        return _read_until(proc, cap, timeout)
    except BaseException:
        _kill_group(proc)
        raise


def _read_until(proc: subprocess.Popen, cap: int, timeout: float) -> tuple[bytes, int, bool]:
    import subprocess
    import selectors

    kept, dropped = bytearray(), 0
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill_group(proc)
                return bytes(kept), dropped, True
            if not selector.select(remaining):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            room = cap - len(kept)
            kept += chunk[:room]
            dropped += max(0, len(chunk) - room)
    proc.stdout.close()
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # closed its output but kept running
        _kill_group(proc)
        return bytes(kept), dropped, True
    return bytes(kept), dropped, False


def _kill_group(proc: subprocess.Popen) -> bool:
    """SIGKILL every process in the command's group (it leads its own session); True if any was left."""
    import signal
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        killed = True
    except (ProcessLookupError, PermissionError):
        killed = False
    proc.wait()
    if proc.stdout and not proc.stdout.closed:
        proc.stdout.close()
    return killed


# ----------------------------------------------------------------------------------- file tools

# Paths the runtime owns: a tool writing here could forge or destroy the evidence of a cycle,
# or rewrite the rules the model reads every cycle.
_PROTECTED = ("scratchpad", "logs", "config.yaml", ".agent.lock", "rules.md")


def confined_path(ctx: ToolContext, path: str, *, for_writing: bool = False) -> Path:
    """Resolve `path` inside the workspace, or refuse it with a ToolError saying why."""
    if not path or "\x00" in path:
        raise ToolError("the path is empty or contains a NUL byte")
    if ".." in Path(path).parts:
        raise ToolError(f"path '{path}' contains '..'; paths must stay inside the workspace")
    root = ctx.workspace
    candidate = Path(path) if os.path.isabs(path) else root / path
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        how = "resolves through a symlink to" if candidate.absolute() != resolved and candidate.is_relative_to(root) else "is"
        raise ToolError(f"path '{path}' {how} {resolved}, outside the workspace {root}")
    if for_writing:
        home = ctx.home.resolve()
        inside = resolved.relative_to(home).parts if resolved.is_relative_to(home) else ()
        if inside and inside[0] in _PROTECTED:
            raise ToolError(f"path '{path}' belongs to the runtime ({inside[0]}); tools may not write there")
    return resolved


def read_file(ctx: ToolContext, path: str) -> str:
    """Read a text file inside the workspace (long files are cut, with a marker).

    Args:
        path: a path relative to the workspace, e.g. "notes/today.txt"
    """
    cap = ctx.settings.file_max_read
    target = confined_path(ctx, path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}")
    size = target.stat().st_size
    with open(target, "rb") as handle:
        data = handle.read(cap)
    text = data.decode("utf-8", errors="replace")
    if size > cap:
        text += f"\n[file is {size} bytes; only the first {cap} were read]"
    return text


def _write_whole(ctx: ToolContext, path: str, target: Path, data: bytes) -> None:
    from .scratchpad import atomic_write

    if len(data) > ctx.settings.file_max_write:
        raise ToolError(f"the file would be {len(data)} bytes, over the {ctx.settings.file_max_write}-byte limit")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)
    except Exception as exc:  # DiskError or OSError: tell the model, keep the cycle going
        raise ToolError(str(exc)) from None


def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or replace a text file inside the workspace.

    Args:
        path: a path relative to the workspace, e.g. "hello.txt"
        content: the whole new content of the file
    """
    data = content.encode("utf-8")
    if len(data) > ctx.settings.file_max_write:  # before touching the path at all
        raise ToolError(f"content is {len(data)} bytes, over the {ctx.settings.file_max_write}-byte limit")
    target = confined_path(ctx, path, for_writing=True)
    if target.is_dir():
        raise ToolError(f"'{path}' is a directory")
    _write_whole(ctx, path, target, data)
    return f"wrote {len(data)} bytes to {path}"


def append_file(ctx: ToolContext, path: str, content: str) -> str:
    """Add text to the end of a file inside the workspace (creating it if needed).

    Args:
        path: a path relative to the workspace, e.g. "journal.txt"
        content: the text to add; include a trailing newline if you want one
    """
    data = content.encode("utf-8")
    target = confined_path(ctx, path, for_writing=True)
    if target.is_dir():
        raise ToolError(f"'{path}' is a directory")
    old = b""
    if target.exists():
        if not target.is_file():
            raise ToolError(f"'{path}' is not a regular file")
        size = target.stat().st_size
        if size + len(data) > ctx.settings.file_max_write:
            raise ToolError(f"the file would be {size + len(data)} bytes, over the "
                            f"{ctx.settings.file_max_write}-byte limit")
        old = target.read_bytes()
    # Rewritten whole and atomically, like every other write: a crash leaves old or new, never half.
    _write_whole(ctx, path, target, old + data)
    return f"appended {len(data)} bytes to {path} (now {len(old) + len(data)} bytes)"


def list_dir(ctx: ToolContext, path: str = ".") -> str:
    """List a folder inside the workspace: folders end in /, symlinks in @, files show their size.

    Args:
        path: a folder relative to the workspace; "." is the workspace itself
    """
    target = confined_path(ctx, path)
    if not target.is_dir():
        raise ToolError(f"no such folder: {path}")
    entries = sorted(target.iterdir(), key=lambda p: p.name)
    lines = []
    for entry in entries[:MAX_LIST_ENTRIES]:
        if entry.is_symlink():
            lines.append(f"{entry.name}@")
        elif entry.is_dir():
            lines.append(f"{entry.name}/")
        else:
            try:
                lines.append(f"{entry.name} ({entry.stat().st_size} bytes)")
            except OSError:
                lines.append(entry.name)
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
    return "\n".join(lines) if lines else "(empty folder)"


# ------------------------------------------------------------------------------------- http_get

# Refused even when http_allow_networks covers them: instance metadata hands out credentials.
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",   # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
    "169.254.170.2",     # AWS ECS task credentials
    "169.254.170.23",    # AWS EKS pod identity
    "fd00:ec2::254",     # AWS IMDS over IPv6
    "fd00:ec2::23",      # AWS EKS pod identity over IPv6
    "100.100.100.200",   # Alibaba Cloud
    "192.0.0.192",       # Oracle Cloud
    "168.63.129.16",     # Azure wire server
))

_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# Certificate verification for https (the system's CAs); tests point it at their own CA.
TLS_VERIFY: object = True


def _embedded_ipv4(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list:
    """IPv4 addresses hidden inside an IPv6 one (mapped, 6to4, Teredo, NAT64)."""
    if ip.version != 6:
        return []
    found = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
    if ip in _NAT64:
        found.append(ipaddress.ip_address(int(ip) & 0xFFFFFFFF))
    return [a for a in found if a is not None]


def address_problem(address: str, allowed_networks: list[str]) -> str | None:
    """Why http_get may not connect to this IP address, or None when it may."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    for candidate in [ip, *_embedded_ipv4(ip)]:
        if candidate in METADATA_ADDRESSES:
            return f"{address} is a cloud metadata address"
    if any(ip in ipaddress.ip_network(n, strict=False) for n in allowed_networks):
        return None
    for candidate in [*_embedded_ipv4(ip), ip]:  # the embedded IPv4 address names the problem best
        for kind in ("loopback", "link_local", "multicast", "unspecified", "reserved", "private"):
            if getattr(candidate, f"is_{kind}"):
                return f"{address} is a {kind.replace('_', '-')} address"
        if not candidate.is_global:
            return f"{address} is not a public address"
    return None


def resolve_host(host: str, port: int) -> list[str]:
    """Every IP address a host name resolves to (the system resolver)."""
    import socket
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolError(f"cannot resolve {host}: {exc}") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


def _httpx():
    """httpx under the name this environment installs it as (openai may pull in `httpx2`)."""
    try:
        import httpx
    except ImportError:
        import httpx2 as httpx
    return httpx


def checked_target(url, settings, resolver: Callable[[str, int], list[str]]):
    """(IP to connect to, Host header) for a URL, or a ToolError saying why it is refused.

    Every address the name resolves to must pass; the request then goes to that exact address,
    so a second, different DNS answer (rebinding) cannot redirect the connection.
    """
    if url.scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs are allowed, not '{url.scheme or 'none'}:'")
    host = url.raw_host.decode("ascii")  # IDNA-encoded: what DNS and TLS see
    if not host:
        raise ToolError(f"URL '{url}' has no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        addresses = resolver(host, port)
    if not addresses:
        raise ToolError(f"{host} resolves to no address")
    for address in addresses:
        problem = address_problem(address, settings.http_allow_networks)
        if problem:
            via = "" if host == address else f"{host} resolves to {address}: "
            raise ToolError(f"refused {url}: {via}{problem}; http_get only reaches public addresses")
    return addresses[0], url.netloc.decode("ascii")


def fetch(url: str, settings, resolver: Callable[[str, int], list[str]] = resolve_host) -> str:
    """GET `url` with every safety check of http_get; returns the status line and the body."""
    httpx = _httpx()
    deadline = time.monotonic() + settings.http_timeout
    try:
        current = httpx.URL(url)
    except Exception as exc:
        raise ToolError(f"not a valid URL: {exc}") from None
    with httpx.Client(trust_env=False, follow_redirects=False, verify=TLS_VERIFY) as client:  # no proxies
        for hop in range(settings.http_max_redirects + 1):
            address, host_header = checked_target(current, settings, resolver)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ToolError(f"timed out after {settings.http_timeout:g}s")
            request = client.build_request(
                "GET", current.copy_with(host=address),
                headers={"Host": host_header, "Accept-Encoding": "identity", "User-Agent": "scratchpad-agent"},
                timeout=remaining,
                extensions={"sni_hostname": current.raw_host.decode("ascii")},  # TLS checks the name's certificate
            )
            try:
                response = client.send(request, stream=True)
            except httpx.TimeoutException:
                raise ToolError(f"timed out after {settings.http_timeout:g}s") from None
            except httpx.HTTPError as exc:
                raise ToolError(f"request to {current} failed: {exc}") from None
            try:
                location = response.headers.get("location")
                if response.status_code in (301, 302, 303, 307, 308) and location:
                    try:
                        current = current.join(location)
                    except Exception as exc:
                        raise ToolError(f"bad redirect Location {location!r}: {exc}") from None
                    continue
                return _read_body(response, current, settings, deadline, httpx)
            finally:
                response.close()
    raise ToolError(f"more than {settings.http_max_redirects} redirects; stopped at {current}")


def _read_body(response, url, settings, deadline: float, httpx) -> str:
    cap = settings.http_max_bytes
    body, cut = bytearray(), False
    try:
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > cap:
                del body[cap:]
                cut = True
                break  # stop reading: the rest never leaves the socket
            if time.monotonic() > deadline:
                raise ToolError(f"timed out after {settings.http_timeout:g}s while reading {url}")
    except httpx.TimeoutException:
        raise ToolError(f"timed out after {settings.http_timeout:g}s while reading {url}") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"reading {url} failed: {exc}") from None
    try:
        text = bytes(body).decode(response.charset_encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        text = bytes(body).decode("utf-8", errors="replace")
    kind = response.headers.get("content-type", "unknown type")
    head = f"HTTP {response.status_code} {response.reason_phrase} ({kind}) from {url}"
    if cut:
        text += f"\n[body cut at {cap} bytes; the rest was not read]"
    return f"{head}\n{text}"


def http_get(ctx: ToolContext, url: str) -> str:
    """Fetch a public http(s) URL and return its status and text (redirects followed, size capped).

    Args:
        url: the full URL, e.g. "https://example.com/"
    """
    return fetch(url, ctx.settings, resolve_host)


TOOLS = [
    Tool.from_function(echo, example={"message": "Hello!"}),
    Tool.from_function(shell, example={"command": "date -u"}),
    Tool.from_function(read_file, example={"path": "input.txt"}),
    Tool.from_function(write_file, example={"path": "hello.txt", "content": "hello"}),
    Tool.from_function(append_file, example={"path": "journal.txt", "content": "checked the disk\n"}),
    Tool.from_function(list_dir, example={"path": "."}),
    Tool.from_function(http_get, example={"url": "https://example.com/"}),
]
