/*
 * dipolar_internal.h -- the CPU split-step Crank-Nicolson solver's handle and the
 * kernels of dipolar_kernels.inc (Loncar, thesis, sections 2.3-2.4 and 3.1-3.2).
 *
 * Internally every grid is 3D, (n0, n1, n2) with the last axis contiguous:
 * a 2D geometry is (1, nx, ny) and a 1D one (1, 1, nx).  Solver axis a is
 * internal axis a + off with off = 3 - ndim.
 *
 * One step is two sweeps over memory (3D):
 *   pass A, per plane i: Psi *= exp(-i dt H1) (or the imaginary-time factor
 *           and the pending normalisation), then the CN solves along y and
 *           along z inside the plane (the plane stays in cache);
 *   pass B, per row j:   the CN solve along x; the final values give the
 *           Simpson norm and the density |Psi|^2 for the next step's FFT
 *           (and, when the step is recorded, the sums of |Psi|^2 x_a^2).
 * In 2D and 1D pass A is the whole step and ends with the norm and density.
 * The CN operators of different axes commute exactly, so the order y, z, x
 * gives the same step as DBEC-GP's x, y, z; in the rotating frame the x and
 * y sweeps carry -w L_z's first derivatives and no longer commute (the same
 * first-order splitting in another order than BEC-GP-ROT-OMP's x, y, z).
 */
#ifndef NLSEPY_DIPOLAR_INTERNAL_H
#define NLSEPY_DIPOLAR_INTERNAL_H

#include <stddef.h>
#include "nlsepy/dipolar.h"
#include "dipolar_params.h"
#include "dipolar_tuning.h"

/* Precomputed Thomas coefficients of one axis (eqs. 2.32-2.34): alpha_i,
 * gamma_i for i = 0..n-2 and the scalars A (off-diagonal) and A0r (the
 * right-hand side's diagonal).  Real time: complex, interleaved. */
typedef struct {
    void *alpha_r, *gamma_r;  /* imaginary time, n REALs each      */
    void *alpha_c, *gamma_c;  /* real time, n complex values each */
    double A_r, A0r_r;        /* imaginary time                   */
    double A_c[2], A0r_c[2];  /* real time                        */
} dipolar_axis;

/* The rotating frame's tables of one sweep (x or y) and one kind of step:
 * per line (a value of the other in-plane coordinate) the left-hand side's
 * off-diagonals am, ap and the recursion coefficients alpha, gamma of
 * dipolar_rot_line, complex, interleaved, in the state's precision. */
typedef struct {
    void *am, *ap;          /* lines complex values each       */
    void *alpha, *gamma;    /* lines x n complex values each   */
    double a0r[2];          /* the right-hand side's diagonal  */
} dipolar_rot_table;

struct dipolar_slab;

struct nlse_dipolar {
    nlse_dipolar_params p;  /* the whole grid's problem (a slab's too)   */
    struct dipolar_slab *slab; /* NULL: the whole grid in this process;  */
                            /* else this rank's slab plan (dipolar_slab.c) */
    size_t row0;            /* global index of internal row 0 (a slab's i0) */
    int ndim, off;
    size_t n[3];        /* internal shape                              */
    double h[3];        /* internal spacing (1 on padded axes)         */
    size_t N;           /* grid points                                 */
    size_t nlp;         /* padded last dimension of the FFT buffer     */
    size_t nk;          /* complex values of the r2c spectrum          */
    int is_real;        /* state stored as N REALs                     */
    void *psi;          /* 2N REALs                                    */
    void *backup;       /* 2N REALs, the state at the start of a step call */
    void *dens;         /* n0 n1 nlp REALs: |Psi|^2, then V_dd * |Psi|^2 */
    void *kern;         /* nk REALs: the kernel times 1/N              */
    void *U;            /* N REALs or NULL                             */
    double *x[3];       /* coordinates per internal axis (axis 0 of a  */
                        /* slab: the whole axis's table from row0 on) */
    double *w[3];       /* Simpson weights times h/3 per internal axis */
    void *vtrap[3];     /* trap[a] x^2 per internal axis (REAL)        */
    void *ob[3];        /* obstacle factors per internal axis (REAL)   */
    dipolar_axis ax[3];
    void *plan_f, *plan_b;
    int have_obst;
    nlse_dipolar_obstacle obst;
    void *scratch;      /* per-thread sweep buffers                    */
    size_t scratch_len; /* REALs per thread                            */
    int nthreads;
    double *partial;    /* per-row partial norms                       */
    double *partial_z;  /* per-row partial int |Psi|^2 x_2^2 (moments) */
    double *wz2;        /* w[2] x[2]^2 (the moment along axis 2)       */
    double g, gdd;      /* current couplings                           */
    double rot;         /* w of -w L_z (0: not rotating)               */
    double gqf;         /* q of the Lee-Huang-Yang term q |Psi|^3 (0: none) */
    int rq[2];          /* internal axes of x and y (-1: no x-y plane) */
    size_t rlines[2];   /* lines of the x and y sweeps' tables         */
    dipolar_rot_table rt[2][2]; /* [x sweep, y sweep][imaginary, real] */
    double last_seconds; /* wall time of the last step call            */
};

/* A slab of a distributed run (dipolar_slab.c): x rows [i0, i0 + ni) of n0
 * on rank `rank` of `size`; the x pencils (of the x solve's transposes and
 * of the dipolar spectrum) hold y rows [j0, j0 + nj) of every x row. */
struct dipolar_slab {
    const nlse_comm *comm;  /* rank-ordered sums, all-to-all (kept, not owned) */
    int rank, size;
    size_t n0, ni, i0, nj, j0;
    size_t *xc, *xs, *yc, *ys; /* x rows and y rows of every rank          */
    size_t *cnt;            /* 4 size: send counts, displacements, receive */
                            /* counts, displacements of one all-to-all     */
    dipolar_tuning tune;    /* the switches, read at create                */
    int xsolve;             /* NLSE_DIPOLAR_XSOLVE_*, agreed by the ranks  */
    void *tbuf;             /* packing buffer, the slab's complex size     */
    void *pen;              /* x pencils (n0, nj, n2) of the state, complex */
    void *spec;             /* x pencils (n0, nj, n2/2+1) of the spectrum  */
    void *fplan[4];         /* rows r2c, rows c2r, x forward, x backward   */
                            /* (the x plans on one block of DIPOLAR_XBLOCK lines) */
    void *xwork;            /* per thread one block of x lines, complex    */
    int xwork_threads;      /* threads xwork has room for                  */
    /* the x solve by substructuring: */
    void *ext;              /* (ni + 2, n1, n2) complex: halo, own rows,   */
                            /* halo; the state lives in it from row 1     */
    void *hrow;             /* the top halo row as received, complex      */
    double *sv, *sw;        /* bottom and top responses on the own rows    */
    double *kv, *kw;        /* rows of K^-1 giving E(p-1) and F(p+1)       */
    double *dsend, *drecv, *coef; /* the lines' ends, every rank's         */
    int spike_mode;         /* mode the responses were made for, -1: none  */
    double spike_dt;
    int norm_ready;         /* the x solve left this rank's norm part:     */
    double norm_part;
    double tm[5];           /* step, x transposes, dipolar FFTs, their     */
                            /* transposes, norm sums (seconds)             */
};

/* One step's run-time inputs for the kernels. */
typedef struct {
    int mode;           /* NLSE_DIPOLAR_IMAG / NLSE_DIPOLAR_REAL                 */
    double dt;
    double g, gdd;
    double gqf;         /* Lee-Huang-Yang coefficient (0: the term is skipped) */
    double scale;       /* pending normalisation factor s (1 in real time) */
    double amp;         /* obstacle amplitude now (0: none)            */
    int want_density;   /* write |Psi|^2 into dens                     */
    int want_moments;   /* the step's last pass also fills partial_z   */
} dipolar_step_args;

#define DIPOLAR_DECL(sfx, REAL)                                                              \
    void dipolar_apply_fft_##sfx(struct nlse_dipolar *s);                                         \
    int dipolar_make_plans_##sfx(struct nlse_dipolar *s);                                         \
    void dipolar_free_plans_##sfx(struct nlse_dipolar *s);                                        \
    double dipolar_step_##sfx(struct nlse_dipolar *s, const dipolar_step_args *a);                     \
    double dipolar_prepare_##sfx(struct nlse_dipolar *s, int want_density);                       \
    void dipolar_scale_##sfx(struct nlse_dipolar *s, double f);                                   \
    int dipolar_observe_##sfx(struct nlse_dipolar *s, double t, nlse_dipolar_obs *o);                  \
    void dipolar_density_##sfx(const struct nlse_dipolar *s, int keep, double *out);              \
    void dipolar_phase_##sfx(const struct nlse_dipolar *s, int axis, long index, double *out);    \
    void dipolar_obstacle_factors_##sfx(struct nlse_dipolar *s, double t);                        \
    void dipolar_potential_##sfx(const struct nlse_dipolar *s, double amp, double *out);        \
    int dipolar_observe_rows_##sfx(const struct nlse_dipolar *s, double t, size_t i_lo,           \
                                   size_t i_hi, const void *U_rows, const void *dd_rows,          \
                                   double *T);                                                    \
    double dipolar_density_at_##sfx(const struct nlse_dipolar *s, size_t m);                      \
    void dipolar_pass_a_##sfx(struct nlse_dipolar *s, const dipolar_step_args *a);                \
    void dipolar_solve_x_pencils_##sfx(struct nlse_dipolar *s, int mode, void *base, size_t n0,   \
                                       size_t nj, size_t shift);                                   \
    void dipolar_spike_ends_##sfx(const REAL *y0, const REAL *ye, const REAL *h, size_t lanes,    \
                                  int vals, const double *w0, const double *we, double *d);       \
    void dipolar_spike_coefs_##sfx(const double *d, int P, size_t lanes, const double *kv,        \
                                   const double *kw, const REAL *h, int vals, double *coef);     \
    double dipolar_spike_apply_##sfx(REAL *psi, const REAL *y, size_t ni, size_t lanes, int vals, \
                                     const double *v, const double *w, const double *coef,        \
                                     struct nlse_dipolar *s, int want);                           \
    int dipolar_slab_plans_##sfx(struct nlse_dipolar *s, void *work, size_t n0, void *pl[4]);   \
    void dipolar_slab_xconv_##sfx(void *spec, const void *kern, size_t n0, size_t lines,          \
                                  void *pf, void *pb, void *work);                                \
    void dipolar_slab_free_plans_##sfx(void *pl[4]);                                              \
    void dipolar_fft_execute_##sfx(void *plan);                                                   \
    void dipolar_nonlin_lhy_##sfx(const struct nlse_dipolar *s, int mode, size_t row,             \
                                  const REAL *vrow, REAL sc, REAL dt, REAL g, REAL q);
DIPOLAR_DECL(f, float)
DIPOLAR_DECL(d, double)
#undef DIPOLAR_DECL

/* Accumulators of the observables (dipolar_observe_rows). */
enum { OQ_NORM, OQ_SUM, OQ_KIN, OQ_POT, OQ_INT, OQ_DD, OQ_X0, OQ_X1, OQ_X2, OQ_KMOD, OQ_LZ,
       OQ_QF, OQ_N };

/* The observables from the sums T: mu, energy and sizes in the units of
 * the equation; psi0sq is |Psi|^2 at the grid centre. */
static inline void dipolar_observe_finish(const struct nlse_dipolar *s, const double *T,
                                          int use_dd, double psi0sq, nlse_dipolar_obs *o)
{
    o->norm = T[OQ_NORM];
    o->norm_sum = T[OQ_SUM];
    o->kinetic_modulus = s->p.kin * T[OQ_KMOD];
    dipolar_obs_energies(s->p.kin * T[OQ_KIN], T[OQ_POT], s->g * T[OQ_INT],
                         use_dd ? s->gdd * T[OQ_DD] : 0.0, s->gqf * T[OQ_QF], T[OQ_LZ], s->rot,
                         o);
    for (int a = 0; a < 3; ++a)
        o->x2[a] = 0;
    for (int q = s->off; q < 3; ++q)
        o->x2[q - s->off] = T[OQ_X0 + q];
    o->psi0sq = psi0sq;
}

/* The obstacle's clock at time t (dipolar_params.c), for the driver and
 * the kernels alike: centre on the move axis, and amplitude (0 without an
 * obstacle). */
static inline double dipolar_obstacle_centre(const struct nlse_dipolar *s, double t)
{
    return dipolar_obst_centre(&s->obst, t);
}
static inline double dipolar_obstacle_amp(const struct nlse_dipolar *s, double t)
{
    return s->have_obst ? dipolar_obst_amp(&s->obst, t) : 0.0;
}

/* Lines along x a slab's spectrum transforms at once, in one thread's
 * buffer (dipolar_slab_xconv): 16 complex values a row of the block. */
#define DIPOLAR_XBLOCK 16

/* The slab plan's parts of the one solver's entry points (dipolar_slab.c):
 * every one collective but free, memory and obstacle. */
void dipolar_slab_free(struct nlse_dipolar *s);
int dipolar_slab_alloc(struct nlse_dipolar *s);      /* the state and the x solve's buffers */
int dipolar_slab_agree(struct nlse_dipolar *s, int st, int *any_complex);
int dipolar_slab_begin(struct nlse_dipolar *s, int st, int *any_complex);
/* A slab's layout and switches (no buffers yet), or NULL: out of memory. */
struct dipolar_slab *dipolar_slab_new(const nlse_dipolar_params *p, int rank, int size,
                                      const size_t *xcount, const size_t *ycount,
                                      const nlse_comm *comm);
int dipolar_slab_enable(struct nlse_dipolar *s);     /* the dipolar term's buffers and plans */
int dipolar_slab_convolve(struct nlse_dipolar *s);   /* dens <- V_dd * dens */
int dipolar_slab_norm(struct nlse_dipolar *s, int want, double *nrm);
int dipolar_slab_step(struct nlse_dipolar *s, const dipolar_step_args *a, double *nrm);
int dipolar_slab_observe(struct nlse_dipolar *s, double t, nlse_dipolar_obs *out);
void dipolar_slab_obstacle(struct nlse_dipolar *s, double t);
size_t dipolar_slab_memory(const struct nlse_dipolar *s); /* what the slab plan adds */
/* The rotating frame on a slab: the x solve goes through x pencils (their
 * buffers made here when the slab was made for the substructured solve,
 * whose shared responses allow no per-line coefficients). */
int dipolar_slab_rotation(struct nlse_dipolar *s);

/* The whole length of internal axis q (a slab's axis 0: every rank's rows). */
static inline size_t dipolar_axis_len(const struct nlse_dipolar *s, int q)
{
    return q == 0 && s->slab ? s->slab->n0 : s->n[q];
}

/* FFTW's threads, set up once (dipolar_kernels.c). */
int dipolar_fftw_threads_init(void);

/* n real values of precision `dtype` as complex ones (dipolar.c): into
 * `out` (over the threads), or in place in `psi` (room for 2n values). */
void dipolar_real_to_complex(const void *psi, void *out, size_t n, int dtype);
void dipolar_promote_real(void *psi, size_t n, int dtype);

#endif /* NLSEPY_DIPOLAR_INTERNAL_H */
