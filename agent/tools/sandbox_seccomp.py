"""The sandbox's seccomp filter: what no command in it may do, whatever program it runs.

bubblewrap loads it (`--seccomp FD`) just before it runs the command, after every mount and
with no_new_privs set, so it holds for everything the command starts. It refuses, as systemd's
`RestrictSUIDSGID=` does:

- a set-user-ID or set-group-ID bit, on `chmod`, `fchmod`, `fchmodat`, `fchmodat2` (452), on
  `mknod`, `mknodat`, `creat`, and on `open` and `openat` with `O_CREAT` or `O_TMPFILE`
  (EPERM). `openat2` passes its mode in a structure seccomp cannot read: it is refused with
  ENOSYS, so the C library falls back to `openat`, which the filter sees;
- the kernel's key store: `add_key`, `keyctl` and `request_key` (EPERM), on top of the fresh
  session keyring the sandbox starts with;
- `fallocate` (EOPNOTSUPP: the C library then writes the blocks instead), so reserving disk
  space goes no faster than writing it, which the quota's watch sees (quota.py);
- io_uring (`io_uring_setup`, `io_uring_enter`, `io_uring_register`: ENOSYS, so a program falls
  back to plain system calls). Its operations run in the kernel, where no seccomp filter sees
  them: IORING_OP_OPENAT takes a mode (a setuid file), IORING_OP_FALLOCATE reserves a gigabyte
  of disk in one call, past every rule above. Docker's default profile refuses it too.

Past the quota (`filter_program(grow=False)`, with RLIMIT_FSIZE at 0: quota.py) it also refuses
`mmap` of a file with `MAP_SHARED` (EACCES, as for a file the caller may not map). A shared mapping
writes a file with no write() call, so RLIMIT_FSIZE never sees it: a sparse file's holes (its size
set by `truncate -s` while under the quota, no blocks taken) would fill at memory speed, tens of
megabytes before the watch's next look, and again in every later command. Refused whatever its
protection, since `mprotect` can make a read-only shared mapping of a writable file writable.
Private mappings (how every program and library is loaded) and anonymous shared memory still work.

Only the machine's own architecture is allowed: a system call of another ABI (i386's `int 0x80`,
x86_64's x32) kills the process, so no second syscall table gets round a rule. The rules are
compiled by libseccomp (libseccomp2, in every Debian and Ubuntu install) through ctypes, once per
process; without it the sandbox does not start (`SeccompUnavailable`).
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import stat

ARCHITECTURES = ("x86_64", "aarch64")  # where the rules were written and tested
# Calls newer than some libseccomp still installed are named by number: the same on every
# architecture (the kernel's shared table from 424 on), whatever names libseccomp knows.
FCHMODAT2 = 452  # libseccomp < 2.5.5 has no name for it
OPENAT2 = 437  # libseccomp < 2.5.0 has no name for it
IO_URING = (425, 426, 427)  # io_uring_setup, io_uring_enter, io_uring_register (libseccomp < 2.4.2)
O_TMPFILE = getattr(os, "O_TMPFILE", 0o20200000)
MODE_BITS = (stat.S_ISUID, stat.S_ISGID)
# (system call, index of its flags argument or None, index of its mode argument)
MODE_CALLS = (
    ("chmod", None, 1),
    ("fchmod", None, 1),
    ("fchmodat", None, 2),
    (FCHMODAT2, None, 2),
    ("mknod", None, 1),
    ("mknodat", None, 2),
    ("creat", None, 1),
    ("open", 1, 2),
    ("openat", 2, 3),
)
REFUSED = ((OPENAT2, errno.ENOSYS), ("add_key", errno.EPERM), ("keyctl", errno.EPERM))
REFUSED += (("request_key", errno.EPERM), ("fallocate", errno.EOPNOTSUPP))
REFUSED += tuple((number, errno.ENOSYS) for number in IO_URING)
# Past the quota: mmap (its flags are argument 3) of a file, shared: MAP_SHARED (or MAP_SHARED_VALIDATE,
# which has its bit) without MAP_ANONYMOUS. The same values on x86_64 and aarch64.
MAP_SHARED, MAP_ANONYMOUS = 0x01, 0x20
NO_GROWTH_RULES = (("mmap", errno.EACCES, [(3, MAP_SHARED | MAP_ANONYMOUS, MAP_SHARED)]),)

# libseccomp's constants (seccomp.h)
_ACT_ALLOW = 0x7FFF0000
_ACT_KILL_PROCESS = 0x80000000
_ACT_ERRNO = 0x00050000
_FLTATR_ACT_BADARCH = 2
_CMP_MASKED_EQ = 7


class SeccompUnavailable(Exception):
    """The filter cannot be built here; the message says why."""


@functools.cache
def filter_program(grow: bool = True) -> bytes:
    """The filter as a BPF program for bwrap's `--seccomp`, built once per process (and once more for a
    workspace past its quota, `grow=False`: no shared mapping of a file either)."""
    machine = os.uname().machine
    if machine not in ARCHITECTURES:
        raise SeccompUnavailable(
            f"the sandbox's seccomp filter is written for {' and '.join(ARCHITECTURES)}, not {machine}"
        )
    lib, arg_cmp = _libseccomp()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("libseccomp could not start a filter")
    try:
        _check(lib.seccomp_attr_set(ctx, _FLTATR_ACT_BADARCH, _ACT_KILL_PROCESS), "refuse other ABIs")
        for name, error, compared in rules(grow):
            _rule(lib, arg_cmp, ctx, name, error, compared)
        import tempfile  # here, not at the top: a cycle that runs no command never builds the filter

        with tempfile.TemporaryFile() as out:
            _check(lib.seccomp_export_bpf(ctx, out.fileno()), "export the filter")
            out.seek(0)
            return out.read()
    finally:
        lib.seccomp_release(ctx)


def rules(grow: bool = True) -> list[tuple[str | int, int, list[tuple[int, int, int]]]]:
    """Every rule: (system call, the errno it gets, the (argument, mask, value) comparisons that
    must all hold for it to be refused; none: always); `grow=False`: past the quota's as well."""
    out = []
    for name, flags_arg, mode_arg in MODE_CALLS:
        creating = (os.O_CREAT, O_TMPFILE) if flags_arg is not None else (0,)
        for bit, how in itertools.product(MODE_BITS, creating):
            out.append((name, errno.EPERM, [(mode_arg, bit, bit)] + ([(flags_arg, how, how)] if how else [])))
    return out + [(name, error, []) for name, error in REFUSED] + ([] if grow else list(NO_GROWTH_RULES))


_UNKNOWN_NAME = -1  # what libseccomp answers for a name it does not know (__NR_SCMP_ERROR)


def _rule(lib, arg_cmp, ctx, name: str | int, error: int, compared: list[tuple[int, int, int]]) -> None:
    """Refuse `name` with `error` when every (argument, mask, value) comparison holds. A call this
    architecture does not have (`open` on aarch64: libseccomp gives a negative pseudo-number) needs
    no rule; a name libseccomp does not know at all stops the filter, never drops its rule."""
    number = name if isinstance(name, int) else lib.seccomp_syscall_resolve_name(name.encode())
    if number == _UNKNOWN_NAME:
        raise SeccompUnavailable(
            f"this libseccomp does not know the system call {name}, so the filter could not refuse it; "
            f"install libseccomp 2.5 or later"
        )
    if number < 0:
        return
    cmps = (arg_cmp * max(1, len(compared)))(
        *(arg_cmp(arg, _CMP_MASKED_EQ, mask, value) for arg, mask, value in compared)
    )
    _check(lib.seccomp_rule_add_array(ctx, _ACT_ERRNO | error, number, len(compared), cmps), f"add a rule for {name}")


def _check(result: int, what: str) -> None:
    if result != 0:
        raise SeccompUnavailable(f"libseccomp could not {what}: {os.strerror(-result)}")


@functools.cache
def _libseccomp():
    """libseccomp.so.2 with the prototypes used here, and its `struct scmp_arg_cmp`."""
    import ctypes

    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        raise SeccompUnavailable(
            "libseccomp is not installed (Debian and Ubuntu: apt-get install libseccomp2); without its "
            "filter a sandboxed command could leave setuid files"
        ) from None

    class ArgCmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]

    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib, ArgCmp
