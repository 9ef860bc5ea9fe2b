/*
 * fd_kernels.c -- instantiates the RK4 + CD/2SHOC kernels of fd_kernels.inc
 * (NLSEmagic, section 3) and the fused step of fd_fused.inc for float and double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "fd_internal.h"

#define NLSE_TEMPLATE "../fd/fd_kernels.inc"
#include "../common/instantiate.h"

/* the fused step (one pass per RK4 step), over the point formulas above */
#define NLSE_TEMPLATE "../fd/fd_fused.inc"
#include "../common/instantiate.h"
