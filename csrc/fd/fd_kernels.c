/*
 * fd_kernels.c -- instantiates the RK4 + CD/2SHOC kernels of fd_kernels.inc
 * (NLSEmagic, section 3) for float and double.
 */
#include <math.h>
#include "fd_internal.h"

#define NLSE_TEMPLATE "../fd/fd_kernels.inc"
#include "../common/instantiate.h"
