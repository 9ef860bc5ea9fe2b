/*
 * dipolar_params.h -- what every backend of the split-step solver (nlse_dipolar)
 * shares (csrc/dipolar/dipolar_params.c): parameter checks with named errors, the
 * internal 3D layout of a geometry, the Crank-Nicolson recursion
 * coefficients (Loncar, thesis, eqs. 2.29-2.34 and 2.42), the dipolar
 * kernels (eqs. 2.13, 2.15, 2.18, 2.20 and the 3D cutoff kernel) and the
 * moving obstacle of eq. 9.1.
 */
#ifndef NLSEPY_DIPOLAR_PARAMS_H
#define NLSEPY_DIPOLAR_PARAMS_H

#include <stddef.h>
#include "nlsepy/dipolar.h"

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
    int rq[2];  /* internal axes of x and y, the rotating frame's plane (-1: none) */
} dipolar_layout;

const char *dipolar_geometry_name(int geometry);
int dipolar_check_params(const nlse_dipolar_params *p);
void dipolar_make_layout(const nlse_dipolar_params *p, dipolar_layout *L);
/* Even shape and a valid kscale, which the dipolar term needs. */
int dipolar_check_dipolar(const nlse_dipolar_params *p);

/* Kernel value at r2c frequency (i, j, k) of the internal grid. */
double dipolar_kernel_value(const nlse_dipolar_params *p, const dipolar_layout *L, size_t i, size_t j, size_t k);

/* Crank-Nicolson coefficients of one axis for r = dt kin / h^2: imaginary
 * time alpha_r, gamma_r (n values each), real time alpha_c, gamma_c (2n,
 * interleaved), and the scalars A, A0r of both. */
typedef struct {
    double A_r, A0r_r;
    double A_c[2], A0r_c[2];
} dipolar_cn_scalars;
void dipolar_cn_coefficients(double r, size_t n, double *alpha_r, double *gamma_r, double *alpha_c,
                        double *gamma_c, dipolar_cn_scalars *sc);

/* One line of a rotating sweep (dipolar_params.c): r = dt kin / h^2, sd =
 * dt c / (4 h) for the line's drift c; am, ap (one complex each), alpha,
 * gamma (n complex values), interleaved. */
void dipolar_rot_line(double r, double sd, int real_time, size_t n, double *am, double *ap,
                      double *alpha, double *gamma);
/* A rotation coefficient w (finite; nonzero only in the 3d and 2d-xy geometries). */
int dipolar_check_rotation(const nlse_dipolar_params *p, double w);

/* x_i = (i - n/2) h and the Simpson weight of point i (times h/3). */
double dipolar_coord(size_t i, size_t n, double h);
double dipolar_simpson(size_t i, size_t n, double h);

int dipolar_check_obstacle(const nlse_dipolar_obstacle *o, int ndim);
double dipolar_obst_centre(const nlse_dipolar_obstacle *o, double t);
double dipolar_obst_amp(const nlse_dipolar_obstacle *o, double t);

int dipolar_check_step(int mode, long n, double t0, double dg, double dgdd);
/* A recording request of a call of n steps (NULL: none). */
int dipolar_check_record(const nlse_dipolar_record *rec, long n);
/* One row of recorded moments (nlse_dipolar_record) from the Simpson norm
 * `nrm` of the state after a step and the sums T[q] = int |Psi|^2 x_q^2 of
 * internal axis q; `imag`: the row of the normalised state. */
void dipolar_record_row(double *row, double nrm, const double *T, int off, int imag);
int dipolar_check_couplings(double g, double gdd);
int dipolar_check_dt(double dt);
/* mu, energy and their parts (nlse_dipolar_obs) from the integrals both
 * backends sum: kin = k int |grad Psi|^2, pot = int V |Psi|^2, cont = g int
 * |Psi|^4, dd = gdd int Phi |Psi|^2, qf = q int |Psi|^5 and lz = int Psi*
 * L_z Psi, with the rotation w.  Without the Lee-Huang-Yang term (qf = 0)
 * mu and energy are the sums they always were, bit for bit. */
void dipolar_obs_energies(double kin, double pot, double cont, double dd, double qf, double lz,
                          double w, nlse_dipolar_obs *o);
/* The Lee-Huang-Yang coefficient q of q |Psi|^3 Psi (finite, >= 0). */
int dipolar_check_lhy(double q);
/* A slab of a distributed run (nlse_dipolar_slab_create, either backend):
 * the 3d geometry, rank in 0..size-1, every rank 2 x rows or more, the
 * ranks' x and y rows tiling the grid. */
int dipolar_check_slab(const nlse_dipolar_params *p, int rank, int size, const size_t *xcount,
                       const size_t *ycount);
/* The slab layout of `size` ranks from their x and y row counts, as four
 * tables of `size` entries one after the other in t: x counts, x starts,
 * y counts, y starts. */
void dipolar_slab_layout(size_t *t, int size, const size_t *xcount, const size_t *ycount);
/* First non-finite value of `count` REALs (dtype's precision) -> error. */
int dipolar_check_finite(const void *a, size_t count, int dtype, int per_point, const char *name);

/* The substructured x solve of rank `rank` of P, whose slabs hold xc[q]
 * rows (dipolar_spike.c): r = dt kin / h0^2; sv, sw (2 xc[rank] doubles):
 * the local system's responses to a unit bottom and top value on the own
 * rows, complex; kv, kw (4 P doubles): the rows of the coupling system's
 * inverse that give E_(rank-1) and F_(rank+1), complex, the unknowns in the
 * order F_0, E_0, F_1, E_1, ... */
int dipolar_spike_setup(double r, int real_time, int P, const size_t *xc, int rank, double *sv,
                        double *sw, double *kv, double *kw);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_DIPOLAR_PARAMS_H */
