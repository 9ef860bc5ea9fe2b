/*
 * nlsepy/mbloch.h -- Maxwell-Bloch propagation through an inhomogeneously
 * broadened ensemble of multi-level atoms (Demeter, source 004, eqs. 1-6,
 * algorithms 1-2).
 *
 * Atoms D = 0 .. N_Delta-1 with detuning Delta_D and weight w_D, each with
 * n_g ground amplitudes a_m and n_e excited amplitudes b_n (psi = (a, b),
 * n_lev = n_g + n_e), driven by the field modes eps_l, l = l_min .. l_max
 * (N_F = l_max - l_min + 1), on the time grid t_k = k h_t, k = 0 .. n_t-1,
 * in retarded time.  Fields in Rabi-frequency units (docs/physics.md section 5):
 *
 *   d a_m/dt = i (m (kappa_g - delta) + Delta_D) a_m
 *              + (i/2) sum_l conj(eps_l) F[m][m+l] b_{m+l}          (eq. 4)
 *   d b_n/dt = i n (kappa_e - delta) b_n + (i/2) sum_l eps_l F[n-l][n] a_{n-l}
 *   P_l      = beta sum_D w_D sum_m F[m][m+l] conj(a_m) b_{m+l}      (eq. 6)
 *   d eps_l/dz = i P_l                                              (eq. 2)
 *
 * The scheme is algorithm 1: at each z_j every atom is stepped over the
 * whole time grid by the RK4 of algorithm 2 (the midpoint stages use the
 * mean of the coupling at t_{k-1} and t_k), starting from the initial
 * state; the polarisation is reduced over atoms; the fields advance by
 * Adams-Bashforth 2 in z, the first step z_0 -> z_1 by euler_substeps
 * explicit Euler steps of h_z / euler_substeps (the atoms solved at each).
 *
 * Complex arrays cross the API as interleaved double pairs whatever the
 * working precision: fields and polarisations (n_t, N_F), initial states
 * (N_Delta, n_lev), populations (n_t, n_lev) real.
 */
#ifndef NLSEPY_MBLOCH_H
#define NLSEPY_MBLOCH_H

#include <stddef.h>
#include "nlsepy/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nlse_mbloch_params {
    int n_g, n_e;          /* ground and excited levels, >= 1                 */
    int l_min, l_max;      /* the mode set, l_min <= l_max; mode l couples
                              ground m to excited m + l                       */
    int n_atoms;           /* N_Delta >= 1                                    */
    int n_t;               /* time grid points >= 2                           */
    double h_t, h_z;       /* steps, finite and > 0                           */
    double beta;           /* coupling constant, finite                       */
    double kappa_g, kappa_e, delta; /* level and mode spacings, finite        */
    int euler_substeps;    /* >= 1                                            */
    int dtype;             /* NLSE_COMPLEX64 (float) or NLSE_COMPLEX128       */
} nlse_mbloch_params;

typedef struct nlse_mbloch nlse_mbloch;

/* Check p without allocating (named errors; the checks of nlse_mbloch_create). */
int nlse_mbloch_check_params(const nlse_mbloch_params *p);

/* Validate and allocate.  F: n_g * n_e reals, F[m * n_e + n], finite.
 * detunings, weights: n_atoms reals (finite; weights >= 0).  psi0:
 * 2 * n_atoms * n_lev doubles (every atom's initial state, finite).
 * fields0: 2 * n_t * N_F doubles, the input fields eps_l(0, t_k) at
 * [k * N_F + (l - l_min)], finite.  The solver starts at z index 0. */
int nlse_mbloch_create(const nlse_mbloch_params *p, const double *F, const double *detunings,
                   const double *weights, const double *psi0, const double *fields0, nlse_mbloch **out);
void nlse_mbloch_destroy(nlse_mbloch *s);

/* Solve every atom over the time grid at the current z (algorithm 1, lines
 * 2-7) and keep the polarisation; with want_pop also the populations
 * sum_D w_D |psi_i^D(t_k)|^2.  Does not move in z. */
int nlse_mbloch_atoms(nlse_mbloch *s, int want_pop);

/* One z step z_j -> z_{j+1}: the atoms at z_j (as nlse_mbloch_atoms, so the
 * populations and polarisation of z_j are kept), then the fields by AB2,
 * or by the Euler start when j = 0.  NLSE_ERR_BLOWUP when a field or
 * polarisation becomes non-finite (the fields of z_j are kept). */
int nlse_mbloch_step(nlse_mbloch *s, int want_pop);

/* n >= 0 z steps without populations: the fields, polarisation and norm
 * monitor n calls of nlse_mbloch_step(s, 0) would give, bit for bit.  The
 * CUDA tensor-core kernel advances up to nlse_mbloch_pipeline(s) z steps in
 * one launch (slice j + 1 follows slice j along the time grid).  A
 * blow-up reports the z step of nlse_mbloch_step and keeps the fields before
 * it. */
int nlse_mbloch_steps(nlse_mbloch *s, int n);

/* z steps one launch can hold (1 on the CPU and for the plain CUDA kernel). */
int nlse_mbloch_pipeline(const nlse_mbloch *s);

/* Current fields (2 n_t N_F doubles), the polarisation of the last atom
 * solve (2 n_t N_F), the populations of the last atom solve that asked for
 * them (n_t n_lev; zeros before any). */
int nlse_mbloch_get_fields(const nlse_mbloch *s, double *out);
int nlse_mbloch_get_polarisation(const nlse_mbloch *s, double *out);
int nlse_mbloch_get_populations(const nlse_mbloch *s, double *out);

/* Open systems (docs/models/mbloch.md, "Open systems"): the atoms become
 * density matrices rho (n_lev x n_lev, rho_ij with i, j over a then b)
 * obeying the Lindblad master equation in the units of eq. 4,
 *
 *   d rho/dt = i [H_D, rho] + sum_c G_c (rho_ff |t><t| - {|f><f|, rho} / 2)
 *              - sum_{i != j} gam_ij rho_ij |i><j|
 *
 * H_D the Hermitian matrix of eq. 4 (d psi/dt = i H_D psi) with the diagonal
 * of atom D plus shift[D n_lev + i] (Doppler level shifts, NULL: none); the
 * channels c move population from level f = decay_from[c] to t =
 * decay_to[c] at rate G_c = decay_rate[c] >= 0; gam (n_lev x n_lev,
 * symmetric, >= 0, diagonal ignored; NULL: none) the pure dephasing of each
 * coherence.  rho0: every atom's initial density matrix (n_atoms n_lev^2
 * complex, Hermitian, trace 1).  The polarisation becomes
 * P_l = beta sum_D w_D sum_m F[m][m+l] rho_{b_{m+l}, a_m}; populations are
 * the diagonal of sum_D w_D rho_D; the norm monitor is |Tr rho - 1|.  The
 * same RK4 (algorithm 2) steps rho.  Call before the first atom solve. */
typedef struct nlse_mbloch_open {
    int n_decay;
    const int *decay_from, *decay_to;
    const double *decay_rate;
    const double *gam;     /* n_lev^2 or NULL */
    const double *shift;   /* n_atoms n_lev or NULL */
    const double *rho0;    /* 2 n_atoms n_lev^2 */
} nlse_mbloch_open;

int nlse_mbloch_set_open(nlse_mbloch *s, const nlse_mbloch_open *o);

/* The ensemble density matrix sum_D w_D rho_D(t_k) of the last atom solve
 * that asked for populations (2 n_t n_lev^2 doubles, [k][i][j]); open
 * solvers only. */
int nlse_mbloch_get_density(const nlse_mbloch *s, double *out);

/* Make s one part of a distributed run (c != NULL) or the whole system
 * (c == NULL, the default).  Each process creates its solver with its own
 * atoms (a contiguous block of the ensemble: their detunings, weights and
 * initial states) and the same fields; after every atom solve (each z step,
 * each Euler sub-step of the start, nlse_mbloch_atoms) the solver adds the
 * processes' polarisations (and populations, when asked for) with one
 * c->sum and takes the maximum of the norm deviation with one c->max, from
 * the calling thread, before the fields advance; the fields, polarisation,
 * populations, norm deviation and every error are then the same on every
 * process.  Every process must make the same calls in the same order.  A
 * process whose atom solve fails before the reduction still takes part in
 * it with NaN (the others then report a blow-up).  The table must outlive
 * the solver or the next call of this function.  On CUDA a distributed
 * solver runs one z step a launch (nlse_mbloch_pipeline gives 1). */
int nlse_mbloch_set_comm(nlse_mbloch *s, const nlse_comm *c);

/* z index j of the current fields (z = j h_z). */
long nlse_mbloch_z_index(const nlse_mbloch *s);

/* max over every atom solve so far of | |psi^D(t_k)|^2 - 1 |. */
double nlse_mbloch_norm_deviation(const nlse_mbloch *s);

/* Seconds the last nlse_mbloch_step or nlse_mbloch_atoms took (CUDA events on the
 * device, the wall clock on the CPU). */
double nlse_mbloch_last_seconds(const nlse_mbloch *s);

/* Nonzero coupling entries: pairs (m, n) with l_min <= n - m <= l_max. */
long nlse_mbloch_couplings(const nlse_mbloch_params *p);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_MBLOCH_H */
