/*
 * ss_params.h -- what every backend of the split-step solver (nlse_ss)
 * shares (csrc/ss_params.c): parameter checks with named errors, the
 * internal 3D layout of a geometry, the Crank-Nicolson recursion
 * coefficients (Loncar, thesis, eqs. 2.29-2.34 and 2.42), the dipolar
 * kernels (eqs. 2.13, 2.15, 2.18, 2.20 and the 3D cutoff kernel) and the
 * moving obstacle of eq. 9.1.
 */
#ifndef NLSEPY_SS_PARAMS_H
#define NLSEPY_SS_PARAMS_H

#include <stddef.h>
#include "nlsepy/splitstep.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Internal layout: every grid is (n0, n1, n2), last axis contiguous; solver
 * axis a is internal axis a + off with off = 3 - ndim (padded axes: n = 1,
 * h = 1). */
typedef struct {
    int ndim, off;
    size_t n[3];
    double h[3];
    size_t N;
} ss_layout;

const char *ss_geometry_name(int geometry);
int ss_check_params(const nlse_ss_params *p);
void ss_make_layout(const nlse_ss_params *p, ss_layout *L);
/* Even shape and a valid kscale, which the dipolar term needs. */
int ss_check_dipolar(const nlse_ss_params *p);

/* Kernel value at r2c frequency (i, j, k) of the internal grid. */
double ss_kernel_value(const nlse_ss_params *p, const ss_layout *L, size_t i, size_t j, size_t k);

/* Crank-Nicolson coefficients of one axis for r = dt kin / h^2: imaginary
 * time alpha_r, gamma_r (n values each), real time alpha_c, gamma_c (2n,
 * interleaved), and the scalars A, A0r of both. */
typedef struct {
    double A_r, A0r_r;
    double A_c[2], A0r_c[2];
} ss_cn_scalars;
void ss_cn_coefficients(double r, size_t n, double *alpha_r, double *gamma_r, double *alpha_c,
                        double *gamma_c, ss_cn_scalars *sc);

/* x_i = (i - n/2) h and the Simpson weight of point i (times h/3). */
double ss_coord(size_t i, size_t n, double h);
double ss_simpson(size_t i, size_t n, double h);

int ss_check_obstacle(const nlse_ss_obstacle *o, int ndim);
double ss_obst_centre(const nlse_ss_obstacle *o, double t);
double ss_obst_amp(const nlse_ss_obstacle *o, double t);

int ss_check_step(int mode, long n, double t0, double dg, double dgdd);
int ss_check_couplings(double g, double gdd);
int ss_check_dt(double dt);
/* First non-finite value of `count` REALs (dtype's precision) -> error. */
int ss_check_finite(const void *a, size_t count, int dtype, int per_point, const char *name);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_SS_PARAMS_H */
