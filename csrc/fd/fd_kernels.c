/*
 * fd_kernels.c -- instantiates the RK4 + CD/2SHOC kernels of fd_kernels.inc
 * (NLSEmagic, section 3) for float and double.
 */
#include <math.h>
#include "fd_internal.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define FN(name) CAT(name, _f)
#include "fd_kernels.inc"
#undef FN
#undef REAL

#define REAL double
#define FN(name) CAT(name, _d)
#include "fd_kernels.inc"
#undef FN
#undef REAL
