/*
 * common.c -- thread-local last error and OpenMP thread control shared by
 * every nlsepy solver (see nlsepy/common.h).
 */
#include <stdarg.h>
#include <stdio.h>
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

int nlse_set_num_threads(int n)
{
    if (n < 1)
        return nlse_fail(NLSE_ERR_VALUE, "num_threads must be >= 1, got %d", n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    return NLSE_OK;
}

int nlse_get_num_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int nlse_have_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

void nlse_parallel_memcpy(void *dst, const void *src, size_t n)
{
    const size_t block = (size_t)1 << 20;
    const ptrdiff_t nb = (ptrdiff_t)((n + block - 1) / block);
#pragma omp parallel for schedule(static) if (nb > 4)
    for (ptrdiff_t b = 0; b < nb; ++b) {
        size_t off = (size_t)b * block, len = (off + block < n) ? block : n - off;
        memcpy((char *)dst + off, (const char *)src + off, len);
    }
}
