/*
 * common/instantiate.h -- a kernel template written once, made for both
 * precisions: the file named by NLSE_TEMPLATE (a *.inc written over REAL,
 * the element type, and FN(name), its functions' names) is included with
 * REAL = float, FN(name) = name_f, then with REAL = double, FN(name) =
 * name_d (the pywt pattern).
 *
 * Use: #define NLSE_TEMPLATE "../<stem>/<stem>_kernels.inc" (the path from
 * this folder), then #include "../common/instantiate.h".  NLSE_TEMPLATE is
 * undefined afterwards.  A template that needs more macros per precision
 * (dec, dipolar, mbloch) is included twice by its own file.
 */
#ifndef NLSE_TEMPLATE
#error "define NLSE_TEMPLATE (the template's path) before including instantiate.h"
#endif

#ifndef NLSE_INSTANTIATE_CAT
#define NLSE_INSTANTIATE_CAT_(a, b) a##b
#define NLSE_INSTANTIATE_CAT(a, b) NLSE_INSTANTIATE_CAT_(a, b)
#endif

#define REAL float
#define FN(name) NLSE_INSTANTIATE_CAT(name, _f)
#include NLSE_TEMPLATE
#undef FN
#undef REAL

#define REAL double
#define FN(name) NLSE_INSTANTIATE_CAT(name, _d)
#include NLSE_TEMPLATE
#undef FN
#undef REAL

#undef NLSE_TEMPLATE
