/*
 * dipolar_mpi.h -- the dipolar GPE split-step Crank-Nicolson solver of
 * nlsepy/dipolar.h over MPI ranks (Loncar, thesis, chapter 6: the
 * OpenMP/MPI edition of DBEC-GP), 3D geometry.
 *
 * Each rank holds a slab of x rows, (ni, ny, nz) of the global (nx, ny, nz)
 * grid, rows i0 .. i0 + ni - 1; the slabs are those FFTW's MPI interface
 * gives the r2c transform (fftw_mpi_local_size_3d_transposed: blocks of
 * ceil(nx / ranks) rows), so the density goes into the transform where it
 * lies.  One step:
 *   the dipolar potential: r2c with FFTW_MPI_TRANSPOSED_OUT, the kernel on
 *       the transposed (ky slab, kx, kz) spectrum, c2r with
 *       FFTW_MPI_TRANSPOSED_IN (section 6.2);
 *   pass A of the single-process kernels on the slab (exp(-i dt H1), the y
 *       and z solves);
 *   a transpose (MPI_Alltoallv) to x pencils (nx, nj, nz) -- y split evenly
 *       -- the x solve of the single-process kernels, the transpose back
 *       (section 6.2: "transpose, compute as before, transpose back"), or
 *       the x solve by substructuring (NLSE_DIPOLAR_XSOLVE_*);
 *   density and Simpson norm on the slab, the norm summed over the ranks
 *       in rank order (nlse_comm), so every rank takes the same decisions
 *       (imaginary-time normalisation, blow-up) and two runs with the same
 *       ranks give the same bits.
 * MPI appears only here and in the files of the `_mpi` extension.
 *
 * Collective calls (every rank of the communicator, in the same order):
 * create, set_couplings (when it makes the FFT plans), step, observe,
 * dd_potential.  A failure on one rank before a collective part stops the
 * call on every rank; the ranks that did not fail return NLSE_ERR_INTERNAL
 * with a message starting with NLSE_DIPOLAR_MPI_PEER.
 */
#ifndef NLSEPY_DIPOLAR_MPI_H
#define NLSEPY_DIPOLAR_MPI_H

#include <stddef.h>
#include <mpi.h>
#include "nlsepy/common.h"
#include "nlsepy/dipolar.h"

/* The x solve's path (NLSE_DIPOLAR_XSOLVE_*, nlsepy/dipolar.h): on CPU ranks
 * substructuring unless every rank's NLSEPY_DIPOLAR_XSOLVE says
 * "transpose" (dipolar_tuning.h, read when the solver is created). */

/* Message prefix of a call stopped because another rank failed. */
#define NLSE_DIPOLAR_MPI_PEER NLSE_DIPOLAR_PEER

typedef struct nlse_dipolar_mpi nlse_dipolar_mpi;

/* The x rows this rank holds for a grid of nx x rows (shape: the 3 global
 * points): FFTW's slab.  Not collective. */
int nlse_dipolar_mpi_slab(MPI_Comm comm, const size_t shape[3], size_t *ni, size_t *i0);

/* Collective.  p: the global problem (geometry 3D); red: rank-ordered sums
 * over the same ranks (kept, not owned).  The state starts as the slab of
 * the trap's Gaussian. */
int nlse_dipolar_mpi_create(const nlse_dipolar_params *p, MPI_Comm comm, const nlse_comm *red,
                            nlse_dipolar_mpi **out);
void nlse_dipolar_mpi_destroy(nlse_dipolar_mpi *s);

/* NLSE_DIPOLAR_XSOLVE_* of this solver. */
int nlse_dipolar_mpi_x_solve(const nlse_dipolar_mpi *s);

/* This rank's rows (ni, i0) and the y split of the x pencils (nj, j0). */
void nlse_dipolar_mpi_local(const nlse_dipolar_mpi *s, size_t *ni, size_t *i0, size_t *nj,
                            size_t *j0);

/* State, potential, obstacle, couplings, dt: as nlse_dipolar_*, arrays of
 * the local slab (ni, ny, nz). */
int nlse_dipolar_mpi_set_state(nlse_dipolar_mpi *s, const void *psi, int is_complex);
int nlse_dipolar_mpi_get_state(const nlse_dipolar_mpi *s, void *out);
int nlse_dipolar_mpi_state_is_real(const nlse_dipolar_mpi *s);
int nlse_dipolar_mpi_set_dt(nlse_dipolar_mpi *s, double dt);
int nlse_dipolar_mpi_set_couplings(nlse_dipolar_mpi *s, double g, double gdd); /* collective */
int nlse_dipolar_mpi_set_potential(nlse_dipolar_mpi *s, const void *U);
int nlse_dipolar_mpi_set_obstacle(nlse_dipolar_mpi *s, const nlse_dipolar_obstacle *o);

/* Collective: as nlse_dipolar_step (every rank takes the same n steps). */
int nlse_dipolar_mpi_step(nlse_dipolar_mpi *s, int mode, long n, double t0, double dg,
                          double dgdd, long *done);
/* Collective: the observables of the whole grid, the same on every rank. */
int nlse_dipolar_mpi_observe(nlse_dipolar_mpi *s, double t, nlse_dipolar_obs *out);
/* Collective: V_dd * |Psi|^2 on the local slab. */
int nlse_dipolar_mpi_dd_potential(nlse_dipolar_mpi *s, double *out);
/* V(r, t) on the local slab. */
int nlse_dipolar_mpi_potential(nlse_dipolar_mpi *s, double t, double *out);
/* This slab's part of nlse_dipolar_density (the x axis, when kept, has the
 * local rows; summing the ranks' parts of the other masks gives the
 * integral). */
int nlse_dipolar_mpi_density_part(const nlse_dipolar_mpi *s, int keep_mask, double *out);
/* The kernel on the local x rows of the r2c frequency grid (ni, ny, nz/2+1). */
int nlse_dipolar_mpi_kernel(const nlse_dipolar_mpi *s, double *out);

double nlse_dipolar_mpi_bytes_per_point_step(const nlse_dipolar_mpi *s, int mode);
size_t nlse_dipolar_mpi_memory_bytes(const nlse_dipolar_mpi *s);
/* Seconds of the last step call: [0] all, [1] transposes for the x solve
 * (MPI_Alltoallv and packing), [2] the dipolar FFTs (with their own
 * transposes), [3] the norm reductions. */
void nlse_dipolar_mpi_timings(const nlse_dipolar_mpi *s, double out[4]);

#endif /* NLSEPY_DIPOLAR_MPI_H */
