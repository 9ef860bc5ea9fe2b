/*
 * nlsepy/dec.h -- the Gross-Pitaevskii equation by discrete exterior
 * calculus on crystal-structure grids (Kivioja, Mönkölä, Rossi, source 001,
 * sections 3-4):
 *
 *     i dPsi/dt = [-1/2 Lap + V + g |Psi|^2] Psi = H(Psi) Psi,
 *     (H psi)_i = sum_j w_ij (psi_i - psi_ij) + (V_i + g |psi_i|^2) psi_i,
 *     w_ij      = |F_ij| / (2 |E*_ij| |B_i|)                        (eq. 8)
 *
 * with the unknowns psi_i at the circumcentres of the 3-cells B_i of a
 * periodic crystal complex built by tiling one block (its cells, faces and
 * dual edges come from the caller as the block table below).
 *
 * Ordering of the unknowns: cell c of block (bx, by, bz) is
 *     i = ((bz * ny + by) * nx + bx) * cells + c,
 * z slowest, so that a z slab of blocks is one contiguous range (the
 * domain split of section 4.2).
 *
 * Time stepping: real time by the central difference (leapfrog) of eq. 12,
 *     psi(n+1) = psi(n-1) - 2 i dt H(psi(n)) psi(n),
 * started from a given psi(-dt) or by one classic RK4 step; imaginary time
 * by the normalised explicit Euler step psi <- psi - dt H(psi) psi, then
 * psi <- psi * sqrt(N / norm(psi)).
 *
 * The potential at cell i is the trap 1/2 (wx^2 x^2 + wy^2 y^2 + wz^2 z^2)
 * at its circumcentre (computed in the kernels, never stored) plus, when
 * set, a per-cell array.
 */
#ifndef NLSEPY_DEC_H
#define NLSEPY_DEC_H

#include <stddef.h>
#include "nlsepy/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nlse_dec_params {
    int cells;          /* cells per block m_s, 1 .. NLSE_DEC_MAX_CELLS       */
    int rows;           /* neighbour rows of the block table, 1 .. NLSE_DEC_MAX_ROWS */
    long blocks[3];     /* blocks along x, y, z, >= 1                        */
    double edge[3];     /* the block's edge lengths (spacing applied), > 0   */
    double origin[3];   /* position of the corner of block (0, 0, 0)         */
    int periodic;       /* 1: periodic; 0: psi = 0 outside the cuboid        */
    double trap[3];     /* trap frequencies wx, wy, wz (finite)              */
    double g;           /* nonlinearity (finite)                             */
    double dt;          /* time step, finite and > 0                         */
    int dtype;          /* NLSE_COMPLEX64 or NLSE_COMPLEX128                 */
} nlse_dec_params;

#define NLSE_DEC_MAX_CELLS 4096
#define NLSE_DEC_MAX_ROWS 65536

/* One block's complex (the values with the spacing applied):
 * cell c's neighbours are rows k = row_start[c] .. row_start[c+1]-1, each
 * neighbour the cell nbr_cell[k] of the block displaced by nbr_offset[3k..3k+2]
 * (each -1, 0 or 1), with the weight w = |F| / (2 |E*| |B_c|) > 0.
 * volume: |B_c| > 0; centre: 3 * cells, the circumcentre relative to the
 * block's corner. */
typedef struct nlse_dec_table {
    const int *row_start;
    const int *nbr_cell;
    const int *nbr_offset;
    const double *weight;
    const double *volume;
    const double *centre;
} nlse_dec_table;

typedef struct nlse_dec nlse_dec;

/* Check p and the table without allocating (named errors). */
int nlse_dec_check(const nlse_dec_params *p, const nlse_dec_table *t);

/* Number of unknowns: cells * nx * ny * nz. */
size_t nlse_dec_size(const nlse_dec_params *p);

/* Validate and allocate; the state starts at zero, no potential array. */
int nlse_dec_create(const nlse_dec_params *p, const nlse_dec_table *t, nlse_dec **out);
void nlse_dec_destroy(nlse_dec *s);

/* State psi(0) (interleaved complex of the solver's dtype, nlse_dec_size
 * values) and optionally psi(-dt) (NULL: the next real-time step starts by
 * RK4).  Both must be finite. */
int nlse_dec_set_state(nlse_dec *s, const void *psi, const void *psi_prev);
int nlse_dec_get_state(const nlse_dec *s, void *psi);

/* psi(t - dt) of the leapfrog into psi_prev and 1 into *have, or *have = 0
 * (psi_prev untouched) when the next real-time step starts by RK4. */
int nlse_dec_get_prev(const nlse_dec *s, void *psi_prev, int *have);

/* Per-cell potential added to the trap (real, working precision, finite),
 * or NULL for the trap alone. */
int nlse_dec_set_potential(nlse_dec *s, const void *V);

/* New time step (finite, > 0); the next real-time step restarts by RK4. */
int nlse_dec_set_dt(nlse_dec *s, double dt);

/* n >= 0 leapfrog steps (the first by RK4 when no psi(-dt) is at hand).
 * *done gets the steps completed.  When a step makes a value non-finite
 * it is dropped, the state stays at the last finite step (whose psi(-dt)
 * is lost: the next step restarts by RK4), *done counts the good steps and
 * NLSE_ERR_BLOWUP is returned. */
int nlse_dec_step(nlse_dec *s, long n, long *done);

/* n >= 0 normalised imaginary-time Euler steps keeping the norm `norm`
 * (> 0); blow-up as nlse_dec_step.  The next real-time step starts by RK4. */
int nlse_dec_imaginary(nlse_dec *s, long n, double norm, long *done);

/* norm = sum |B_i| |psi_i|^2, energy = sum |B_i| Re[conj(psi_i) (K psi)_i
 * + V_i |psi_i|^2 + (g/2) |psi_i|^4] with K the kinetic part of H (double
 * accumulation in a fixed order), over the own layers (nlse_dec_set_slab). */
int nlse_dec_observe(nlse_dec *s, double *norm, double *energy);

/* out = H(psi) psi for a state psi of the solver's dtype (the solver's
 * state is not touched). */
int nlse_dec_apply(nlse_dec *s, const void *psi, void *out);

/*
 * One z slab of a distributed grid (source 001, section 4.2): the solver's
 * nz layers of blocks are the global layers z_offset .. z_offset + nz - 1
 * (the trap is evaluated there), of which the local layers first ..
 * first + count - 1 are its own and the others halo copies of the
 * neighbours' layers.  The steps, nlse_dec_apply and nlse_dec_combine
 * compute the own layers only (the other layers of a result keep what the
 * buffer held: the caller refreshes the halos), and nlse_dec_observe, the
 * imaginary-time norm and the blow-up checks cover the own layers only.
 * A new solver is the whole grid (z_offset 0, every layer its own).
 */
int nlse_dec_set_slab(nlse_dec *s, long z_offset, long first, long count);

/* Layers first .. first + count - 1 (cells * nx * ny values each,
 * contiguous) of the current state out / in; set_layers refuses
 * non-finite values. */
int nlse_dec_get_layers(const nlse_dec *s, long first, long count, void *out);
int nlse_dec_set_layers(nlse_dec *s, long first, long count, const void *in);

/* The same layers to or from memory of the solver's backend (host memory
 * for the CPU, device memory for CUDA on the solver's device: a buffer of
 * this process, or another process's mapped by CUDA IPC): the
 * device-to-device halo exchange between the GPUs of one node.  Both
 * return when the copy is complete.  layers_from does not check the
 * values (halo layers come from a neighbour's finite step). */
int nlse_dec_layers_to(const nlse_dec *s, long first, long count, void *dst);
int nlse_dec_layers_from(nlse_dec *s, long first, long count, const void *src);

/* CUDA only: the halos of a z slab exchanged device to device as the
 * steps go (source 001, section 4.2), between the GPU ranks of one node.
 * nlse_dec_slab_buffers gives the addresses this process shares with its
 * neighbours by CUDA IPC, each the start of an allocation: [0] and [1] the
 * state's two buffers, [2] two arrival words.  nlse_dec_slab_connect takes
 * the lower and upper neighbours' ones as this process addresses them
 * (NULL: no neighbour on that side; both NULL: disconnect), and the layer
 * of the lower neighbour's slab that receives this slab's first own layer
 * (its upper halo) and of the upper neighbour's that receives the last
 * (its lower halo).  It needs the reduction table (nlse_dec_set_comm);
 * every process connects, and they pass a barrier, before any steps.
 * Then nlse_dec_step takes any number of real-time steps a call: each
 * step computes the first and last own layers on a stream of high
 * priority, copies them into the neighbours' halo layers and raises the
 * neighbours' arrival words, while the interior layers run on the
 * solver's stream; the next step's edges wait on the device for the
 * halos.  The host meets the other processes once a call, for the
 * blow-up check: the state at the call's start is kept (two more buffers
 * of the slab), and after a blow-up at step b on any process every one
 * takes it back and steps again to b, so the result is the last good
 * state, as without the connection.  nlse_dec_last_wait_seconds is then
 * the time the edges waited for the halos (communication not hidden). */
#define NLSE_DEC_SLAB_BUFFERS 3
int nlse_dec_slab_buffers(nlse_dec *s, void *out[NLSE_DEC_SLAB_BUFFERS]);
int nlse_dec_slab_connect(nlse_dec *s, void *const lower[NLSE_DEC_SLAB_BUFFERS],
                          long lower_layer, void *const upper[NLSE_DEC_SLAB_BUFFERS],
                          long upper_layer);

/* The reduction table of a distributed run (nlsepy/common.h), or NULL for
 * the whole system.  With a table, the imaginary-time norm is the sum over
 * every process's own layers, and each step's blow-up check is agreed
 * (c->max), so every process keeps or drops the same step.  Where the
 * table swaps halos (c->halo_start; the CPU solver), nlse_dec_step swaps
 * the new state's halo layers after each leapfrog step itself, overlapped
 * with its interior layers, and takes any number of steps per call;
 * otherwise (and after imaginary-time steps) the halos are refreshed
 * between steps by the caller, one step per call.  The caller starts the
 * leapfrog itself (by nlse_dec_combine) or gives psi(-dt): nlse_dec_step
 * refuses to start by RK4 with a table. */
int nlse_dec_set_comm(nlse_dec *s, const nlse_comm *c);

/* 1 when the next real-time step continues the leapfrog (psi(t - dt) is
 * at hand), 0 when it would start by RK4 (or s is NULL). */
int nlse_dec_has_prev(const nlse_dec *s);

/* out = x0 + (cre + i cim) H(x1) x1 on the own layers, in the arithmetic
 * of the steps (the stages of the RK4 start are combine(psi, psi, 0,
 * -dt/6), ... as in nlse_dec_step); out's other layers are x0's.  *bad is
 * 1 when a value of the own layers came out non-finite.  x0 may be out. */
int nlse_dec_combine(nlse_dec *s, const void *x0, const void *x1, double cre, double cim,
                     void *out, int *bad);

/* Bytes moved through memory per unknown and leapfrog step (traffic model). */
double nlse_dec_bytes_per_cell_step(const nlse_dec *s);

/* Seconds the last nlse_dec_step or nlse_dec_imaginary took. */
double nlse_dec_last_seconds(const nlse_dec *s);

/* Of those, the seconds the steps waited for their halo swaps (the swap's
 * part that their interior layers did not hide; 0 where the steps swap
 * no halos: see nlse_dec_set_comm). */
double nlse_dec_last_wait_seconds(const nlse_dec *s);

/* The kernel form of the backend's last application of H (a static
 * string): "rows" on the CPU; on CUDA "z marching", "rows, units by warps"
 * or "rows, units by thread blocks" ("" before the first). */
const char *nlse_dec_kernel(const nlse_dec *s);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_DEC_H */
