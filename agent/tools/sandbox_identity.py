"""Who a sandbox runs as outside it, and how the workspace reaches it.

- An ordinary user's sandbox runs as that user (bubblewrap maps the sandbox's user 65534 to it).
- Root's sandbox runs as `sandbox_uid` (and the group of the same number), an unprivileged id
  that owns the workspace and nothing else, so nothing a sandboxed command makes is root's, and
  the kernel applies the process limit (RLIMIT_NPROC) it never applies to root. bwrap is started
  as that id: the child drops to it after joining the command's cgroups.
- The workspace is handed to bwrap as a file descriptor (`--bind-fd`), never as a path the
  sandbox's id would have to walk: the home stays at 0700, closed to every other user. As root,
  bwrap (already that unprivileged id) cannot reach a folder inside a 0700 home even through a
  descriptor (it resolves the descriptor's path), so the child first binds the workspace onto
  a private tmpfs in a mount namespace of its own, then opens it there.
- Every sandbox starts with a fresh, empty session keyring (as systemd's `KeyringMode=private`),
  and the seccomp filter refuses the key system calls besides (sandbox_seccomp.py).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable

PRIVATE_ROOT = b"/tmp"  # in the child's own mount namespace: a tmpfs over it holds the workspace's mount point
MOUNT_POINT = b"/tmp/workspace"
_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_KEYCTL_JOIN_SESSION_KEYRING = 1
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}


def outer_ids(sandbox_uid: int) -> tuple[int, int] | None:
    """(uid, gid) a sandbox runs as outside when the agent is root; None: the agent's own."""
    return (sandbox_uid, sandbox_uid) if os.geteuid() == 0 else None


def hand_over(path: Path, sandbox_uid: int) -> None:
    """As root, give `path` (never followed if a link) to the sandbox's id; otherwise nothing."""
    ids = outer_ids(sandbox_uid)
    if ids is not None:
        os.chown(path, *ids, follow_symlinks=False)


def workspace_slot(workspace: Path, ids: tuple[int, int] | None) -> int:
    """The descriptor bwrap binds as /workspace: the folder itself for an ordinary user; as root a
    placeholder that the child replaces with the workspace seen through its private mount."""
    target = "/" if ids is not None else workspace
    return os.open(target, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def child_setup(workspace: Path, slot: int, ids: tuple[int, int] | None) -> Callable[[], None]:
    """A preexec step (after the cgroups are joined): as root, the private mount and the drop to
    `ids`; for everyone, a fresh session keyring. The C functions are looked up here, in the parent."""
    libc = _libc()
    keyctl = _SYS_KEYCTL.get(os.uname().machine)
    folder = os.fsencode(workspace)

    def setup() -> None:
        if ids is not None:
            _bind_privately(libc, folder, slot)
            os.setgroups([])
            os.setresgid(ids[1], ids[1], ids[1])
            os.setresuid(ids[0], ids[0], ids[0])
        if keyctl is not None:
            libc.syscall(keyctl, _KEYCTL_JOIN_SESSION_KEYRING, None)  # refused or not, keyctl is off inside

    return setup


def _bind_privately(libc, folder: bytes, slot: int) -> None:
    """In a new mount namespace, the workspace bound on a tmpfs over /tmp; its descriptor in `slot`."""
    _call(libc.unshare(_CLONE_NEWNS), "unshare the mount namespace")
    _call(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make the mounts private")
    source = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)  # before /tmp is covered
    _call(libc.mount(b"tmpfs", PRIVATE_ROOT, b"tmpfs", 0, b"mode=0755,size=65536"), "mount a private tmpfs")
    os.mkdir(MOUNT_POINT, 0o755)
    _call(libc.mount(f"/proc/self/fd/{source}".encode(), MOUNT_POINT, None, _MS_BIND, None), "bind the workspace")
    os.close(source)
    bound = os.open(MOUNT_POINT, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    os.dup2(bound, slot)  # inheritable: bwrap reads it
    os.close(bound)


def _call(result: int, what: str) -> None:
    if result != 0:
        import ctypes

        raise OSError(ctypes.get_errno(), f"cannot {what}: {os.strerror(ctypes.get_errno())}")


@functools.cache
def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.unshare.argtypes = [ctypes.c_int]
    return libc
