/*
 * nlsepy/fd.h -- the NLSE by explicit RK4 and finite differences.
 *
 *     i dPsi/dt + a Lap(Psi) - V Psi + s |Psi|^2 Psi = 0,
 *     dPsi/dt = F(Psi) = i [a Lap(Psi) + (s |Psi|^2 - V) Psi]
 *
 * in 1, 2 or 3 dimensions (Caplan, NLSEmagic, section 3): classic RK4 in time
 * (eq. 3), the central-difference Laplacian (CD, second order) or the two-step
 * high-order compact scheme (2SHOC, fourth order, eqs. 4-9), and the boundary
 * conditions of section 3.3 (Dirichlet eqs. 11-12, modulus-squared Dirichlet
 * eqs. 14-15, Laplacian-zero eqs. 16-17, one-sided in 1D) plus periodic.
 *
 * The solver is an opaque handle that owns every work buffer.  All entry
 * points return an nlse_status; nlse_last_error() says what went wrong.
 */
#ifndef NLSEPY_FD_H
#define NLSEPY_FD_H

#include "nlsepy/common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum nlse_fd_scheme {
    NLSE_FD_CD = 0,    /* second-order central differences        */
    NLSE_FD_2SHOC = 1  /* two-step fourth-order compact scheme    */
};

enum nlse_fd_bc {
    NLSE_BC_DIRICHLET = 0, /* Psi_b fixed                          */
    NLSE_BC_MSD = 1,       /* |Psi_b|^2 fixed                      */
    NLSE_BC_L0 = 2,        /* Lap(Psi_b) = 0                       */
    NLSE_BC_PERIODIC = 3,  /* wrap-around in every axis            */
    NLSE_BC_ONE_SIDED = 4  /* one-sided Laplacian, 1D only         */
};

/* How a step runs: four passes over the grid (one per RK4 stage, the
 * reference), one pass (all four stages of a tile at once, with the halo
 * each stage needs recomputed at the tile's edge), or the backend's choice. */
enum nlse_fd_kernel {
    NLSE_FD_STAGED = 0,
    NLSE_FD_FUSED = 1,
    NLSE_FD_AUTO = 2
};

typedef struct nlse_fd_params {
    int ndim;            /* 1, 2 or 3                                    */
    size_t shape[3];     /* points per axis; the last axis is contiguous */
    double spacing[3];   /* grid spacing per axis                        */
    double a;            /* dispersion coefficient, > 0                  */
    double s;            /* nonlinearity coefficient                     */
    double dt;           /* time step, > 0                               */
    int scheme;          /* enum nlse_fd_scheme                          */
    int bc;              /* enum nlse_fd_bc                              */
    int dtype;           /* enum nlse_dtype                              */
} nlse_fd_params;

typedef struct nlse_fd nlse_fd;

/* Smallest number of points per axis the scheme and boundary need. */
size_t nlse_fd_min_points(int scheme, int bc);

/* How far F at one point reads, in points along an axis, for the scheme and
 * boundary condition: the halo of one stage of the fused step (4x per step). */
int nlse_fd_reach(int scheme, int bc);

/* Linear stability bound on dt (eqs. 18-19) for these parameters. */
double nlse_fd_max_dt(const nlse_fd_params *p);

/* Validate p and allocate a solver; the state starts at zero. */
int nlse_fd_create(const nlse_fd_params *p, nlse_fd **out);
void nlse_fd_destroy(nlse_fd *s);

/* State: interleaved complex of the solver's dtype, C order, shape p.shape. */
int nlse_fd_set_state(nlse_fd *s, const void *psi);
int nlse_fd_get_state(const nlse_fd *s, void *psi);

/* Static potential: real array of the solver's precision, or NULL for V = 0. */
int nlse_fd_set_potential(nlse_fd *s, const void *V);

/* Change the time step (must be finite and > 0). */
int nlse_fd_set_dt(nlse_fd *s, double dt);

/*
 * Advance `nsteps` RK4 steps.  *done receives the number of steps completed.
 * If a step produces a non-finite value the step is discarded, the state keeps
 * the last finite step, *done counts the good steps and NLSE_ERR_BLOWUP is
 * returned.
 */
int nlse_fd_step(nlse_fd *s, long nsteps, long *done);

/*
 * Observables of the current state (double accumulation):
 * norm   = sum |Psi|^2 dV,
 * energy = sum [a |grad Psi|^2 + V |Psi|^2 - (s/2) |Psi|^4] dV, the kinetic
 *          part being -a Re<Psi, L Psi> with the scheme's Laplacian L for
 *          periodic boundaries (the invariant of the semi-discrete system)
 *          and the forward-difference gradient over the grid's links otherwise.
 */
int nlse_fd_observe(nlse_fd *s, double *norm, double *energy);

/*
 * Rows of axis 0, for a solver that holds one slab of a distributed grid
 * (the rows `first` .. `first + count - 1`, each of shape[1] * shape[2]
 * points, contiguous in C order):
 * observe_rows: the observables of nlse_fd_observe summed over the points
 *   of those rows only (for the gradient, the links from them);
 * get_rows / set_rows: copy those rows of the state out / in (set_rows
 *   does not check the values: halo rows come from a neighbour's finite
 *   step; a caller with other data checks them first).
 */
int nlse_fd_observe_rows(nlse_fd *s, size_t first, size_t count, double *norm, double *energy);
int nlse_fd_get_rows(const nlse_fd *s, size_t first, size_t count, void *out);
int nlse_fd_set_rows(nlse_fd *s, size_t first, size_t count, const void *in);

/* The same rows to or from memory of the solver's backend (host memory for
 * the CPU, device memory for CUDA: a buffer of this process, or another
 * process's mapped by CUDA IPC): the device-to-device halo exchange. */
int nlse_fd_rows_to(const nlse_fd *s, size_t first, size_t count, void *dst);
int nlse_fd_rows_from(nlse_fd *s, size_t first, size_t count, const void *src);

/* Go back to the state before the last step of the last nlse_fd_step call
 * that took one (a distributed run whose other part blew up in that step);
 * only directly after it (not after set_state). */
int nlse_fd_undo_step(nlse_fd *s);

/*
 * Frames without stalling the solver.  nlse_fd_snapshot copies the current
 * state into snapshot slot 0 or 1 (on the device for the CUDA backend, in
 * stream order after the steps already issued); nlse_fd_fetch copies a slot
 * into host memory, blocking only the calling thread, and may run on another
 * thread while nlse_fd_step runs.  A slot must not be snapshot again before
 * its fetch has returned.
 */
int nlse_fd_snapshot(nlse_fd *s, int slot);
int nlse_fd_fetch(nlse_fd *s, int slot, void *psi);

/* Bytes the staged kernels move through memory per step and point (model). */
double nlse_fd_bytes_per_point_step(const nlse_fd *s);

/* Bytes the fused step moves per step and point (model): Psi^n (and V) read
 * over each tile's box, Psi^{n+1} written over the tile. */
double nlse_fd_fused_bytes_per_point_step(const nlse_fd *s);

/* Tile of the fused step, points per axis (shape[0] first) in tile[0 ..
 * ndim-1]; returns 0 when the backend has no fused step for these
 * parameters (then tile is untouched), 1 otherwise. */
int nlse_fd_fused_tile(const nlse_fd *s, size_t tile[3]);

/*
 * Choose the kernel of the next steps (enum nlse_fd_kernel; the default is
 * NLSE_FD_AUTO).  A fused request the backend cannot serve for these
 * parameters runs staged; nlse_fd_last_kernel says which ran.  Both give the
 * same state to rounding (bit for bit on the CPU).
 */
int nlse_fd_set_kernel(nlse_fd *s, int kernel);
/* Kernel of the last step taken: NLSE_FD_STAGED or NLSE_FD_FUSED, -1 before
 * the first step. */
int nlse_fd_last_kernel(const nlse_fd *s);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_FD_H */
