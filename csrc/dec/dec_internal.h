/*
 * dec_internal.h -- shared by the CPU (csrc/dec/dec.c) and CUDA
 * (cuda/dec/dec.cu) backends of the DEC GPE (source 001, eqs. 8 and 12):
 * the block table in the form the kernels read, the trap at a circumcentre,
 * and the checks of nlse_dec_step / nlse_dec_imaginary.
 *
 * A neighbour row k of cell c carries, besides the caller's (cell, offset,
 * weight), `delta`: the index distance j - i from cell i to its neighbour j
 * when both blocks lie inside the grid (no wrap), the same for every
 * interior block, so that the interior kernels read psi[i + delta[k]]
 * (in the public order of nlsepy/dec.h, which the CUDA backend keeps; the
 * CPU backend holds its state in an order of its own, dec.c, and builds
 * its distances from cell, off).
 */
#ifndef NLSEPY_DEC_INTERNAL_H
#define NLSEPY_DEC_INTERNAL_H

#include "nlsepy/dec.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define DEC_HD __host__ __device__
#else
#define DEC_HD
#endif

/* The block table as the kernels use it (host copy, double). */
typedef struct dec_rows {
    int cells, rows;
    int *start;          /* cells + 1                                       */
    int *cell;           /* rows: neighbour's local index                   */
    int *off;            /* 3 rows: block offset, each -1, 0, 1             */
    int *delta;          /* rows: j - i for an interior block               */
    double *w;           /* rows: |F| / (2 |E*| |B_c|)                      */
    double *diag;        /* cells: sum of the cell's weights                */
    double *vol;         /* cells: |B_c|                                    */
    double *centre;      /* 3 cells                                         */
} dec_rows;

/* Copy and complete the caller's table (checked by nlse_dec_check first). */
int dec_rows_build(const nlse_dec_params *p, const nlse_dec_table *t, dec_rows *r);
void dec_rows_free(dec_rows *r);

/* The arguments of nlse_dec_create: NLSE_ERR_VALUE for a NULL out, then
 * *out = NULL and nlse_dec_check. */
int dec_check_create(const nlse_dec_params *p, const nlse_dec_table *t, nlse_dec **out);

/* The states of nlse_dec_set_state: psi, and psi_prev unless NULL, n finite
 * complex values of the dtype. */
int dec_check_states(const void *psi, const void *psi_prev, size_t n, int dtype);

/* nlse_dec_set_dt on a solver's parameters: dt finite and > 0, and a new
 * dt drops the leapfrog's psi(t - dt) (*have_prev = 0). */
int dec_set_dt(nlse_dec_params *p, int *have_prev, double dt);

/* nlse_dec_set_comm into the solver's *slot (NULL: no solver): the table
 * needs sum and max; NULL makes the solver whole again. */
int dec_set_comm(const nlse_comm **slot, const nlse_comm *c);

/* nlse_dec_step / nlse_dec_imaginary argument checks (done = 0 first). */
int dec_check_steps(const void *s, long n, long *done);

/* The blow-up of a step's words in dec_steps_end. */
#define DEC_REAL_BLOWUP "non-finite at step"
#define DEC_IMAG_BLOWUP "non-finite or zero at imaginary-time step"

/* The end of a run of n steps of which k were taken: *done = k (done not
 * NULL), then the status st, else NLSE_ERR_BLOWUP when bad ("the state
 * became <what> k + 1 of n"), else NLSE_OK. */
int dec_steps_end(int st, int bad, long k, long n, long *done, const char *what);

/* A finite array of n reals of the given dtype's precision ("V"). */
int dec_check_real(const void *v, size_t n, int dtype, const char *name);
/* A finite array of n complex values of the dtype ("psi"). */
int dec_check_complex(const void *v, size_t n, int dtype, const char *name);

/* Layers first .. first + count - 1 (count >= 1) lie inside the solver's
 * nz layers (`what` names the entry point in the message). */
int dec_check_layers(const nlse_dec_params *p, long first, long count, const char *what);

/* The blow-up flag of a step agreed over the processes of c (NULL: as is):
 * *bad becomes 1 everywhere when it was 1 anywhere. */
int dec_agree_bad(const nlse_comm *c, int *bad);

/* Seconds on the monotonic clock. */
double dec_now(void);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_DEC_INTERNAL_H */
