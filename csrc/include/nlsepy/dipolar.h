/*
 * nlsepy/dipolar.h -- the dipolar Gross-Pitaevskii equation by split-step
 * Crank-Nicolson (Loncar, thesis, chapter 2; the DBEC-GP scheme).
 *
 *     i dPsi/dt = [-k Lap + V(r,t) + g |Psi|^2 + gdd (V_dd * |Psi|^2)] Psi   (eq. 2.9)
 *
 * (with, optionally, the rotating frame's -w L_z and the Lee-Huang-Yang
 * term q |Psi|^3 of quantum fluctuations: nlse_dipolar_set_rotation,
 * nlse_dipolar_set_lhy)
 * with k = 1 in the rescaling of eq. 2.9 (DBEC-GP OPTION 2) and k = 1/2 in
 * the standard one (OPTION 1).  One time step applies the non-derivative part
 * exactly (eq. 2.24, or exp(-dt H1) in imaginary time, eq. 2.41), then one
 * Crank-Nicolson tridiagonal solve per axis (eqs. 2.27-2.34, Psi = 0 on the
 * box faces); imaginary time renormalises after every step.  The dipolar
 * term is a convolution done with real-to-complex FFTs (eq. 2.37): the 3D
 * kernel with a spherical cutoff, or the kernels of the effective 2D
 * (eqs. 2.11, 2.14) and 1D (eqs. 2.16, 2.19) equations.
 *
 * Geometries and their solver axes (arrays are C ordered, last axis
 * contiguous):
 *   NLSE_DIPOLAR_3D     (x, y, z), dipoles along z
 *   NLSE_DIPOLAR_2D_XY  (x, y), dipoles along z, perpendicular to the plane
 *   NLSE_DIPOLAR_2D_XZ  (x, z), dipoles along z, in the plane
 *   NLSE_DIPOLAR_1D_X   (x),    dipoles along z, perpendicular to the axis
 *   NLSE_DIPOLAR_1D_Z   (z),    dipoles along z, along the axis
 *
 * Observables follow section 2.4 and the DBEC-GP programs: composite
 * Simpson integration over the grid, derivatives by the five-point formula
 * (eq. 3.2).  Everything is returned in the units of the equation above
 * (no division by the OPTION factor).
 */
#ifndef NLSEPY_DIPOLAR_H
#define NLSEPY_DIPOLAR_H

#include "nlsepy/common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum nlse_dipolar_geometry {
    NLSE_DIPOLAR_3D = 0,
    NLSE_DIPOLAR_2D_XY = 1,
    NLSE_DIPOLAR_2D_XZ = 2,
    NLSE_DIPOLAR_1D_X = 3,
    NLSE_DIPOLAR_1D_Z = 4
};

enum nlse_dipolar_mode {
    NLSE_DIPOLAR_IMAG = 0, /* imaginary time, renormalised every step */
    NLSE_DIPOLAR_REAL = 1  /* real time                               */
};

enum nlse_dipolar_fft_effort {
    NLSE_DIPOLAR_FFT_ESTIMATE = 0,
    NLSE_DIPOLAR_FFT_MEASURE = 1,
    NLSE_DIPOLAR_FFT_PATIENT = 2
};

typedef struct nlse_dipolar_params {
    int geometry;       /* enum nlse_dipolar_geometry                              */
    size_t shape[3];    /* points per solver axis (ndim of the geometry)      */
    double spacing[3];  /* grid spacing per solver axis                       */
    int dtype;          /* enum nlse_dtype: precision of state and arithmetic */
    double dt;          /* time step (> 0), real and imaginary time alike     */
    double kin;         /* k, the coefficient of -Lap (> 0)                   */
    double trap[3];     /* V_trap = sum_a trap[a] x_a^2 over the solver axes  */
    double g, gdd;      /* contact and dipolar coefficients of the equation   */
    double cutoff;      /* 3D: spherical cutoff R of V_dd (<= 0: none)        */
    double kscale;      /* 2D/1D: sqrt(2 kappa), kappa the confining
                           frequency in the kernel argument k / sqrt(2 kappa) */
    int dipolar;        /* 0: no dipolar step, no FFT plans (gdd must be 0)   */
    int fft_effort;     /* enum nlse_dipolar_fft_effort                            */
} nlse_dipolar_params;

/* A Gaussian beam (source eq. 9.1):
 *   V_B = A(t) exp(-2 sum_{a != beam_axis} (x_a - c_a(t))^2 / sigma^2),
 * centre c = 0 except along move_axis, where c(t) = start + velocity
 * min(t, t_move); A(t) = V0 until t_move, then falls linearly to 0 over
 * t_off.  beam_axis = -1 (no beam axis) makes a round spot in every solver
 * axis (the usual choice in 2D and 1D). */
typedef struct nlse_dipolar_obstacle {
    double V0, sigma, velocity, start, t_move, t_off;
    int beam_axis, move_axis;
} nlse_dipolar_obstacle;

/* Observables of the current state (section 2.4, printed-units factor not
 * applied).  mu and energy need the dipolar potential of the state: the
 * call does one extra FFT pair. */
typedef struct nlse_dipolar_obs {
    double norm;      /* Simpson integral of |Psi|^2                  */
    double norm_sum;  /* plain sum |Psi|^2 dV (what CN conserves)    */
    double mu;        /* eq. 2.43 without the 1/2 of the rescaling  */
    double energy;    /* eq. 2.44, likewise                         */
    double kinetic;   /* k int |grad Psi|^2 (part of mu and energy) */
    double kinetic_modulus; /* k int |grad |Psi||^2: DBEC-GP's real-time
                               programs use it in place of `kinetic`  */
    double x2[3];     /* <x_a^2> per solver axis (eqs. 2.53, 2.56)  */
    double psi0sq;    /* |Psi|^2 at the grid centre (index n_a / 2)  */
    double lz;        /* int Psi* L_z Psi, L_z = -i (x d_y - y d_x), by the
                         five-point derivative (0 without an x-y plane); mu
                         and energy are those of the rotating frame: they
                         include -w lz (nlse_dipolar_set_rotation)      */
    /* The parts of `energy` other than `kinetic` and -w lz (Simpson
     * integrals, like the rest): energy = kinetic + potential + contact +
     * dipolar + lhy - w lz and mu = kinetic + potential + 2 contact +
     * 2 dipolar + (5/2) lhy - w lz, to rounding. */
    double potential; /* int V |Psi|^2 (trap, user potential, obstacle)  */
    double contact;   /* (g / 2) int |Psi|^4                             */
    double dipolar;   /* (gdd / 2) int (V_dd * |Psi|^2) |Psi|^2          */
    double lhy;       /* (2/5) q int |Psi|^5 (nlse_dipolar_set_lhy)      */
} nlse_dipolar_obs;

typedef struct nlse_dipolar nlse_dipolar;

/* Number of solver axes of a geometry (3, 2 or 1); 0 for an unknown one. */
int nlse_dipolar_ndim(int geometry);

/* Validate p and allocate a solver (and its FFT plans); the state starts as
 * the normalised Gaussian of the trap (DBEC-GP's imaginary-time start). */
int nlse_dipolar_create(const nlse_dipolar_params *p, nlse_dipolar **out);
void nlse_dipolar_destroy(nlse_dipolar *s);

/* State: complex (interleaved) or real array of the grid's shape in the
 * solver's precision.  A real state runs imaginary time in real arithmetic. */
int nlse_dipolar_set_state(nlse_dipolar *s, const void *psi, int is_complex);
int nlse_dipolar_get_state(const nlse_dipolar *s, void *out);  /* complex out */
int nlse_dipolar_state_is_real(const nlse_dipolar *s);

int nlse_dipolar_set_dt(nlse_dipolar *s, double dt);
/* New couplings; creates the FFT plans if gdd becomes nonzero on a solver
 * made without the dipolar step. */
int nlse_dipolar_set_couplings(nlse_dipolar *s, double g, double gdd);
/* The rotating frame: adds -w L_z Psi, L_z = -i (x d/dy - y d/dx) the
 * angular momentum about z, to the equation (w in the equation's units,
 * finite; nonzero only in the 3d and 2d-xy geometries; 0: none).  The x and
 * y Crank-Nicolson solves then carry the first-derivative terms (complex,
 * non-symmetric tridiagonal systems, BEC-GP-ROT-OMP's scheme) and a real
 * state becomes complex at the next step.  On a slab of a distributed run
 * every rank sets the same w (no messages). */
int nlse_dipolar_set_rotation(nlse_dipolar *s, double w);
/* The Lee-Huang-Yang term of quantum fluctuations: adds q |Psi|^3 Psi to
 * the equation (q in the equation's units, finite and >= 0; 0: none).  It
 * joins the non-derivative factor of each step, exp(-i dt (V + g |Psi|^2 +
 * gdd Phi + q |Psi|^3)) (exp(-dt H1) in imaginary time), inside the pass
 * that applies it: one more pointwise power, no further pass through
 * memory; with q = 0 the steps are bit for bit those without the term.  On
 * a slab of a distributed run every rank sets the same q (no messages). */
int nlse_dipolar_set_lhy(nlse_dipolar *s, double q);
/* Static user potential (real array in the solver's precision; NULL: none). */
int nlse_dipolar_set_potential(nlse_dipolar *s, const void *U);
/* Moving obstacle (NULL: none). */
int nlse_dipolar_set_obstacle(nlse_dipolar *s, const nlse_dipolar_obstacle *o);

/* Take n steps in `mode`.  `t0` is the real time at the first step (the
 * obstacle's clock; imaginary steps keep it fixed).  Before each step the
 * couplings grow by (dg, dgdd) (DBEC-GP's NSTP ramp; 0 for none).  *done
 * receives the steps completed.  On a non-finite state the state at the
 * start of the call is restored, *done is the index of the failing step and
 * NLSE_ERR_BLOWUP is returned. */
int nlse_dipolar_step(nlse_dipolar *s, int mode, long n, double t0, double dg, double dgdd, long *done);

/* Moments of the state recorded by nlse_dipolar_step_record, one row of
 * NLSE_DIPOLAR_MOMENTS doubles per recorded step: the Simpson norm, then
 * <x_a^2> of each solver axis (0 beyond the geometry's axes), the
 * quantities `norm` and `x2` of nlse_dipolar_observe (the same Simpson
 * sums of |Psi|^2 and |Psi|^2 x_a^2, eqs. 2.53, 2.56, summed in another
 * order: equal to round-off).  They come from the pass that ends each step
 * (the density of the next step's dipolar term and the norm), from the
 * values it leaves in cache, so a step that records them makes no further
 * pass through memory (on the CPU a small part of a 3D step).  In imaginary
 * time the row is that of the normalised state (norm 1, <x_a^2> divided by
 * the norm), the state the call leaves when it ends after that step. */
#define NLSE_DIPOLAR_MOMENTS 4

typedef struct nlse_dipolar_record {
    long every;  /* record after the steps whose count is a multiple of every (>= 1)   */
    long phase;  /* steps counted before the call's first one (0 <= phase < every):
                    step k of the call (k = 0 .. n-1) is recorded when
                    (phase + k + 1) % every == 0                                      */
    double *out; /* nlse_dipolar_record_rows(rec, n) rows of NLSE_DIPOLAR_MOMENTS     */
} nlse_dipolar_record;

/* Rows a call of n steps records: (phase + n) / every. */
static inline long nlse_dipolar_record_rows(const nlse_dipolar_record *rec, long n)
{
    return (rec->phase + n) / rec->every;
}

/* nlse_dipolar_step, recording the moments of the state after the steps
 * `rec` names (rec NULL: nlse_dipolar_step).  On a blow-up the rows of the
 * steps before the failing one have been written. */
int nlse_dipolar_step_record(nlse_dipolar *s, int mode, long n, double t0, double dg,
                             double dgdd, const nlse_dipolar_record *rec, long *done);

/* Observables at real time t (for the obstacle's position). */
int nlse_dipolar_observe(nlse_dipolar *s, double t, nlse_dipolar_obs *out);

/* (V_dd * |Psi|^2) on the grid, without gdd (double array of the grid). */
int nlse_dipolar_dd_potential(nlse_dipolar *s, double *out);

/* The total potential V(r, t) (trap + user + obstacle) on the grid. */
int nlse_dipolar_potential(const nlse_dipolar *s, double t, double *out);

/* |Psi|^2 integrated (Simpson) over the solver axes not in keep_mask
 * (bit a = keep axis a); out has the shape of the kept axes, in order. */
int nlse_dipolar_density(const nlse_dipolar *s, int keep_mask, double *out);

/* arg(Psi) on the slice `axis` = index (out: the other axes, in order). */
int nlse_dipolar_phase_slice(const nlse_dipolar *s, int axis, long index, double *out);

/* The dipolar kernel on the r2c frequency grid (tests and tools):
 * shape (n0, n1, n_last/2 + 1) of the solver axes, without 1/N. */
int nlse_dipolar_kernel(const nlse_dipolar *s, double *out);

/* Bytes one step moves through main (CPU) or device memory per grid point:
 * the backend's traffic model. */
double nlse_dipolar_bytes_per_point_step(const nlse_dipolar *s, int mode);

/* Bytes of memory the solver holds (host memory for the CPU backend, device
 * memory for the CUDA one), including the state backup a step call makes. */
size_t nlse_dipolar_memory_bytes(const nlse_dipolar *s);

/* Duration of the last nlse_dipolar_step call's steps in seconds (wall clock on
 * the CPU; CUDA events around the steps on the device). */
double nlse_dipolar_last_step_seconds(const nlse_dipolar *s);

/* ------------------------------------------------------------------ */
/* Slabs of a distributed run (CPU and GPU ranks)                      */
/* ------------------------------------------------------------------ */

/* Message prefix of a collective call stopped because another rank failed
 * (that rank reports its own error). */
#define NLSE_DIPOLAR_PEER "nlsepy-peer:"

/* A solver of the 3D geometry that holds x rows [xs[rank], xs[rank] +
 * xc[rank]) of the grid p->shape, one of `size` ranks whose rows tile the
 * grid in rank order; ycount[r] y rows (in rank order) are rank r's part of
 * the x pencils of the x solve and of the dipolar transform.  Every rank
 * needs 2 x rows or more.  `comm` sums over the ranks in rank order (it
 * also serves as the barrier).  The state starts as the slab of the
 * normalised Gaussian.  Not collective; the handle is used through the
 * functions above once nlse_dipolar_slab_connect has given it the other
 * ranks' buffers: nlse_dipolar_step, _observe, _dd_potential and
 * _set_couplings (when it makes the FFT plans) are then collective (every
 * rank, the same arguments, the same order); the others act on this rank's
 * rows.  Layouts: the state, V and outputs are the slab (xc[rank], ny, nz). */
int nlse_dipolar_slab_create(const nlse_dipolar_params *p, int rank, int size,
                             const size_t *xcount, const size_t *ycount, const nlse_comm *comm,
                             nlse_dipolar **out);

/* The device buffers the other ranks copy into or read: [0] the x pencils,
 * [1] the allocation that holds the state (two complex x rows before it and
 * two after, for the neighbours' rows), [2] the density / spectrum slab,
 * [3] the end values of the lines of the substructured x solve. */
#define NLSE_DIPOLAR_SLAB_BUFFERS 4

/* How the x solve of a distributed run crosses the slabs: transposes to x
 * pencils and back, or substructuring (each slab's own systems, coupled
 * through the end values of its lines: one halo row each way and two
 * values a line from every rank).  Chosen by NLSEPY_DIPOLAR_XSOLVE
 * ("transpose", "substructure"; the highest choice of any rank wins); the
 * default is substructuring, on CPU ranks and GPU slabs alike. */
enum { NLSE_DIPOLAR_XSOLVE_TRANSPOSE = 0, NLSE_DIPOLAR_XSOLVE_SUBSTRUCTURE = 1 };
int nlse_dipolar_slab_buffers(const nlse_dipolar *s, void *out[NLSE_DIPOLAR_SLAB_BUFFERS]);

/* peers[b * size + r]: buffer b of rank r as this process addresses it
 * (its own for r = rank; the others mapped by CUDA IPC). */
int nlse_dipolar_slab_connect(nlse_dipolar *s, void *const *peers);

/* Instead of connect: the transposes go through pinned host buffers and
 * comm->alltoallv (ranks on several hosts, or no CUDA IPC). */
int nlse_dipolar_slab_stage(nlse_dipolar *s);

/* Seconds of the last step call on this rank: [0] all, [1] the x-solve
 * transposes (copies and the barrier's wait), [2] the dipolar transforms
 * with their transposes, [3] those transposes alone, [4] the norm sums. */
int nlse_dipolar_slab_timings(const nlse_dipolar *s, double out[5]);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_DIPOLAR_H */
