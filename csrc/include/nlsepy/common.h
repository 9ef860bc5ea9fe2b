/*
 * nlsepy/common.h -- conventions shared by every nlsepy solver.
 *
 * Status codes returned by every entry point, the thread-local last-error
 * message, element types, and OpenMP thread control.  Complex arrays are
 * interleaved (re, im) pairs, the memory layout of NumPy complex64/complex128
 * and of C99 float/double _Complex; real arrays are plain float/double.
 * Arrays are C ordered: the last axis is contiguous.
 */
#ifndef NLSEPY_COMMON_H
#define NLSEPY_COMMON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (0 = success). */
enum nlse_status {
    NLSE_OK = 0,
    NLSE_ERR_VALUE = 1,    /* an argument has a bad value            */
    NLSE_ERR_TYPE = 2,     /* an argument has a bad type or dtype    */
    NLSE_ERR_NOMEM = 3,    /* host allocation failed                 */
    NLSE_ERR_BLOWUP = 4,   /* the state became non-finite            */
    NLSE_ERR_BACKEND = 5,  /* device missing, device memory, launch  */
    NLSE_ERR_INTERNAL = 6  /* anything else                          */
};

/* Element precision of a solver's state and arithmetic. */
enum nlse_dtype {
    NLSE_COMPLEX64 = 0,  /* float re/im pairs  */
    NLSE_COMPLEX128 = 1  /* double re/im pairs */
};

/* Message describing the last failure on the calling thread ("" if none). */
const char *nlse_last_error(void);

/* Record a failure message (printf-style) and return `code`. */
int nlse_fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clear the calling thread's last error. */
void nlse_clear_error(void);

/* The checks that start a run of n steps: *done = 0 (when done is not
 * NULL), then NLSE_ERR_VALUE for a NULL solver s ("<who>: NULL solver") or
 * n < 0 ("<what> must be >= 0, got n"); else NLSE_OK. */
int nlse_check_steps(const void *s, long n, long *done, const char *who, const char *what);

/* Free a solver's optional host array (a potential set to none) and clear
 * its pointer; returns NLSE_OK. */
int nlse_drop(void **array);

/* Free each of the `n` host arrays of `arrays` (NULL ones too): a solver's
 * teardown. */
void nlse_free_all(void *const *arrays, size_t n);

/* OpenMP threads used by the CPU kernels (1 when built without OpenMP),
 * process-wide: the setting holds for every OS thread that calls nlsepy.
 * nlse_set_num_threads accepts 1 .. nlse_max_threads() (4 per processor). */
int nlse_set_num_threads(int n);
int nlse_get_num_threads(void);
int nlse_max_threads(void);

/* Threads a parallel region of the kernels runs on now, from the calling
 * thread (what the setting above gives; for tests). */
int nlse_threads_in_region(void);

/* The clause every `omp parallel` of the kernels carries. */
#define NLSE_THREADS num_threads(nlse_get_num_threads())

/* memcpy split over the OpenMP threads (large host copies, e.g. frames). */
void nlse_parallel_memcpy(void *dst, const void *src, size_t n);

/* 1 when the CPU kernels were compiled with OpenMP. */
int nlse_have_openmp(void);

/* Sums in a fixed order, the same bits for any number of threads (an OpenMP
 * reduction adds the threads' sums in the order they finish, which differs
 * from run to run beyond two threads): the range [0, n) is cut into
 * nlse_sum_nparts(n) parts of nlse_sum_part_len(n) items (bounds that depend
 * on n alone, at most NLSE_SUM_PARTS), a kernel sums each part in order into
 * part[p, k] = part[p * K + k] (the parts in parallel) and
 * nlse_sum_parts adds them up in order into sum[k], k < K. */
#define NLSE_SUM_PARTS 1024
static inline size_t nlse_sum_part_len(size_t n)
{
    return n ? (n + NLSE_SUM_PARTS - 1) / NLSE_SUM_PARTS : 1;
}
static inline int nlse_sum_nparts(size_t n)
{
    return (int)((n + nlse_sum_part_len(n) - 1) / nlse_sum_part_len(n));
}
void nlse_sum_parts(const double *part, int nparts, int K, double *sum);

/*
 * Reductions over the processes of a distributed run.  The C core knows no
 * MPI: a solver that is one part of a distributed run is handed this table
 * (by the optional `_mpi` extension, over an MPI communicator) and calls it
 * where a sum over the whole system is needed (the Maxwell-Bloch
 * polarisation, the DEC imaginary-time norm).  Each function works in place
 * on n doubles, gives the same bits on every process and adds the
 * processes' parts in rank order (results do not depend on timing), and
 * returns an nlse_status.  A solver without a table (NULL) is the whole
 * system.
 */
typedef struct nlse_comm {
    void *ctx;
    int (*sum)(void *ctx, double *x, size_t n);
    int (*max)(void *ctx, double *x, size_t n);
    /* All-to-all of blocks in host memory: rank r gets scount[r] items of
     * `item` bytes from send + sdispl[r] items, and this rank's block from
     * rank r lands at recv + rdispl[r] items (rcount[r] items). */
    int (*alltoallv)(void *ctx, size_t item, const void *send, const size_t *scount,
                     const size_t *sdispl, void *recv, const size_t *rcount, const size_t *rdispl);
    /* A halo swap with the neighbours along the distributed axis, started
     * and finished apart so that work overlaps it (source 001, section
     * 4.2): halo_start posts the receives of `bytes` bytes into recv_lo
     * (from rank - 1) and recv_hi (from rank + 1) and sends send_lo to
     * rank - 1 and send_hi to rank + 1, ranks counted modulo the size (the
     * periodic wrap); NULL on a side: no neighbour there.  halo_progress
     * lets the library move the messages while the caller computes;
     * halo_finish waits for them.  NULL members: no such swap (the caller
     * exchanges halos itself). */
    int (*halo_start)(void *ctx, const void *send_lo, void *recv_lo, const void *send_hi,
                      void *recv_hi, size_t bytes);
    int (*halo_progress)(void *ctx);
    int (*halo_finish)(void *ctx);
} nlse_comm;

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_COMMON_H */
