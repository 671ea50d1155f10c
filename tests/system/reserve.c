/* Tries to reserve disk space for a new file "reserved" without writing it, and says how it went:
 *     reserve CALL BYTES  ->  "CALL: result R errno E blocks B" (B: the 512-byte blocks the file holds)
 * CALL is `fallocate` (the system call) or `io_uring-fallocate` (the same operation through
 * io_uring), each with FALLOC_FL_KEEP_SIZE: the file stays 0 bytes long, so RLIMIT_FSIZE never
 * applies, and the blocks are taken at once, far faster than any write.
 * Built by tests/system/test_boundary_quota.py and run in the sandbox. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "uring.h"

static long reserve(const char *call, int fd, long long bytes) {
    if (!strcmp(call, "fallocate")) return syscall(SYS_fallocate, fd, FALLOC_FL_KEEP_SIZE, 0LL, bytes);
    if (!strcmp(call, "io_uring-fallocate")) {
        struct io_uring_sqe op;
        memset(&op, 0, sizeof op);
        op.opcode = IORING_OP_FALLOCATE;
        op.fd = fd;
        op.addr = (unsigned long long)bytes; /* io_uring's fallocate: the length in addr, the mode in len */
        op.len = FALLOC_FL_KEEP_SIZE;
        long result = uring_run(&op);
        if (result < -1) { errno = -result; return -1; }
        return result;
    }
    errno = EINVAL;
    return -1;
}

int main(int argc, char **argv) {
    struct stat st;
    if (argc != 3) return 2;
    int fd = open("reserved", O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0) { perror("open"); return 1; }
    errno = 0;
    long result = reserve(argv[1], fd, atoll(argv[2]));
    int error = result < 0 ? errno : 0;
    fstat(fd, &st);
    printf("%s: result %ld errno %d blocks %lld\n", argv[1], result < 0 ? -1L : 0L, error, (long long)st.st_blocks);
    return 0;
}
