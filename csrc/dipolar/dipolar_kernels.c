/*
 * dipolar_kernels.c -- instantiates the split-step Crank-Nicolson kernels of
 * dipolar_kernels.inc (Loncar, thesis, sections 2.3-2.4) for float and double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fftw3.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "dipolar_internal.h"
#include "dipolar_vmath.h"

/* Subnormal numbers (the far tails of a Gaussian, squared, in single
 * precision) slow x86 arithmetic by two orders of magnitude; the stepping
 * kernels flush them to zero on each thread for their duration.  Values
 * below 1e-38 (float) or 1e-308 (double) carry no physics here. */
#if defined(__SSE2__) || defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#define DIPOLAR_FTZ_BEGIN const unsigned int dipolar_csr_ = _mm_getcsr(); _mm_setcsr(dipolar_csr_ | 0x8040u);
#define DIPOLAR_FTZ_END _mm_setcsr(dipolar_csr_);
#else
#define DIPOLAR_FTZ_BEGIN
#define DIPOLAR_FTZ_END
#endif

/* FFTW's threads, set up once per process (dipolar_internal.h). */
#ifdef NLSEPY_FFTW_THREADED
static int fftw_state = 0;
#endif

int dipolar_fftw_threads_init(void)
{
#ifdef NLSEPY_FFTW_THREADED
    int ok;
#pragma omp critical(nlsepy_fftw)
    {
        if (fftw_state == 0) {
            fftw_state = (fftw_init_threads() && fftwf_init_threads()) ? 1 : -1;
            if (fftw_state == 1) {
                fftw_make_planner_thread_safe();
                fftwf_make_planner_thread_safe();
            }
        }
        ok = fftw_state == 1;
    }
    return ok;
#else
    return 1;
#endif
}

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define FN(name) CAT(name, _f)
#define FFTW(name) CAT(fftwf_, name)
#define EXPR vm_exp_f
#define SINCOSR vm_sincos_f
#include "dipolar_kernels.inc"
#undef SINCOSR
#undef EXPR
#undef FFTW
#undef FN
#undef REAL

#define REAL double
#define FN(name) CAT(name, _d)
#define FFTW(name) CAT(fftw_, name)
#define EXPR vm_exp_d
#define SINCOSR vm_sincos_d
#include "dipolar_kernels.inc"
#undef SINCOSR
#undef EXPR
#undef FFTW
#undef FN
#undef REAL
