/*
 * fd_internal.h -- the solver record and geometry shared by csrc/fd/fd.c and the
 * precision-templated kernels of csrc/fd/fd_kernels.inc (not a public header).
 */
#ifndef NLSEPY_FD_INTERNAL_H
#define NLSEPY_FD_INTERNAL_H

#include <stddef.h>
#include "nlsepy/fd.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Geometry seen by the kernels.  The array is a set of "lines" along the
 * contiguous (last) axis: m = ndim - 1 leading axes index the lines (n[0],
 * n[1]) and `len` points lie along each line.
 */
typedef struct fd_geom {
    int ndim, m;         /* dimensions; line axes = ndim - 1             */
    ptrdiff_t n[3];      /* points per axis                              */
    ptrdiff_t nlines;    /* product of the line axes (1 in 1D)           */
    ptrdiff_t len;       /* points per line = n[ndim - 1]                */
    ptrdiff_t npts;      /* all points                                   */
    int periodic;        /* 1 for periodic boundaries                    */
    int scheme, bc;
    double a, s, dt;
    double ih2[3];       /* 1 / h^2 per axis                             */
    double cpair[3];     /* 2SHOC cross-derivative weights, per axis pair */
    double dv;           /* volume of one cell                           */
} fd_geom;

#ifndef NLSEPY_FD_DEVICE_HANDLE /* the CUDA backend defines its own handle */
struct nlse_fd {
    nlse_fd_params p;
    fd_geom g;
    size_t real_size;    /* sizeof(float) or sizeof(double)              */
    void *psi;           /* current state Psi^n                          */
    void *acc;           /* RK4 accumulator; becomes Psi^{n+1}           */
    void *ta, *tb;       /* RK4 stage inputs                             */
    void *D;             /* 2SHOC first-step Laplacian (NULL for CD)     */
    void *V;             /* static potential (NULL when V = 0)           */
    void *snap[2];       /* snapshot slots (allocated on first use)      */
    int undo_ok;         /* acc holds the state before the last step     */
    int kernel;          /* enum nlse_fd_kernel asked for                */
    int last_kernel;     /* kernel of the last step taken (-1: none)     */
};
#endif

/* Shared by every backend (csrc/fd/fd_params.c). */
int nlse_fd_check_params(const nlse_fd_params *p);
int nlse_fd_check_dt(double dt);
/* arguments of nlse_fd_step: *done = `spare` when the caller passed none
 * (NULL), then **done = 0 */
int nlse_fd_check_step(const void *s, long nsteps, long **done, long *spare);
void nlse_fd_make_geom(const nlse_fd_params *p, fd_geom *g);
/* Whether kernel mode `kernel` (enum nlse_fd_kernel) runs fused steps for
 * these parameters on a backend that fuses (`can`: the backend's fused path
 * takes them): 1 fused, 0 staged. */
int nlse_fd_use_fused(const nlse_fd_params *p, int kernel, int can);

/* CPU kernels, one set per precision (csrc/fd/fd_kernels.inc). */
int nlse_fd_advance_f(nlse_fd *s, long nsteps, long *done);
int nlse_fd_advance_d(nlse_fd *s, long nsteps, long *done);
/* fused steps with tiles of T[a] points per axis (csrc/fd/fd_fused.inc) */
int nlse_fd_advance_fused_f(nlse_fd *s, long nsteps, long *done, const ptrdiff_t *T);
int nlse_fd_advance_fused_d(nlse_fd *s, long nsteps, long *done, const ptrdiff_t *T);
void nlse_fd_measure_f(nlse_fd *s, ptrdiff_t row0, ptrdiff_t row1, double *norm, double *energy);
void nlse_fd_measure_d(nlse_fd *s, ptrdiff_t row0, ptrdiff_t row1, double *norm, double *energy);
/* rows first .. first + count - 1 of axis 0 lie inside the grid (else an error) */
int nlse_fd_check_rows(const nlse_fd_params *p, size_t first, size_t count);
int nlse_fd_all_finite_f(const nlse_fd *s, const void *x, int real_only);
int nlse_fd_all_finite_d(const nlse_fd *s, const void *x, int real_only);

#ifdef __cplusplus
}
#endif
#endif
