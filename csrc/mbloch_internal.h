/*
 * mbloch_internal.h -- shared by the CPU (csrc/mbloch.c) and CUDA
 * (cuda/mbloch.cu) Maxwell-Bloch backends: parameter and array checks and
 * the band structure of the coupling of source 004, eq. 4.
 *
 * Mode l couples ground m to excited n = m + l, so excited level n sees the
 * contiguous ground range m = mb_lo_g(n) .. mb_hi_g(n) and ground level m
 * the excited range n = mb_lo_e(m) .. mb_hi_e(m) (empty when lo > hi): the
 * zero blocks of the Hamiltonian and the zero entries of its off-diagonal
 * blocks are never visited.
 */
#ifndef NLSEPY_MBLOCH_INTERNAL_H
#define NLSEPY_MBLOCH_INTERNAL_H

#include "nlsepy/mbloch.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define MB_HD __host__ __device__
#else
#define MB_HD
#endif

static inline MB_HD int mb_imax(int a, int b) { return a > b ? a : b; }
static inline MB_HD int mb_imin(int a, int b) { return a < b ? a : b; }
/* ground range of excited n */
static inline MB_HD int mb_lo_g(int n, int l_max) { return mb_imax(0, n - l_max); }
static inline MB_HD int mb_hi_g(int n, int l_min, int n_g) { return mb_imin(n_g - 1, n - l_min); }
/* excited range of ground m */
static inline MB_HD int mb_lo_e(int m, int l_min) { return mb_imax(0, m + l_min); }
static inline MB_HD int mb_hi_e(int m, int l_max, int n_e) { return mb_imin(n_e - 1, m + l_max); }

/* The arrays of nlse_mb_create: finite, weights >= 0, the right sizes
 * implied by p (named errors). */
int mb_check_arrays(const nlse_mb_params *p, const double *F, const double *detunings,
                    const double *weights, const double *psi0, const double *fields0);

/* Seconds on the monotonic clock. */
double mb_now(void);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_MBLOCH_INTERNAL_H */
