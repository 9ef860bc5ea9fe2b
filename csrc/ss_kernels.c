/*
 * ss_kernels.c -- instantiates the split-step Crank-Nicolson kernels of
 * ss_kernels.inc (Loncar, thesis, sections 2.3-2.4) for float and double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fftw3.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "ss_internal.h"

/* accumulators of the observables */
enum { OQ_NORM, OQ_SUM, OQ_KIN, OQ_POT, OQ_INT, OQ_DD, OQ_X0, OQ_X1, OQ_X2, OQ_KMOD, OQ_N };

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define FN(name) CAT(name, _f)
#define FFTW(name) CAT(fftwf_, name)
#define EXPR expf
#define SINR sinf
#define COSR cosf
#include "ss_kernels.inc"
#undef COSR
#undef SINR
#undef EXPR
#undef FFTW
#undef FN
#undef REAL

#define REAL double
#define FN(name) CAT(name, _d)
#define FFTW(name) CAT(fftw_, name)
#define EXPR exp
#define SINR sin
#define COSR cos
#include "ss_kernels.inc"
#undef COSR
#undef SINR
#undef EXPR
#undef FFTW
#undef FN
#undef REAL
