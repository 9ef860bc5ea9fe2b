/*
 * mbloch_internal.h -- shared by the CPU (csrc/mbloch/mbloch.c) and CUDA
 * (cuda/mbloch/mbloch.cu) Maxwell-Bloch backends: parameter and array checks and
 * the band structure of the coupling of source 004, eq. 4.
 *
 * Mode l couples ground m to excited n = m + l, so excited level n sees the
 * contiguous ground range m = mbloch_lo_g(n) .. mbloch_hi_g(n) and ground level m
 * the excited range n = mbloch_lo_e(m) .. mbloch_hi_e(m) (empty when lo > hi): the
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
#define MBLOCH_HD __host__ __device__
#else
#define MBLOCH_HD
#endif

static inline MBLOCH_HD int mbloch_imax(int a, int b) { return a > b ? a : b; }
static inline MBLOCH_HD int mbloch_imin(int a, int b) { return a < b ? a : b; }
/* ground range of excited n */
static inline MBLOCH_HD int mbloch_lo_g(int n, int l_max) { return mbloch_imax(0, n - l_max); }
static inline MBLOCH_HD int mbloch_hi_g(int n, int l_min, int n_g) { return mbloch_imin(n_g - 1, n - l_min); }
/* excited range of ground m */
static inline MBLOCH_HD int mbloch_lo_e(int m, int l_min) { return mbloch_imax(0, m + l_min); }
static inline MBLOCH_HD int mbloch_hi_e(int m, int l_max, int n_e) { return mbloch_imin(n_e - 1, m + l_max); }

/* The arrays of nlse_mbloch_create: finite, weights >= 0, the right sizes
 * implied by p (named errors). */
int mbloch_check_arrays(const nlse_mbloch_params *p, const double *F, const double *detunings,
                    const double *weights, const double *psi0, const double *fields0);

/* The dissipative part of an open solver (nlse_mbloch_set_open), shared by
 * the CPU and CUDA backends: d rho_ij/dt gets -damp[i n + j] rho_ij, and
 * d rho_ii/dt gets sum_q feed_rate[q] rho_{f f}, f = feed_from[q], q =
 * feed_off[i] .. feed_off[i + 1] - 1 (the channels into i, in input order). */
typedef struct {
    int nlev, n_decay;
    double *damp;      /* n^2: (G_i + G_j) / 2 + gam_ij off the diagonal, G_i on it */
    int *feed_off;     /* n + 1 */
    int *feed_from;    /* n_decay */
    double *feed_rate; /* n_decay */
} mbloch_open_tab;

/* Check o against p (named errors: rates, level indices, arrays) and build
 * the tables; mbloch_open_free releases them (also after a failure). */
int mbloch_open_build(const nlse_mbloch_params *p, const nlse_mbloch_open *o, mbloch_open_tab *t);
void mbloch_open_free(mbloch_open_tab *t);

/* Seconds on the monotonic clock. */
double mbloch_now(void);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_MBLOCH_INTERNAL_H */
