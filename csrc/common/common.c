/*
 * common.c -- thread-local last error, the checks and host-memory helpers
 * every solver's entry points share, and OpenMP thread control (see
 * nlsepy/common.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nlsepy/common.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define NLSE_THREAD_LOCAL __thread
#elif defined(_MSC_VER)
#define NLSE_THREAD_LOCAL __declspec(thread)
#else
#define NLSE_THREAD_LOCAL _Thread_local
#endif

static NLSE_THREAD_LOCAL char last_error[512];

const char *nlse_last_error(void) { return last_error; }

void nlse_clear_error(void) { last_error[0] = '\0'; }

int nlse_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

int nlse_check_steps(const void *s, long n, long *done, const char *who, const char *what)
{
    if (done)
        *done = 0;
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "%s: NULL solver", who);
    if (n < 0)
        return nlse_fail(NLSE_ERR_VALUE, "%s must be >= 0, got %ld", what, n);
    return NLSE_OK;
}

int nlse_drop(void **array)
{
    free(*array);
    *array = NULL;
    return NLSE_OK;
}

void nlse_free_all(void *const *arrays, size_t n)
{
    for (size_t q = 0; q < n; ++q)
        free(arrays[q]);
}

/* The thread count of every parallel region of the kernels, process-wide:
 * OpenMP's own setting (omp_set_num_threads) belongs to the calling OS
 * thread only, so each region names this count (NLSE_THREADS).  0: not set,
 * OpenMP's default (OMP_NUM_THREADS or the processors). */
static volatile int nlse_threads = 0;

int nlse_max_threads(void)
{
#ifdef _OPENMP
    const int procs = omp_get_num_procs();
#else
    const int procs = 1;
#endif
    return procs > 0 ? 4 * procs : 4;
}

int nlse_set_num_threads(int n)
{
    const int most = nlse_max_threads();
    if (n < 1 || n > most)
        return nlse_fail(NLSE_ERR_VALUE,
                         "num_threads must be in [1, %d] (4 per processor of this machine), got %d",
                         most, n);
    nlse_threads = n;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    return NLSE_OK;
}

int nlse_get_num_threads(void)
{
#ifdef _OPENMP
    const int n = nlse_threads;
    return n > 0 ? n : omp_get_max_threads();
#else
    return 1;
#endif
}

int nlse_threads_in_region(void)
{
    int n = 1;
#pragma omp parallel NLSE_THREADS
    {
#ifdef _OPENMP
#pragma omp single
        n = omp_get_num_threads();
#endif
    }
    return n;
}

int nlse_have_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

void nlse_sum_parts(const double *part, int nparts, int K, double *sum)
{
    for (int k = 0; k < K; ++k)
        sum[k] = 0.0;
    for (int p = 0; p < nparts; ++p)
        for (int k = 0; k < K; ++k)
            sum[k] += part[(size_t)p * K + k];
}

void nlse_parallel_memcpy(void *dst, const void *src, size_t n)
{
    const size_t block = (size_t)1 << 20;
    const ptrdiff_t nb = (ptrdiff_t)((n + block - 1) / block);
#pragma omp parallel for NLSE_THREADS schedule(static) if (nb > 4)
    for (ptrdiff_t b = 0; b < nb; ++b) {
        size_t off = (size_t)b * block, len = (off + block < n) ? block : n - off;
        memcpy((char *)dst + off, (const char *)src + off, len);
    }
}
