/* Tries to make a set-user-ID, set-group-ID file named "made" with one system call, called
 * directly (no C library wrapper can choose another call), and says how it went:
 *     setid CALL  ->  "CALL: result R errno E mode M" (M: the file's permission bits, or "none")
 * CALL is one of the names in attempt(); a call this architecture lacks prints "CALL: absent".
 * On x86_64, `i386-chmod` and `x32-chmod` make the call through the other ABIs (int 0x80, and the
 * x32 bit): the filter knows only the native one, so the process must be killed (SIGSYS).
 * `io_uring-openat` asks io_uring to make the file: its operations run past the filter, so
 * io_uring itself must be refused.
 * Built by tests/system/test_boundary_setuid.py (with -no-pie: int 0x80 takes 32-bit pointers)
 * and run in the sandbox. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "uring.h"

#define MODE 06755
#define SYS_FCHMODAT2 452
#define SYS_OPENAT2 437

struct open_how_v0 { unsigned long long flags, mode, resolve; };

static long plain(void) { /* an ordinary file to change the mode of */
    int fd = open("made", O_CREAT | O_WRONLY, 0644);
    return fd < 0 ? -1 : close(fd);
}

static long uring_openat(void) { /* a ring's result is a negative errno: as a call's */
    struct io_uring_sqe op;
    memset(&op, 0, sizeof op);
    op.opcode = IORING_OP_OPENAT;
    op.fd = AT_FDCWD;
    op.addr = (unsigned long)"made";
    op.len = MODE;
    op.open_flags = O_CREAT | O_WRONLY;
    long result = uring_run(&op);
    if (result < -1) { errno = -result; return -1; }
    return result;
}

static long tmpfile_linked(long fd) { /* an O_TMPFILE file becomes "made" */
    char path[64];
    if (fd < 0) return fd;
    snprintf(path, sizeof path, "/proc/self/fd/%ld", fd);
    return linkat(AT_FDCWD, path, AT_FDCWD, "made", AT_SYMLINK_FOLLOW);
}

#if defined(__x86_64__)
static const char made_name[] = "made"; /* below 4 GiB in a program built with -no-pie */

static long int80(long nr, const char *path, long mode) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"((long)path), "c"(mode) : "memory");
    if (ret < 0) { errno = -ret; return -1; }
    return ret;
}
#endif

static long attempt(const char *call) {
    struct open_how_v0 how = {O_CREAT | O_WRONLY, MODE, 0};
    if (!strcmp(call, "fchmod")) { plain(); int fd = open("made", O_RDONLY); return syscall(SYS_fchmod, fd, MODE); }
    if (!strcmp(call, "fchmodat")) { plain(); return syscall(SYS_fchmodat, AT_FDCWD, "made", MODE); }
    if (!strcmp(call, "fchmodat2")) { plain(); return syscall(SYS_FCHMODAT2, AT_FDCWD, "made", MODE, 0); }
    if (!strcmp(call, "openat")) return syscall(SYS_openat, AT_FDCWD, "made", O_CREAT | O_WRONLY, MODE);
    if (!strcmp(call, "openat-tmpfile"))
        return tmpfile_linked(syscall(SYS_openat, AT_FDCWD, ".", O_TMPFILE | O_WRONLY, MODE));
    if (!strcmp(call, "openat2")) return syscall(SYS_OPENAT2, AT_FDCWD, "made", &how, sizeof how);
    if (!strcmp(call, "io_uring-openat")) return uring_openat();
    if (!strcmp(call, "mknodat")) return syscall(SYS_mknodat, AT_FDCWD, "made", S_IFREG | MODE, 0);
#if defined(__x86_64__)
    if (!strcmp(call, "i386-chmod")) { plain(); return int80(15, made_name, MODE); }
    if (!strcmp(call, "x32-chmod")) { plain(); return syscall(0x40000000 | SYS_chmod, "made", MODE); }
#endif
#ifdef SYS_chmod
    if (!strcmp(call, "chmod")) { plain(); return syscall(SYS_chmod, "made", MODE); }
    if (!strcmp(call, "open")) return syscall(SYS_open, "made", O_CREAT | O_WRONLY, MODE);
    if (!strcmp(call, "open-tmpfile")) return tmpfile_linked(syscall(SYS_open, ".", O_TMPFILE | O_WRONLY, MODE));
    if (!strcmp(call, "creat")) return syscall(SYS_creat, "made", MODE);
    if (!strcmp(call, "mknod")) return syscall(SYS_mknod, "made", S_IFREG | MODE, 0);
#endif
    return -2;
}

int main(int argc, char **argv) {
    struct stat st;
    long result;
    if (argc != 2) return 2;
    unlink("made");
    errno = 0;
    result = attempt(argv[1]);
    if (result == -2) { printf("%s: absent\n", argv[1]); return 0; }
    printf("%s: result %ld errno %d mode ", argv[1], result < 0 ? -1L : 0L, result < 0 ? errno : 0);
    if (stat("made", &st) == 0) printf("%o\n", st.st_mode & 07777); else printf("none\n");
    return 0;
}
