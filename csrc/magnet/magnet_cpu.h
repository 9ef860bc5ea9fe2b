/*
 * magnet_cpu.h -- the CPU solver's handle (csrc/magnet/magnet.c) and its
 * multigrid (csrc/magnet/magnet_mg.c) for the magnet-design Laplace problem.
 */
#ifndef NLSEPY_MAGNET_CPU_H
#define NLSEPY_MAGNET_CPU_H

#include "magnet_internal.h"

/* One coarse level of the multigrid solver (magnet_mg.c): 9-point
 * Galerkin operator, natural layout (i nz + j), double precision. */
typedef struct {
    int nr, nz;
    double *A;            /* 9 per node: A[9 (i nz + j) + 3 (di + 1) + (dj + 1)] */
    unsigned char *mask;  /* unknowns                                        */
    double *b, *e, *r;    /* right-hand side, correction, residual           */
    int five_point;       /* rows without diagonal couplings (fine level)    */
    int nunk;             /* coarsest level: dense LU of the unknowns        */
    int *idx, *piv;
    double *LU;
} magnet_level;

struct nlse_magnet {
    nlse_magnet_params p;
    magnet_geom g;
    magnet_row *rows;
    size_t hw;        /* stored values per row and colour (with halo) */
    void *P[2], *Q[2];/* Phi by colour; Q: Jacobi's second copy       */
    double *part;     /* per-row partial sums                          */
    double fnorm;     /* ||f|| of the unknowns' equations (eq. 2.58)   */
    int dirichlet;    /* boundary data given (nlse_magnet_set_dirichlet)    */
    /* multigrid (built at the first multigrid solve) */
    int nlev;         /* coarse levels 1..nlev                          */
    magnet_level *lev;    /* lev[0]: the fine level as an explicit operator,
                         built for mg-cg only (the V-cycle of the plain
                         multigrid smooths Phi itself)                 */
    double *r0, *e0;  /* fine residual and correction (natural layout)  */
    unsigned char *mask0;
    int mg_rows_dirichlet; /* which rows the hierarchy was built for   */
    /* mg-cg: the BiCGSTAB iteration in progress, kept between calls so that
     * a solve cut into many calls gives the bits of one call */
    int kopen;        /* 0: none; 1: in progress; 2: ended by a breakdown */
    double *kv;       /* x r rh p v y z t, natural layout (nr nz each)  */
    void *kb[2];      /* Phi by colour when the iteration began         */
    double krho, kalpha, komega, krel; /* BiCGSTAB's scalars, last ||r||/||f|| */
    double last_seconds;
};

/* The files call downwards only: magnet.c -> magnet_mg.c -> magnet_sweeps.c
 * (and magnet.c -> magnet_sweeps.c). */

/* Multigrid and mg-cg (magnet_mg.c). */
int magnet_mg_build(struct nlse_magnet *s);
void magnet_mg_free(struct nlse_magnet *s);
void magnet_mg_cycle(struct nlse_magnet *s, int nu1, int nu2); /* one V-cycle on Phi */
/* At most max_iter iterations of the mg-cg iteration in progress (begun
 * from the current Phi when none is); Phi = its first Phi + x after the call. */
int magnet_mgcg_solve(struct nlse_magnet *s, double tol, long max_iter, double fn, double *history,
                      long *iterations, double *rel_residual, int *converged);
void magnet_mgcg_close(struct nlse_magnet *s); /* drop it (Phi stays) */

/* Fine-grid work dispatched by precision (magnet_sweeps.c). */
double magnet_sweep(struct nlse_magnet *s, int method, double omega); /* one iteration of
                            Jacobi, Gauss-Seidel, SOR or red-black SOR; returns ||r||^2 */
double magnet_residual_sq(const struct nlse_magnet *s);   /* ||r||^2 over the unknowns */
void magnet_phi_out(const struct nlse_magnet *s, double *phi); /* natural layout out */
void magnet_phi_in(struct nlse_magnet *s, const double *phi);  /* natural layout in  */
void magnet_boundary_in(struct nlse_magnet *s, const double *values); /* Dirichlet data,
                                                                 unknowns zeroed */
void magnet_fine_smooth(struct nlse_magnet *s);  /* red-black Gauss-Seidel sweep */
void magnet_fine_residual(const struct nlse_magnet *s, double *r);
void magnet_fine_correct(struct nlse_magnet *s, const double *e);

#endif /* NLSEPY_MAGNET_CPU_H */
