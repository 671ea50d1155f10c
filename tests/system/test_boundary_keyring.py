"""The sandbox starts with a fresh session keyring, and its seccomp filter refuses the key system
calls: a key in the agent's own session keyring is never read from inside, as root and as an
ordinary user, in a real sandboxed cycle (the agent runs in a session keyring holding the key)."""

from __future__ import annotations

import shutil

import pytest

from tests.sandbox_support import sandbox_required  # noqa: F401 - a fixture
from tests.users import _unavailable, done, everything_in, notes_of, shell

pytestmark = pytest.mark.usefixtures("sandbox_required")

KEY_NAME = "agent-boundary-key"
KEY_VALUE = "kv-7f3a9c1e5b2d8046"  # not a configured secret: nothing would redact it
# The key's value printed only when read: the command's own text never holds it.
PYTHON_READ = (
    'python3 -c "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); '
    "nr = {'x86_64': 250, 'aarch64': 219}[os.uname().machine]; "
    f"kid = libc.syscall(nr, 10, -3, b'user', b'{KEY_NAME}', 0); "  # KEYCTL_SEARCH the session keyring
    "buf = ctypes.create_string_buffer(256); n = libc.syscall(nr, 11, kid, buf, 256); "  # KEYCTL_READ
    "print('search', kid, 'read', n, 'errno', ctypes.get_errno(), buf.raw[:max(n, 0)].decode())\""
)
ATTEMPTS = {
    "keyctl-print": f"keyctl print %user:{KEY_NAME}; keyctl show @s",
    "python-syscalls": PYTHON_READ,
    "proc-keys": f"grep {KEY_NAME} /proc/keys; keyctl pipe %user:{KEY_NAME}",
}


@pytest.mark.parametrize("attempt", sorted(ATTEMPTS))
def test_a_key_in_the_agents_session_keyring_is_never_read_from_the_sandbox(agent_user, attempt):
    keyctl = shutil.which("keyctl")
    if keyctl is None:
        _unavailable("keyctl is not installed (the README's apt-get line installs keyutils)")
    home = agent_user.make_home({"shell_policy": "sandbox", "note_result_chars": 600})
    # keyctl session: a new session keyring for the agent, holding the key (possessed, readable)
    wrap = (
        "keyctl",
        "session",
        "-",
        "sh",
        "-c",
        f'keyctl add user {KEY_NAME} {KEY_VALUE} @s >/dev/null && exec "$@"',
        "sh",
    )
    control = agent_user.run([*wrap, "sh", "-c", f"keyctl print %user:{KEY_NAME}"])
    assert control.stdout.strip() == KEY_VALUE  # outside the sandbox, the agent's process can read it
    result = agent_user.cycle(home, [shell(ATTEMPTS[attempt]), done()], wrap=wrap)
    assert result.returncode == 0, result.stderr
    (line,) = notes_of(home)[:1]
    assert line.startswith("[TOOL] shell("), line
    assert KEY_VALUE not in line and KEY_VALUE not in result.stdout + result.stderr
    assert KEY_VALUE.encode() not in everything_in(home)
