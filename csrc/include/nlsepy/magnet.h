/*
 * nlsepy/magnet.h -- the axisymmetric Laplace problem of magnet design
 * (Madhubhashini, thesis, chapters 1-2 and 4):
 *
 *     d2Phi/dr2 + (1/r) dPhi/dr + d2Phi/dz2 = 0                 (eq. 2.15)
 *
 * between a cylindrical magnet (radius r0, half-height z0) and an outer
 * cylinder (r1, z1), with the boundary conditions of Table 1.1 and the
 * finite-difference rows of Table 2.1 in the scaling of eq. 2.38.  Grid
 * node (i, j) lies at r = i dr, z = j dz (z up); the cap condition is
 * dPhi/dz = -B/mu0 (Table 1.1), mu0 = 4 pi 1e-7.  Nodes strictly inside the
 * magnet are not unknowns; boundary 6 (z = 0, r >= r0) holds Phi = 0.
 *
 * Storage is colour-reordered as the source's section 4.5 found fastest:
 * the red ((i + j) even) and the black nodes of each row are stored apart,
 * so a red-black sweep reads and writes unit-stride arrays.
 */
#ifndef NLSEPY_MAGNET_H
#define NLSEPY_MAGNET_H

#include <stddef.h>
#include "nlsepy/common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum nlse_magnet_method {
    NLSE_MAGNET_JACOBI = 0,        /* eq. 2.39                                   */
    NLSE_MAGNET_GAUSS_SEIDEL = 1,  /* eq. 2.42, rows i = 0.., j = 0.. (serial)   */
    NLSE_MAGNET_SOR = 2,           /* eq. 2.56 in the same order (serial)        */
    NLSE_MAGNET_RBSOR = 3,         /* Algorithm 2: red nodes, then black nodes   */
    NLSE_MAGNET_MULTIGRID = 4,     /* V(2,2) cycles, red-black Gauss-Seidel
                                  smoothing, Galerkin coarse operators      */
    NLSE_MAGNET_MGCG = 5           /* BiCGSTAB preconditioned by one V-cycle    */
};

typedef struct nlse_magnet_params {
    double r0, z0;   /* magnet radius and half-height (m), > 0            */
    double r1, z1;   /* outer cylinder (m), r0 < r1, z0 < z1               */
    double dr, dz;   /* spacings (m); every length a whole number of them */
    double B;        /* field along z inside the magnet (T), finite       */
    int dtype;       /* NLSE_COMPLEX64: float arithmetic, COMPLEX128: double */
} nlse_magnet_params;

typedef struct nlse_magnet nlse_magnet;

/* omega of eq. 2.44 with the Jacobi spectral radius of eq. A.1 (the
 * rectangle three times the circumscribing one). */
double nlse_magnet_omega_estimate(const nlse_magnet_params *p);

/* Check p without allocating (the errors of nlse_magnet_create). */
int nlse_magnet_check_params(const nlse_magnet_params *p);

/* Validate p (named errors) and allocate; Phi starts at 0. */
int nlse_magnet_create(const nlse_magnet_params *p, nlse_magnet **out);
void nlse_magnet_destroy(nlse_magnet *s);

/* Grid: nr = r1/dr + 1 nodes along r, nz = z1/dz + 1 along z. */
void nlse_magnet_shape(const nlse_magnet *s, size_t *nr, size_t *nz);

/* Phi on the (nr, nz) grid (row i = r, contiguous j = z), double: get gives
 * NaN inside the magnet; set takes the unknowns' values (others ignored,
 * non-finite unknowns rejected). */
int nlse_magnet_get_phi(const nlse_magnet *s, double *phi);
int nlse_magnet_set_phi(nlse_magnet *s, const double *phi);

/* Iterate with `method` until ||r|| / ||f|| < tol (eq. 2.50, the residuals
 * taken as each node is updated, as Algorithms 1 and 2 do) or max_iter
 * iterations (V-cycles for multigrid, whose residual is that of the whole
 * grid after each cycle).  omega in (0, 2) for SOR and RBSOR (ignored
 * otherwise).
 * history (may be NULL) receives the relative residual of each iteration.
 * Returns NLSE_OK also when tol was not reached: *converged says which. */
int nlse_magnet_solve(nlse_magnet *s, int method, double omega, double tol, long max_iter,
                  double *history, long *iterations, double *rel_residual, int *converged);

/* MGCG keeps its BiCGSTAB iteration (Krylov vectors and scalars, and the Phi
 * it began from) in the handle: a call continues the iteration that an
 * earlier MGCG call left unfinished (max_iter reached), so calls of
 * m_1, .., m_k iterations give the iterates, residuals and Phi of one call
 * of m_1 + .. + m_k, bit for bit; Phi after each call is the iterate
 * reached.  The iteration ends when it converges or diverges; after a
 * breakdown (rho or omega 0) further calls do 0 iterations and report the
 * residual reached.  set_phi, set_dirichlet, a solve by another method and
 * nlse_magnet_restart drop it: the next MGCG call begins afresh from Phi. */
int nlse_magnet_restart(nlse_magnet *s);

/* Replace Table 1.1's conditions on the outer cylinder (boundaries 1, 2),
 * the magnet's surface (4, 5) and the mid-plane (6) by the Dirichlet values
 * of `values` on the (nr, nz) grid; the axis keeps its symmetry row (eq.
 * 2.28).  For tests against exact solutions and for imposed potentials.
 * The unknowns restart at 0.  NULL restores the magnet problem (Phi = 0). */
int nlse_magnet_set_dirichlet(nlse_magnet *s, const double *values);

/* Seconds the iterations of the last nlse_magnet_solve took (CUDA events on
 * the device, the wall clock on the CPU), without building the multigrid
 * hierarchy. */
double nlse_magnet_last_solve_seconds(const nlse_magnet *s);

/* ||f - A Phi|| / ||f|| of the current Phi (all nodes at once). */
double nlse_magnet_rel_residual(const nlse_magnet *s);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_MAGNET_H */
