/* One io_uring operation, submitted and waited for through the raw system calls (no liburing).
 * io_uring's operations run in the kernel, out of reach of the seccomp filter of the process that
 * submitted them (IORING_OP_OPENAT takes a mode, IORING_OP_FALLOCATE reserves blocks), so the
 * sandbox refuses io_uring itself. uring_run returns the operation's result (a negative errno for
 * a failed one), or -1 with errno set when io_uring could not be set up or entered. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/io_uring.h>

static long uring_run(const struct io_uring_sqe *op) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    long ring = syscall(__NR_io_uring_setup, 1, &p);
    if (ring < 0) return -1;
    size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    size_t size = sq_size > cq_size ? sq_size : cq_size; /* one mapping holds both (IORING_FEAT_SINGLE_MMAP) */
    char *rings = mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
    struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
    if (rings == MAP_FAILED || sqes == MAP_FAILED) return -1;
    unsigned *tail = (unsigned *)(rings + p.sq_off.tail), *mask = (unsigned *)(rings + p.sq_off.ring_mask);
    ((unsigned *)(rings + p.sq_off.array))[*tail & *mask] = 0;
    sqes[0] = *op;
    __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) return -1;
    struct io_uring_cqe *cqe = (struct io_uring_cqe *)(rings + p.cq_off.cqes);
    close(ring);
    return cqe[0].res;
}
