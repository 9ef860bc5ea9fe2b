/*
 * dec.cu -- CUDA backend of the DEC GPE on crystal grids (Kivioja, Mönkölä,
 * Rossi, source 001, eqs. 8 and 12, section 4.1), same C API as
 * csrc/dec/dec.c.
 *
 * The trap potential is computed from the circumcentre, so a leapfrog
 * step moves 48 B per unknown in complex128 (24 in complex64): read psi(n),
 * read and write psi(n-1).  Three kernel forms (bench/RESULTS.md, DEC
 * section):
 *
 * - z marching (k_march; cubic, FCC and BCC, 12 cells a block or fewer):
 *   a thread block takes a tile of blocks in x and y and a chunk of layers
 *   and walks up through it, holding four planes of psi(n) of the tile and
 *   its halo of one block in shared memory (copied in by cp.async one plane
 *   ahead) and two of psi(n-1).  Every neighbour then comes from shared
 *   memory, which replaces the seed's staging of a block's psi in shared
 *   memory and its permutation tables against bank conflicts (section
 *   4.1) with a staging of whole planes: the forms below are bound by the
 *   L2 traffic of their neighbour loads, short of the DRAM bandwidth; this
 *   one reads psi(n) about once from DRAM and (TX + 2)(TY + 2) / (TX TY)
 *   times from L2.  It is then bound by the shared-memory pipe, so
 *   by default (F > 0) each thread holds its cells' diagonal, neighbour
 *   count and the trap's x and y part for the whole chunk, reads a
 *   neighbour's weight and place in one conflict-free load from a q-major
 *   copy of the table, and the threads of a row take its cells grouped by
 *   neighbour count (FCC's tetrahedra and octahedra in warps of their own):
 *   about half the shared-memory wavefronts a cell of the plain form.
 * - Rows of work units, each a stretch of at most 256 cells of one row of
 *   blocks (fixed by, bz), so a warp reads psi(n) and psi(n-1) coalesced,
 *   taken in order from an atomic counter so that the neighbouring planes
 *   of psi(n) are still in L2 when their second and third readers come
 *   (planes wider than 8 MiB swept in y tiles); neighbours read through the
 *   read-only cache.  In complex128 on C15 and Z a thread block takes a
 *   unit at a time, its warps sweeping the unit's cells together so that
 *   the unit's neighbour loads meet in L1 (k_apply, under 32 registers).
 *   On A15, and in complex64 on C15 and Z, each warp takes units of its
 *   own and asks for the next while it works on this one, with the lean
 *   k_rows (a unit's row worked out once, the table q-major, a cell's own
 *   psi(n) and psi(n-1) loaded before its neighbours); on A15 in
 *   complex128 and on C15 and Z in complex64 psi(n-1) is read and the
 *   results written streamed (__ldcs, __stcs), so that they do not push
 *   the planes of psi(n) out of L2 (k_apply_w, the warps' form without the
 *   lean row, is NLSEPY_DEC_KERNEL=8).  Real-time steps in complex64 on
 *   A15, C15 and Z take k_pairs instead: k_rows with two cells a lane,
 *   whose own values and results move in 16-byte loads and stores
 *   (streamed on C15 and Z), at 64 registers and four thread blocks an
 *   SM; imaginary time keeps k_rows.  On A15, C15 and Z the block's cells are in the order
 *   of nlsepy.dec.grids._row_order, made for these gathers.
 *
 * The block table (neighbour cells and offsets, the interior index
 * distances, the weights, the diagonal, the circumcentres) is staged in
 * shared memory once per thread block.  NLSEPY_DEC_KERNEL = 0..9, 18, 21, 23..29
 * picks one form for every grid (the table of variants in launch_n); all
 * forms sum the neighbours in the same order and give the same bits.  The
 * tuning switches (NLSEPY_DEC_*, csrc/dec/dec_tuning.h) are read once,
 * when a solver is created, into s->tune.
 *
 * Blow-up: a kernel that produces a non-finite value records the step in a
 * device word; later launches of the chunk return at once, so the last
 * finite state is kept without a host round-trip per step.
 *
 * One z slab of a distributed grid (section 4.2, nlse_dec_set_slab): the
 * work units cover the own layers only and the trap is evaluated at the
 * global layer; with a reduction table (nlse_dec_set_comm) the steps are
 * taken one at a time, each one's blow-up flag and the imaginary-time norm
 * agreed over the processes on the host; the halo layers move host-staged
 * (nlse_dec_get/set_layers) or device to device (nlse_dec_layers_to /
 * from: peer copies to and from buffers shared by CUDA IPC between the GPUs
 * of one node).
 */
#include <cuda.h> /* the stream memory operations' types (driver entry points) */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dec/dec_internal.h"
#include "dec/dec_tuning.h"
#include "nlsepy/common.h"
#include "nlsepy/dec.h"

#include "common/check.cuh"
#include "common/reduce.cuh"

#define NONE 0xffffffffffffffffULL
#define SMEM_MAX (48 * 1024)

/* Division by a runtime constant d >= 1 of any 32-bit n: a multiply-high,
 * an add and two shifts (Granlund and Montgomery's round-up method). */
struct FastDiv {
    unsigned m, s1, s2;
};

static FastDiv fastdiv(unsigned d)
{
    unsigned l = 0;
    while (l < 32 && (1ull << l) < d)
        ++l;
    FastDiv f;
    f.m = (unsigned)(((1ull << 32) * ((1ull << l) - d)) / d + 1);
    f.s1 = l < 1 ? l : 1;
    f.s2 = l > 1 ? l - 1 : 0;
    return f;
}

__device__ __forceinline__ unsigned fdiv(unsigned n, FastDiv f)
{
    const unsigned t = __umulhi(n, f.m);
    return (t + ((n - t) >> f.s1)) >> f.s2;
}

/* Grid and trap as the kernels see them. */
struct DGeo {
    unsigned nx, ny, nz, cells, row_len;  /* row_len = nx * cells */
    unsigned z0, zc;  /* the own layers z0 .. z0 + zc - 1 (the work units') */
    int zoff;         /* global index of layer 0 (the trap's z)              */
    /* work units: stretches of blockDim cells of a row of blocks (chunks per
     * row), ordered by y tiles of ty rows, then z, then y, then the stretch:
     * the GPU sweeps z through one y tile at a time, so the neighbours'
     * planes of psi(n) stay in L2 between their reads */
    unsigned chunks, units, ty, full_units, tile_units;
    FastDiv d_cells, d_chunks, d_tile, d_tyc, d_ryc;
    int periodic;
    double ox, oy, oz, ex, ey, ez, hx, hy, hz;
    /* byte offsets of the table's arrays in shared memory */
    unsigned o_start, o_cell, o_delta, o_w, o_diag, o_cen, o_vol, bytes;
};

/* The table's arrays in shared memory. */
template <typename R> struct STab {
    const int *start, *cell, *delta;
    const R *w, *diag;
    const double *cen, *vol;
};

/* k_march's tiles: TX x TY blocks of a plane with a halo of one block,
 * marched along z over chunks of zlen layers.  A work unit is one tile and
 * one chunk (units ordered by chunk, then band of tile columns, then tile
 * row, then tile: march_tile). */
struct MGeo {
    unsigned TX, TY, ntx, nty, zlen, units;
    unsigned tile_cells; /* TX TY cells: the cells a plane of the tile computes */
    unsigned hrow;       /* (TX + 2) cells: one row of blocks of the plane with its halo */
    unsigned ps;         /* (TY + 2) hrow: a plane with its halo */
    unsigned txc;        /* TX cells */
    unsigned cpt;        /* cells a thread takes in a plane: tile_cells / 256, rounded up */
    unsigned ns;         /* plane slots of the ring: 4, or 5 and 6 to copy planes two and
                          * three ahead (F > 0 only); ns - 2 slots of psi(n-1) */
    unsigned band;       /* tile columns of a band (march_tile) */
    FastDiv d_hrow, d_tiles, d_txc;
    bool hoist;          /* k_march F > 0: the cells' table values held (o_qt) */
    unsigned o_mo, o_qt, o_rp, o_rel, o_pl, o_x0, bytes; /* shared memory: offsets and size */
};

template <typename R>
__device__ __forceinline__ STab<R> stage_table(const DGeo &G, const unsigned char *tab,
                                               unsigned char *smem)
{
    const int *src = (const int *)tab;
    int *dst = (int *)smem;
    for (unsigned q = threadIdx.x; q < G.bytes / 4; q += blockDim.x)
        dst[q] = src[q];
    __syncthreads();
    STab<R> T;
    T.start = (const int *)(smem + G.o_start);
    T.cell = (const int *)(smem + G.o_cell);
    T.delta = (const int *)(smem + G.o_delta);
    T.w = (const R *)(smem + G.o_w);
    T.diag = (const R *)(smem + G.o_diag);
    T.cen = (const double *)(smem + G.o_cen);
    T.vol = (const double *)(smem + G.o_vol);
    return T;
}

/* Block index b on an axis of n blocks, wrapped into 0 .. n-1 when it lies
 * outside; true when it did and the boundary is not periodic (psi = 0 there). */
__device__ __forceinline__ bool wrap_axis(int &b, int n, int periodic)
{
    bool zero = false;
    if (b < 0 || b >= n) {
        zero = !periodic;
        b = b < 0 ? b + n : b - n;
    }
    return zero;
}

/* sum_k w_k x_j over the neighbours of cell c (index i) of block (bx, by, bz);
 * inside the grid the loads go in groups of UNR (the sum keeps the order of k) */
template <typename R, int MAXN, int UNR = 1>
__device__ __forceinline__ void nsum(const DGeo &G, const STab<R> &T, const typename Vec2<R>::T *x,
                                     size_t i, int c, int bx, int by, int bz, bool interior,
                                     R &sr, R &si)
{
    typedef typename Vec2<R>::T C2;
    R ar = 0, ai = 0;
    const int k0 = T.start[c], k1 = T.start[c + 1];
    if (MAXN > 0 && interior) {
        /* every neighbour load issued before the first use (a cell has at
         * most MAXN neighbours), then the sum in the order of k */
        C2 v[MAXN > 0 ? MAXN : 1];
#pragma unroll
        for (int q = 0; q < MAXN; ++q)
            if (k0 + q < k1)
                v[q] = __ldg(x + (ptrdiff_t)i + T.delta[k0 + q]);
#pragma unroll
        for (int q = 0; q < MAXN; ++q)
            if (k0 + q < k1) {
                ar += T.w[k0 + q] * v[q].x;
                ai += T.w[k0 + q] * v[q].y;
            }
    } else if (interior) {
        int k = k0;
        if (UNR > 1)
            for (; k + UNR <= k1; k += UNR) {
                C2 v[UNR > 1 ? UNR : 1];
#pragma unroll
                for (int q = 0; q < UNR; ++q)
                    v[q] = __ldg(x + (ptrdiff_t)i + T.delta[k + q]);
#pragma unroll
                for (int q = 0; q < UNR; ++q) {
                    ar += T.w[k + q] * v[q].x;
                    ai += T.w[k + q] * v[q].y;
                }
            }
        for (; k < k1; ++k) {
            const C2 v = __ldg(x + (ptrdiff_t)i + T.delta[k]);
            ar += T.w[k] * v.x;
            ai += T.w[k] * v.y;
        }
    } else {
        const int n[3] = {(int)G.nx, (int)G.ny, (int)G.nz};
        for (int k = k0; k < k1; ++k) {
            const int code = T.cell[k];
            int nb[3] = {bx + ((code >> 4) & 3) - 1, by + ((code >> 2) & 3) - 1,
                         bz + (code & 3) - 1};
            bool outside = false;
            for (int q = 0; q < 3; ++q)
                outside |= wrap_axis(nb[q], n[q], G.periodic);
            if (outside)
                continue;
            const size_t j = ((size_t)((size_t)nb[2] * G.ny + nb[1]) * G.nx + nb[0]) * G.cells +
                             (unsigned)(code >> 6);
            const C2 v = __ldg(x + j);
            ar += T.w[k] * v.x;
            ai += T.w[k] * v.y;
        }
    }
    sr = ar;
    si = ai;
}

/* The row (by, bz) of work unit u and the place q0 of its first cell in the row. */
__device__ __forceinline__ void unit_row(const DGeo &G, unsigned u, unsigned &by, unsigned &bz,
                                         unsigned &q0)
{
    unsigned t, rem, slab;
    FastDiv dslab;
    if (u < G.full_units) {
        t = fdiv(u, G.d_tile);
        rem = u - t * G.tile_units;
        slab = G.ty * G.chunks;
        dslab = G.d_tyc;
    } else {
        t = G.ny / G.ty;
        rem = u - G.full_units;
        slab = (G.ny - t * G.ty) * G.chunks;
        dslab = G.d_ryc;
    }
    const unsigned zz = fdiv(rem, dslab);
    bz = G.z0 + zz;
    const unsigned r2 = rem - zz * slab, yy = fdiv(r2, G.d_chunks);
    by = t * G.ty + yy;
    q0 = (r2 - yy * G.chunks) * blockDim.x;
}

/* The cell of thread threadIdx.x in work unit u: false past the row's end. */
__device__ __forceinline__ bool unit_cell(const DGeo &G, unsigned u, unsigned &by, unsigned &bz,
                                          unsigned &bx, int &c, unsigned &q,
                                          unsigned t_in = 0xffffffffu)
{
    const unsigned tid = t_in == 0xffffffffu ? threadIdx.x : t_in;
    unit_row(G, u, by, bz, q);
    q += tid;
    if (q >= G.row_len)
        return false;
    bx = fdiv(q, G.d_cells);
    c = (int)(q - bx * G.cells);
    return true;
}

template <typename R>
__device__ __forceinline__ R trap(const DGeo &G, const STab<R> &T, int c, int bx, int by, int bz)
{
    const double x = G.ox + (double)bx * G.ex + T.cen[3 * c];
    const double y = G.oy + (double)by * G.ey + T.cen[3 * c + 1];
    const double z = G.oz + (double)((int)bz + G.zoff) * G.ez + T.cen[3 * c + 2];
    return (R)(G.hx * x * x + G.hy * y * y + G.hz * z * z);
}

/* The block's sum of v into part[block] (the kernels' imaginary-time
 * norm parts). */
__device__ __forceinline__ void store_part(double v, double *red, double *part)
{
    const double s = nlse_block_sum(v, red);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

/* a + (cre + i cim) (d x - s) with d = dg + (v + g |x|^2) (a only when
 * `add`): the new value of a cell (cell_store, k_pairs). */
template <typename R>
__device__ __forceinline__ typename Vec2<R>::T cell_value(R g, R dg, R v, typename Vec2<R>::T a,
                                                          typename Vec2<R>::T x, R sr, R si,
                                                          bool add, R cre, R cim)
{
    const R d = dg + (v + g * (x.x * x.x + x.y * x.y));
    const R hr = d * x.x - sr, hi = d * x.y - si;
    typename Vec2<R>::T o;
    o.x = cre * hr - cim * hi;
    o.y = cre * hi + cim * hr;
    if (add) {
        o.x = a.x + o.x;
        o.y = a.y + o.y;
    }
    return o;
}

/* out[i] = a + (cre + i cim) (d x - s) with d = dg + (v + g |x|^2), psi(n)
 * = x at the cell, s = the weighted neighbour sum (sr, si), a = psi(n-1)
 * when `add`, v the potential there and dg the cell's diagonal; flags a
 * non-finite value and returns out[i]. */
template <typename R, bool ST = false>
__device__ __forceinline__ typename Vec2<R>::T cell_store(R g, R dg, R v,
                                                          typename Vec2<R>::T *out,
                                                          typename Vec2<R>::T a,
                                                          typename Vec2<R>::T x, R sr, R si,
                                                          bool add, R cre, R cim, size_t i,
                                                          unsigned long long step,
                                                          unsigned long long *bad)
{
    const typename Vec2<R>::T o = cell_value<R>(g, dg, v, a, x, sr, si, add, cre, cim);
    if (ST)
        __stcs(out + i, o); /* streamed: not kept in the caches */
    else
        out[i] = o;
    if (!(isfinite(o.x) && isfinite(o.y)))
        atomicMin(bad, step);
    return o;
}

/* |B| |o|^2 in double: a cell's part of the norm. */
template <typename R>
__device__ __forceinline__ double cell_norm(double vol, typename Vec2<R>::T o)
{
    return vol * ((double)o.x * o.x + (double)o.y * o.y);
}

/* cell_store at the cell (bx, by, bz, c), its potential and diagonal
 * taken from the table; returns |B| |out|^2. */
template <typename R, bool HASV, bool ST = false>
__device__ __forceinline__ double cell_out(const DGeo &G, const STab<R> &T, R g,
                                           typename Vec2<R>::T *out, typename Vec2<R>::T a,
                                           typename Vec2<R>::T x, R sr, R si, bool add, R cre,
                                           R cim, const R *__restrict__ V, size_t i, int c, int bx,
                                           int by, int bz, unsigned long long step,
                                           unsigned long long *bad)
{
    R v = trap<R>(G, T, c, bx, by, bz);
    if (HASV)
        v = v + V[i];
    const typename Vec2<R>::T o =
        cell_store<R, ST>(g, T.diag[c], v, out, a, x, sr, si, add, cre, cim, i, step, bad);
    return cell_norm<R>(T.vol[c], o);
}

/* A cell's own psi(n) = x1[i] and psi(n-1) = x0[i] (0 without x0; streamed
 * past the caches with ST). */
template <typename R, bool ST>
__device__ __forceinline__ void own_loads(const typename Vec2<R>::T *x0,
                                          const typename Vec2<R>::T *__restrict__ x1, size_t i,
                                          typename Vec2<R>::T &a, typename Vec2<R>::T &x)
{
    x = __ldg(x1 + i);
    a.x = 0;
    a.y = 0;
    if (x0)
        a = ST ? __ldcs(x0 + i) : x0[i];
}

/* One cell of k_apply and k_apply_w: out[i] = x0[i] + (cre + i cim)
 * H(x1) x1 at cell (bx, by, bz, c); returns |B| |out|^2 (for the norm) and
 * flags a non-finite value.  With EARLY, x0[i] and x1[i] are loaded first,
 * so their trips to DRAM overlap the neighbours' loads. */
template <typename R, bool HASV, bool EARLY, int MAXN, int UNR, bool ST = false>
__device__ __forceinline__ double apply_cell(const DGeo &G, const STab<R> &T, R g,
                                             typename Vec2<R>::T *out,
                                             const typename Vec2<R>::T *x0,
                                             const typename Vec2<R>::T *__restrict__ x1, R cre,
                                             R cim, const R *__restrict__ V, size_t i, int c,
                                             unsigned bx, unsigned by, unsigned bz,
                                             unsigned long long step, unsigned long long *bad)
{
    typename Vec2<R>::T a, x;
    if (EARLY)
        own_loads<R, ST>(x0, x1, i, a, x);
    const bool interior = by > 0 && by + 1 < G.ny && bz > 0 && bz + 1 < G.nz && bx > 0 &&
                          bx + 1 < G.nx;
    R sr, si;
    nsum<R, MAXN, UNR>(G, T, x1, i, c, (int)bx, (int)by, (int)bz, interior, sr, si);
    if (!EARLY)
        own_loads<R, ST>(x0, x1, i, a, x);
    return cell_out<R, HASV, ST>(G, T, g, out, a, x, sr, si, x0 != NULL, cre, cim, V, i, c,
                                 (int)bx, (int)by, (int)bz, step, bad);
}

/* The start of a launch of k_apply or k_apply_w: block 0 clears the next
 * launch's counter, the table goes to shared memory; true when an earlier
 * launch of the chunk went non-finite (*bad set: this one does nothing). */
template <typename R>
__device__ __forceinline__ bool launch_start(const DGeo &G, const unsigned char *tab,
                                             unsigned char *smem,
                                             const unsigned long long *bad, unsigned *ctr,
                                             unsigned slot, int *skip, STab<R> *T)
{
    if (threadIdx.x == 0) {
        *skip = bad && *bad != NONE;
        if (blockIdx.x == 0)
            ctr[(slot + 1) % 3] = 0; /* the next launch's counter */
    }
    *T = stage_table<R>(G, tab, smem); /* its __syncthreads publishes skip */
    return *skip != 0;
}

/* out = x0 + (cre + i cim) H(x1) x1; x0 may be NULL or out.  With `part`,
 * the block's sum |B| |out|^2 goes to part[block] (the block's units fixed
 * by its index: the same sums on every run).  A non-finite output
 * records `step` in *bad; the launch does nothing when *bad is set. */
template <typename R, bool HASV, int MAXN, int MINB, int UNR = 1, bool ST = false>
__global__ void __launch_bounds__(256, MINB)
k_apply(DGeo G, const unsigned char *tab, R g, typename Vec2<R>::T *out,
        const typename Vec2<R>::T *x0, const typename Vec2<R>::T *__restrict__ x1, R cre, R cim,
        const R *__restrict__ V, unsigned long long step, unsigned long long *bad, double *part,
        unsigned *ctr, unsigned slot)
{
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int skip;
    __shared__ unsigned su;
    __shared__ double red[32];
    STab<R> T;
    if (launch_start<R>(G, tab, smem, bad, ctr, slot, &skip, &T))
        return;
    double nn = 0;
    unsigned next = blockIdx.x;
    for (;;) {
        /* units are handed out in order, so the resident thread blocks work
         * on neighbouring units at any moment (a fixed stride would let
         * them drift apart and the planes of psi(n) fall out of L2); with
         * `part` (imaginary time) each block takes a fixed share instead, so
         * its part of the norm, and the norm, do not depend on the scheduling */
        if (threadIdx.x == 0) {
            if (part) {
                su = next;
                next += gridDim.x;
            } else {
                su = atomicAdd(ctr + slot, 1u);
            }
        }
        __syncthreads();
        const unsigned u = su;
        __syncthreads();
        if (u >= G.units)
            break;
        unsigned by, bz, bx, q;
        int c;
        if (!unit_cell(G, u, by, bz, bx, c, q))
            continue;
        const size_t i = (size_t)(bz * G.ny + by) * G.row_len + q;
        const double o2 = apply_cell<R, HASV, false, MAXN, UNR, ST>(
            G, T, g, out, x0, x1, cre, cim, V, i, c, bx, by, bz, step, bad);
        if (part)
            nn += o2;
    }
    if (part)
        store_part(nn, red, part);
}

/* k_apply with the work units taken by warps, not thread blocks (the
 * default on grids of fewer than 64 cells a block; NLSEPY_DEC_KERNEL=3 to 8
 * in launch_n): a warp sweeps a unit's cells 32 at a time
 * and asks for its next unit while it works on this one, so no warp waits
 * at a barrier for the block's slowest warp or for the counter.  With
 * `part` each warp takes a fixed share of the units (same sums on every
 * run). */
template <typename R, bool HASV, bool EARLY, int MINB, int UNR, bool ST = false>
__global__ void __launch_bounds__(256, MINB)
k_apply_w(DGeo G, const unsigned char *tab, R g, typename Vec2<R>::T *out,
          const typename Vec2<R>::T *x0, const typename Vec2<R>::T *__restrict__ x1, R cre,
          R cim, const R *__restrict__ V, unsigned long long step, unsigned long long *bad,
          double *part, unsigned *ctr, unsigned slot)
{
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int skip;
    __shared__ double red[32];
    STab<R> T;
    if (launch_start<R>(G, tab, smem, bad, ctr, slot, &skip, &T))
        return;
    const unsigned lane = threadIdx.x & 31u, nw = blockDim.x >> 5;
    const unsigned wg = blockIdx.x * nw + (threadIdx.x >> 5), W = gridDim.x * nw;
    double nn = 0;
    unsigned nxt = 0, u = wg;
    if (!part && lane == 0)
        nxt = atomicAdd(ctr + slot, 1u);
    for (;;) {
        if (!part) {
            u = __shfl_sync(0xffffffffu, nxt, 0);
            if (lane == 0)
                nxt = atomicAdd(ctr + slot, 1u); /* the next unit, asked for now */
        }
        if (u >= G.units)
            break;
        for (unsigned t = lane; t < blockDim.x; t += 32) {
            unsigned by, bz, bx, q;
            int c;
            if (!unit_cell(G, u, by, bz, bx, c, q, t))
                break;
            const size_t i = (size_t)(bz * G.ny + by) * G.row_len + q;
            const double o2 = apply_cell<R, HASV, EARLY, 0, UNR, ST>(
                G, T, g, out, x0, x1, cre, cim, V, i, c, bx, by, bz, step, bad);
            if (part)
                nn += o2;
        }
        if (part)
            u += W;
    }
    if (part)
        store_part(nn, red, part);
}

/* A neighbour's weight and index distance, one load (k_rows). */
template <typename R> struct __align__(2 * sizeof(R)) QD {
    R w;
    int d;
};

/* k_rows' copies of the table in shared memory past the staged table
 * (o_ext): the neighbours q-major, QD qd[q cells + c] (rows past a cell's
 * last: weight 0, distance 0), then the circumcentres by axis, cx, cy, cz. */
template <typename R> __host__ __device__ __forceinline__ unsigned rows_qd_bytes(int maxn, unsigned cells)
{
    return ((unsigned)maxn * cells * (unsigned)sizeof(QD<R>) + 15u) & ~15u;
}

/* Stage k_rows' and k_pairs' copies of the table at ext (see rows_qd_bytes);
 * *qd and *cx point to them after the barrier. */
template <typename R, int MAXN>
__device__ __forceinline__ void rows_stage(const DGeo &G, const STab<R> &T, unsigned char *ext,
                                           const QD<R> **qd_out, const double **cx_out)
{
    const int C = (int)G.cells;
    QD<R> *qd = (QD<R> *)ext;
    double *cx = (double *)(ext + rows_qd_bytes<R>(MAXN, G.cells));
    double *cy = cx + C, *cz = cy + C;
    for (int e = threadIdx.x; e < MAXN * C; e += blockDim.x) {
        const int q = e / C, c = e - q * C, k = T.start[c] + q;
        const bool in = k < T.start[c + 1];
        QD<R> v;
        v.w = in ? T.w[k] : (R)0;
        v.d = in ? T.delta[k] : 0;
        qd[e] = v;
    }
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        cx[c] = T.cen[3 * c];
        cy[c] = T.cen[3 * c + 1];
        cz[c] = T.cen[3 * c + 2];
    }
    __syncthreads();
    *qd_out = qd;
    *cx_out = cx;
}

/* Rows of units taken by warps, lean (the default in complex64 on grids of
 * more than 12 cells a block and, with ST, on A15 in complex128;
 * NLSEPY_DEC_KERNEL=23, 24 with ST; tables of at
 * most MAXN = 4 or 8 neighbours a cell): the units of k_apply_w, but a
 * unit's row and layer and the trap's y and z terms worked out once a unit
 * instead of once a cell, a neighbour's weight and index distance read in
 * one load from a q-major copy of the table (the k-major table's loads
 * meet four-way bank conflicts on tetrahedral grids), the circumcentres
 * from arrays by axis (conflict-free), the cell's own loads before its
 * neighbours' (EARLY below), and the norm's parts formed only with NORM.
 * Sums and trap in the order of k_apply_w: the same bits.
 * At most 48 registers in complex64 and 64 in complex128 (at 40 the
 * kernel spills). */
template <typename R, bool HASV, int MAXN, bool NORM, bool ST = false>
__global__ void __launch_bounds__(256, sizeof(R) == 4 ? 5 : 4)
k_rows(DGeo G, const unsigned char *tab, unsigned o_ext, R g, typename Vec2<R>::T *out,
       const typename Vec2<R>::T *x0, const typename Vec2<R>::T *__restrict__ x1, R cre,
       R cim, const R *__restrict__ V, unsigned long long step, unsigned long long *bad,
       double *part, unsigned *ctr, unsigned slot)
{
    typedef typename Vec2<R>::T C2;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int skip;
    __shared__ double red[32];
    STab<R> T;
    if (launch_start<R>(G, tab, smem, bad, ctr, slot, &skip, &T))
        return;
    const int C = (int)G.cells;
    const QD<R> *qd;
    const double *cx;
    rows_stage<R, MAXN>(G, T, smem + o_ext, &qd, &cx);
    const double *cy = cx + C, *cz = cy + C;
    /* a cell's psi(n) and psi(n-1) loaded before its neighbours, so that
     * their trips to DRAM overlap instead of following one another (the
     * neighbours' loads feed the sums, and the compiler keeps the loads
     * of the cell after them); not with NORM or 8 neighbours, whose
     * instances would spill more */
    const bool EARLY = !NORM && MAXN == 4;
    const unsigned lane = threadIdx.x & 31u, nw = blockDim.x >> 5;
    const unsigned wg = blockIdx.x * nw + (threadIdx.x >> 5), W = gridDim.x * nw;
    double nn = 0;
    unsigned nxt = 0, u = wg;
    if (!NORM && lane == 0)
        nxt = atomicAdd(ctr + slot, 1u);
    for (;;) {
        if (!NORM) {
            u = __shfl_sync(0xffffffffu, nxt, 0);
            if (lane == 0)
                nxt = atomicAdd(ctr + slot, 1u); /* the next unit, asked for now */
        }
        if (u >= G.units)
            break;
        unsigned by, bz, q0;
        unit_row(G, u, by, bz, q0);
        const size_t row = (size_t)(bz * G.ny + by) * G.row_len;
        const bool yz_in = by > 0 && by + 1 < G.ny && bz > 0 && bz + 1 < G.nz;
        const double yb = G.oy + (double)by * G.ey;               /* trap's y less cen */
        const double zb = G.oz + (double)((int)bz + G.zoff) * G.ez; /* trap's z less cen */
        for (unsigned t = lane; t < blockDim.x; t += 32) {
            const unsigned q = q0 + t;
            if (q >= G.row_len)
                break;
            const unsigned bx = fdiv(q, G.d_cells);
            const int c = (int)(q - bx * G.cells);
            const size_t i = row + q;
            C2 x, a;
            if (EARLY) /* the cell's own loads before the neighbours' */
                own_loads<R, ST>(x0, x1, i, a, x);
            R sr = 0, si = 0;
            if (yz_in && bx > 0 && bx + 1 < G.nx) {
                const int nk = T.start[c + 1] - T.start[c];
                R w[MAXN];
                C2 v[MAXN];
#pragma unroll
                for (int k = 0; k < MAXN; ++k)
                    if (k < nk) {
                        const QD<R> e = qd[k * C + c];
                        w[k] = e.w;
                        v[k] = __ldg(x1 + (ptrdiff_t)i + e.d);
                    }
#pragma unroll
                for (int k = 0; k < MAXN; ++k)
                    if (k < nk) {
                        sr += w[k] * v[k].x;
                        si += w[k] * v[k].y;
                    }
            } else {
                nsum<R, 0>(G, T, x1, i, c, (int)bx, (int)by, (int)bz, false, sr, si);
            }
            if (!EARLY)
                own_loads<R, ST>(x0, x1, i, a, x);
            const double xx = G.ox + (double)bx * G.ex + cx[c];
            const double yy = yb + cy[c], zz = zb + cz[c];
            R vv = (R)(G.hx * xx * xx + G.hy * yy * yy + G.hz * zz * zz);
            if (HASV)
                vv = vv + V[i];
            const C2 o = cell_store<R, ST>(g, T.diag[c], vv, out, a, x, sr, si, x0 != NULL, cre,
                                           cim, i, step, bad);
            if (NORM)
                nn += cell_norm<R>(T.vol[c], o);
        }
        if (NORM)
            u += W;
    }
    if (NORM)
        store_part(nn, red, part);
}

/* Two cells a lane (complex64, tables of exactly 4 neighbours a cell, an
 * even number of cells a block; the default of real-time steps in
 * complex64 on A15, C15 and Z; NLSEPY_DEC_KERNEL=28 streamed at 64
 * registers, 29 unstreamed, 27 streamed at 48): the units and order of
 * work of k_rows, but each lane takes the cells q and q + 1 (q even, so
 * both in one block) and moves their own psi(n), psi(n-1) and results in
 * 16-byte loads and stores, and their table entries (weights and
 * distances, circumcentres, diagonal) in 16-byte shared loads: the lane's
 * own stream is then the 16 bytes a load of complex128, at half the
 * load-store instructions a cell of k_rows.  With ST psi(n-1) is read and
 * the results written streamed (__ldcs, __stcs).  Sums and trap in the
 * order of k_rows: the same bits.  No norm parts (k_rows forms them). */
template <bool HASV, int MINB, bool ST>
__global__ void __launch_bounds__(256, MINB)
k_pairs(DGeo G, const unsigned char *tab, unsigned o_ext, float g, float2 *out,
        const float2 *x0, const float2 *__restrict__ x1, float cre, float cim,
        const float *__restrict__ V, unsigned long long step, unsigned long long *bad,
        unsigned *ctr, unsigned slot)
{
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int skip;
    STab<float> T;
    if (launch_start<float>(G, tab, smem, bad, ctr, slot, &skip, &T))
        return;
    const int C = (int)G.cells;
    const QD<float> *qd;
    const double *cx;
    rows_stage<float, 4>(G, T, smem + o_ext, &qd, &cx);
    const double *cy = cx + C, *cz = cy + C;
    const unsigned lane = threadIdx.x & 31u;
    unsigned nxt = 0;
    if (lane == 0)
        nxt = atomicAdd(ctr + slot, 1u);
    for (;;) {
        const unsigned u = __shfl_sync(0xffffffffu, nxt, 0);
        if (lane == 0)
            nxt = atomicAdd(ctr + slot, 1u); /* the next unit, asked for now */
        if (u >= G.units)
            break;
        unsigned by, bz, q0;
        unit_row(G, u, by, bz, q0);
        const size_t row = (size_t)(bz * G.ny + by) * G.row_len;
        const bool yz_in = by > 0 && by + 1 < G.ny && bz > 0 && bz + 1 < G.nz;
        const double yb = G.oy + (double)by * G.ey;
        const double zb = G.oz + (double)((int)bz + G.zoff) * G.ez;
        for (unsigned t = 2u * lane; t < blockDim.x; t += 64u) {
            const unsigned q = q0 + t;
            if (q >= G.row_len)
                break;
            const unsigned bx = fdiv(q, G.d_cells);
            const int c = (int)(q - bx * G.cells);
            const size_t i = row + q;
            const float4 x = __ldg((const float4 *)(x1 + i));
            float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
            if (x0)
                a = ST ? __ldcs((const float4 *)(x0 + i)) : *(const float4 *)(x0 + i);
            float sr0 = 0, si0 = 0, sr1 = 0, si1 = 0;
            if (yz_in && bx > 0 && bx + 1 < G.nx) {
                float4 e[4];
                float2 v0[4], v1[4];
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    e[k] = *(const float4 *)(qd + k * C + c); /* w, d of c and c + 1 */
                    v0[k] = __ldg(x1 + (ptrdiff_t)i + __float_as_int(e[k].y));
                    v1[k] = __ldg(x1 + (ptrdiff_t)i + 1 + __float_as_int(e[k].w));
                }
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    sr0 += e[k].x * v0[k].x;
                    si0 += e[k].x * v0[k].y;
                    sr1 += e[k].z * v1[k].x;
                    si1 += e[k].z * v1[k].y;
                }
            } else {
                nsum<float, 0>(G, T, x1, i, c, (int)bx, (int)by, (int)bz, false, sr0, si0);
                nsum<float, 0>(G, T, x1, i + 1, c + 1, (int)bx, (int)by, (int)bz, false, sr1,
                               si1);
            }
            const double xb = G.ox + (double)bx * G.ex;
            const double2 px = *(const double2 *)(cx + c), py = *(const double2 *)(cy + c),
                          pz = *(const double2 *)(cz + c);
            const double xx0 = xb + px.x, yy0 = yb + py.x, zz0 = zb + pz.x;
            const double xx1 = xb + px.y, yy1 = yb + py.y, zz1 = zb + pz.y;
            float vv0 = (float)(G.hx * xx0 * xx0 + G.hy * yy0 * yy0 + G.hz * zz0 * zz0);
            float vv1 = (float)(G.hx * xx1 * xx1 + G.hy * yy1 * yy1 + G.hz * zz1 * zz1);
            if (HASV) {
                const float2 vp = *(const float2 *)(V + i);
                vv0 = vv0 + vp.x;
                vv1 = vv1 + vp.y;
            }
            const float2 dg = *(const float2 *)(T.diag + c);
            const bool add = x0 != NULL;
            const float2 o0 = cell_value<float>(g, dg.x, vv0, make_float2(a.x, a.y),
                                                make_float2(x.x, x.y), sr0, si0, add, cre, cim);
            const float2 o1 = cell_value<float>(g, dg.y, vv1, make_float2(a.z, a.w),
                                                make_float2(x.z, x.w), sr1, si1, add, cre, cim);
            if (ST)
                __stcs((float4 *)(out + i), make_float4(o0.x, o0.y, o1.x, o1.y));
            else
                *(float4 *)(out + i) = make_float4(o0.x, o0.y, o1.x, o1.y);
            if (!(isfinite(o0.x) && isfinite(o0.y) && isfinite(o1.x) && isfinite(o1.y)))
                atomicMin(bad, step);
        }
    }
}

/* cp.async (sm_80 and later): B bytes (8 or 16) from global src to shared
 * dst without a trip through registers; groups committed and waited for. */
template <int B>
__device__ __forceinline__ void cp_async(void *dst, const void *src)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src), "n"(B));
}
/* The same, or B zero bytes without a read where zero is set. */
template <int B>
__device__ __forceinline__ void cp_async_z(void *dst, const void *src, bool zero)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(B),
                 "r"(zero ? 0 : B));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
/* cp_wait for n = 0, 1 or 2 groups left in flight */
__device__ __forceinline__ void cp_wait_n(int n)
{
    if (n <= 0)
        cp_wait<0>();
    else if (n == 1)
        cp_wait<1>();
    else
        cp_wait<2>();
}

/* Tile r0 of a chunk (column txi, row tyi): the tiles go in bands of
 * M.band tile columns, each band row by row, so that a tile's neighbours
 * in y are taken M.band units before and after it (the last band is
 * narrower where M.band does not divide the columns). */
__device__ __forceinline__ void march_tile(const MGeo &M, unsigned r0, unsigned &txi,
                                           unsigned &tyi)
{
    const unsigned bw = M.band, per = bw * M.nty, full = (M.ntx / bw) * per;
    if (r0 < full) {
        const unsigned b = r0 / per, r = r0 - b * per;
        tyi = r / bw;
        txi = b * bw + (r - tyi * bw);
    } else {
        const unsigned w = M.ntx - (M.ntx / bw) * bw, r = r0 - full;
        tyi = r / w;
        txi = M.ntx - w + (r - tyi * w);
    }
}

/* k_march's code of neighbour row k of cell c: plane dz + 1 in the low 2
 * bits, the offset from the cell's place in its plane above them. */
__device__ __forceinline__ int march_code(const DGeo &G, const MGeo &M, int code, int c)
{
    const int dx = ((code >> 4) & 3) - 1, dy = ((code >> 2) & 3) - 1, dz = (code & 3) - 1;
    const int off = (dy * (int)(M.TX + 2) + dx) * (int)G.cells + (code >> 6) - c;
    return (int)((unsigned)off << 2) + (dz + 1);
}

/* The place in a row of TX blocks (block times cells plus cell) that
 * k_march's thread r of the row takes when F > 0: the cells grouped by
 * their neighbour count, each group over the row's TX blocks, so that a
 * warp's cells have the same count where the groups fill whole warps
 * (FCC's tetrahedra and octahedra); the identity where all counts agree. */
__device__ __forceinline__ int march_place(const int *start, int C, int TX, int r)
{
    int base = 0, prev = -1;
    for (;;) {
        int k = 0x7fffffff, nk = 0;
        for (int c = 0; c < C; ++c) {
            const int n = start[c + 1] - start[c];
            k = n > prev && n < k ? n : k;
        }
        for (int c = 0; c < C; ++c)
            nk += start[c + 1] - start[c] == k;
        if (r < base + TX * nk) {
            const int r2 = r - base, bx = r2 / nk;
            int i = r2 - bx * nk;
            for (int c = 0; c < C; ++c)
                if (start[c + 1] - start[c] == k && i-- == 0)
                    return bx * C + c;
        }
        base += TX * nk;
        prev = k;
    }
}

/* A neighbour's weight and the byte offset of its psi(n) in the planes
 * from the cell's place in plane slot 0, one load (k_march F > 0). */
template <typename R> struct __align__(2 * sizeof(R)) QE {
    R w;
    int a;
};

/* k_march F > 0: the table's cells padded to QC, so that neighbour q of a
 * cell lies q QC entries on (an immediate offset); tables of more cells a
 * block keep the plain form. */
#define QC 16

/* Neighbour sum of a cell (k_march F > 0): qp the cell's row of the
 * table for this plane's phase, cb the cell's place in plane slot 0
 * (bytes); NQ neighbours, or with PRED the first nk of them; the loads
 * first (four at a time of eight), then the sums in the order of q (of
 * k): the bits of the plain form. */
template <typename R, int NQ, bool PRED = false>
__device__ __forceinline__ void held_sum(const QE<R> *qp, const unsigned char *cb, int nk, R &sr,
                                         R &si)
{
    typedef typename Vec2<R>::T C2;
    constexpr int H = NQ > 6 ? 4 : NQ; /* loads in flight at once (registers) */
    sr = 0;
    si = 0;
#pragma unroll
    for (int q0 = 0; q0 < NQ; q0 += H) {
        R w[H];
        C2 v[H];
#pragma unroll
        for (int q = 0; q < H; ++q)
            if (!PRED || q0 + q < nk) {
                const QE<R> e = qp[(q0 + q) * QC];
                w[q] = e.w;
                v[q] = *(const C2 *)(cb + e.a);
            }
#pragma unroll
        for (int q = 0; q < H; ++q)
            if (!PRED || q0 + q < nk) {
                sr += w[q] * v[q].x;
                si += w[q] * v[q].y;
            }
    }
}

/* k_apply by z marching (the default on cubic, FCC and BCC): a thread
 * block takes a tile of TX x TY blocks and a chunk of layers and walks up
 * through the chunk, keeping four planes of psi(n) of the tile and its halo
 * of one block in shared memory (z - 1, z, z + 1 and the one being copied
 * in) and two of psi(n-1); the copies of the planes z + 2 go by cp.async
 * while plane z is computed.  So every neighbour comes from shared memory
 * and psi(n) crosses L2 about (TX + 2)(TY + 2) / (TX TY) times a step
 * instead of once per neighbour (the other forms are bound by L2 traffic).
 * Halo blocks outside the grid are zero (bc "zero") or wrapped (periodic),
 * so no cell needs the boundary path; the neighbour sums keep the order of
 * k, so the results are those of the other forms bit for bit.
 *
 * F (the table held; the default, NLSEPY_DEC_KERNEL=21; MAXN 4 or 8): 1
 * in real time, 2 with the imaginary-time norm's parts; 0 the plain form
 * (NLSEPY_DEC_KERNEL=18, and every table of more neighbours).  A
 * thread keeps its cells' diagonal, neighbour count and the trap's x and y
 * terms in registers for the chunk, and reads neighbour q's weight and
 * place in one load from qt, the table q-major (a warp's loads of it meet
 * no bank conflict; the plain form reads start, mo, w, diag and cen from
 * the table every plane: about half its shared-memory wavefronts); the
 * threads of a row take its cells in the order of march_place; in
 * complex64 three thread blocks an SM (at most 80 registers: at two its
 * warps wait on latency; bench/RESULTS.md, DEC section).  The sums
 * and the trap are formed in the same order as in the plain form: the
 * same bits. */
template <typename R, bool HASV, int MAXN, int CPT, int F>
__global__ void __launch_bounds__(256, F > 0 && sizeof(R) == 4 ? 3 : 2)
k_march(DGeo G, MGeo M, const unsigned char *tab, R g, typename Vec2<R>::T *out,
        const typename Vec2<R>::T *x0, const typename Vec2<R>::T *__restrict__ x1, R cre,
        R cim, const R *__restrict__ V, unsigned long long step, unsigned long long *bad,
        double *part, unsigned *ctr, unsigned slot)
{
    typedef typename Vec2<R>::T C2;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int skip;
    __shared__ unsigned su;
    __shared__ double red[32];
    STab<R> T;
    if (launch_start<R>(G, tab, smem, bad, ctr, slot, &skip, &T))
        return;
    /* the plain form (F = 0): neighbour k of a cell at plane position pos
     * is plane dz + 1 (low 2 bits of mo[k]), position pos + (mo[k] >> 2) */
    int *mo = (int *)(smem + M.o_mo);
    if (F == 0)
        for (int c = threadIdx.x; c < (int)G.cells; c += blockDim.x)
            for (int k = T.start[c]; k < T.start[c + 1]; ++k)
                mo[k] = march_code(G, M, T.cell[k], c);
    /* F > 0: the table q-major for each phase p of the plane ring (plane
     * z - 1 in slot p), neighbour q of cell c at qt[(p MAXN + q) QC + c],
     * so a warp's load of it meets no bank conflict, with the neighbour's
     * byte offset from the cell's place in slot 0 (rows past the cell's
     * last: weight 0, the cell itself) */
    QE<R> *qt = (QE<R> *)(smem + M.o_qt);
    const int ns = (int)M.ns, ahead = ns - 3; /* planes copied ahead */
    constexpr int NQ = MAXN > 0 ? MAXN : 1;
    if (F > 0)
        for (int e = threadIdx.x; e < ns * NQ * QC; e += blockDim.x) {
            const int p = e / (NQ * QC), q = (e / QC) % NQ, c = e % QC;
            const bool has = c < (int)G.cells && T.start[c] + q < T.start[c + 1];
            const int t = has ? march_code(G, M, T.cell[T.start[c] + q], c) : 1;
            QE<R> v;
            v.w = has ? T.w[T.start[c] + q] : (R)0;
            v.a = ((((p + (t & 3)) % ns) * (int)M.ps) + (t >> 2)) * (int)sizeof(C2);
            qt[e] = v;
        }
    int *rp = (int *)(smem + M.o_rp);
    if (F > 0)
        for (int r = threadIdx.x; r < (int)M.txc; r += blockDim.x)
            rp[r] = march_place(T.start, (int)G.cells, (int)M.TX, r);
    /* the unit's offsets of its plane's elements within a layer (-1: zero) */
    int *rel = (int *)(smem + M.o_rel);
    C2 *pl = (C2 *)(smem + M.o_pl);
    C2 *xs = (C2 *)(smem + M.o_x0);
    const int nx = (int)G.nx, ny = (int)G.ny, nz = (int)G.nz;
    const size_t layer = (size_t)G.ny * G.row_len;
    double nn = 0;
    unsigned next = blockIdx.x;
    for (;;) {
        if (threadIdx.x == 0) {
            su = part ? next : atomicAdd(ctr + slot, 1u);
            next += gridDim.x;
        }
        __syncthreads(); /* also: the last unit's reads of rel are done */
        const unsigned u = su;
        if (u >= M.units)
            break;
        const unsigned zi = fdiv(u, M.d_tiles), r0 = u - zi * M.ntx * M.nty;
        unsigned txi, tyi;
        march_tile(M, r0, txi, tyi);
        const int tx0 = (int)(txi * M.TX), ty0 = (int)(tyi * M.TY);
        const int za = (int)(G.z0 + zi * M.zlen);
        const int zb = min(za + (int)M.zlen, (int)(G.z0 + G.zc));
        for (unsigned e = threadIdx.x; e < M.ps; e += blockDim.x) {
            const unsigned r = fdiv(e, M.d_hrow), col = e - r * M.hrow;
            const unsigned bxo = fdiv(col, G.d_cells), c = col - bxo * G.cells;
            int by = ty0 - 1 + (int)r, bx = tx0 - 1 + (int)bxo;
            const bool zero = wrap_axis(by, ny, G.periodic) | wrap_axis(bx, nx, G.periodic);
            rel[e] = zero ? -1 : (int)(((unsigned)by * G.nx + (unsigned)bx) * G.cells + c);
        }
        /* this thread's cells of the tile: position in the plane, offset
         * within a layer (-1: past the grid's edge), cell of the block */
        int pos[CPT], ir[CPT], cc[CPT], bxs[CPT], bys[CPT];
#pragma unroll
        for (int m = 0; m < CPT; ++m) {
            const unsigned j = threadIdx.x + 256u * m;
            const unsigned ty = fdiv(j, M.d_txc), r = j - ty * M.txc;
            const unsigned rem = F > 0 ? (unsigned)rp[r] : r; /* place in the row */
            const unsigned bxo = fdiv(rem, G.d_cells);
            cc[m] = (int)(rem - bxo * G.cells);
            bxs[m] = tx0 + (int)bxo;
            bys[m] = ty0 + (int)ty;
            pos[m] = (int)((ty + 1) * M.hrow + G.cells + rem);
            ir[m] = j < M.tile_cells && bxs[m] < nx && bys[m] < ny
                        ? (int)(((unsigned)bys[m] * G.nx + (unsigned)tx0) * G.cells + rem)
                        : -1;
        }
        /* F > 0: the cells' diagonal, neighbour count and the trap's x and
         * y part (the first two terms of trap's sum) held for the chunk */
        constexpr int NH = F > 0 ? CPT : 1;
        R dg[NH];
        int nk2[NH];
        double vxy[NH];
        if (F > 0) {
#pragma unroll
            for (int m = 0; m < NH; ++m) {
                const int c = cc[m];
                dg[m] = T.diag[c];
                nk2[m] = T.start[c + 1] - T.start[c];
                const double x = G.ox + (double)bxs[m] * G.ex + T.cen[3 * c];
                const double y = G.oy + (double)bys[m] * G.ey + T.cen[3 * c + 1];
                vxy[m] = G.hx * x * x + G.hy * y * y;
            }
        }
        __syncthreads(); /* rel */
        /* psi(n) of layer zz (tile and halo) into plane slot sl */
        auto fetch_plane = [&](int zz, int sl) {
            C2 *dst = pl + (size_t)sl * M.ps;
            const bool zero = wrap_axis(zz, nz, G.periodic);
            const C2 *src = zero ? x1 : x1 + (size_t)zz * layer;
            for (unsigned e = threadIdx.x; e < M.ps; e += blockDim.x) {
                const int o = rel[e];
                const bool z0 = zero || o < 0; /* zeros, nothing read */
                cp_async_z<sizeof(C2)>(dst + e, src + (z0 ? 0 : o), z0);
            }
        };
        /* psi(n-1) of the thread's cells of layer zz into slot sl */
        auto fetch_x0 = [&](int zz, int sl) {
            if (!x0)
                return;
            C2 *dst = xs + (size_t)sl * M.tile_cells + threadIdx.x;
            const C2 *src = x0 + (size_t)zz * layer;
#pragma unroll
            for (int m = 0; m < CPT; ++m)
                if (ir[m] >= 0)
                    cp_async<sizeof(C2)>(dst + 256 * m, src + ir[m]);
        };
        /* the thread's cell m of plane z: psi(n) (x, plane z - 1 in slot p
         * of 4) and psi(n-1) (a from slot px, 0 without) */
        auto own = [&](int m, int p, int px, C2 &x, C2 &a) {
            x = pl[((p + 1) & 3) * M.ps + pos[m]];
            a.x = 0;
            a.y = 0;
            if (x0)
                a = xs[(size_t)px * M.tile_cells + threadIdx.x + 256 * m];
        };
        /* the ring: planes za - 1, za, za + 1 in slots 0, 1, 2 and psi(n-1)
         * of za in slot 0, then the planes and psi(n-1) ahead, a group each */
        fetch_plane(za - 1, 0);
        fetch_plane(za, 1);
        fetch_plane(za + 1, 2);
        fetch_x0(za, 0);
        cp_commit();
        for (int j = 1; j < ahead; ++j) {
            if (za + j < zb) {
                fetch_plane(za + 1 + j, 2 + j);
                fetch_x0(za + j, j);
            }
            cp_commit();
        }
        cp_wait_n(ahead - 1);
        __syncthreads();
        int p = 0, px = 0; /* plane z - 1 in slot p, psi(n-1) of z in slot px */
        for (int z = za; z < zb; ++z) {
            if (z + ahead < zb) { /* into the slots of plane z - 2, psi(n-1) of z - 1 */
                fetch_plane(z + 1 + ahead, p == 0 ? ns - 1 : p - 1);
                fetch_x0(z + ahead, px == 0 ? ahead : px - 1);
            }
            cp_commit();
            if (F > 0) {
                const double zb = G.oz + (double)(z + G.zoff) * G.ez; /* trap's z less cen */
                /* this phase's table and the byte offset of plane z's slot */
                const QE<R> *qz = qt + p * (NQ * QC);
                const int a1 = (p + 1 == ns ? 0 : p + 1) * (int)(M.ps * sizeof(C2));
#pragma unroll
                for (int m = 0; m < NH; ++m) {
                    if (ir[m] < 0)
                        continue;
                    const int c = cc[m];
                    const unsigned char *cb = (const unsigned char *)(pl + pos[m]);
                    const QE<R> *qp = qz + c;
                    R sr, si;
                    /* exact counts without predicates (a warp's cells share
                     * theirs where march_place could group them) */
                    if (nk2[m] == NQ)
                        held_sum<R, NQ>(qp, cb, NQ, sr, si);
                    else if (NQ == 8 && nk2[m] == 6)
                        held_sum<R, 6>(qp, cb, 6, sr, si);
                    else if (NQ == 8 && nk2[m] == 4)
                        held_sum<R, 4>(qp, cb, 4, sr, si);
                    else
                        held_sum<R, NQ, true>(qp, cb, nk2[m], sr, si);
                    const C2 x = *(const C2 *)(cb + a1);
                    C2 a;
                    a.x = 0;
                    a.y = 0;
                    if (x0)
                        a = xs[(size_t)px * M.tile_cells + threadIdx.x + 256 * m];
                    const size_t i = (size_t)z * layer + (unsigned)ir[m];
                    const double zz = zb + T.cen[3 * c + 2];
                    R vv = (R)(vxy[m] + G.hz * zz * zz);
                    if (HASV)
                        vv = vv + V[i];
                    const C2 o = cell_store<R>(g, dg[m], vv, out, a, x, sr, si, x0 != NULL, cre,
                                               cim, i, step, bad);
                    if (F == 2)
                        nn += cell_norm<R>(T.vol[c], o);
                }
            }
#pragma unroll
            for (int m = 0; m < (F > 0 ? 0 : CPT); ++m) {
                if (ir[m] < 0)
                    continue;
                const int c = cc[m];
                R sr = 0, si = 0;
                if (MAXN > 0) {
                    const int k0 = T.start[c], k1 = T.start[c + 1];
                    C2 v[MAXN > 0 ? MAXN : 1];
#pragma unroll
                    for (int q = 0; q < MAXN; ++q)
                        if (k0 + q < k1) {
                            const int t = mo[k0 + q];
                            v[q] = pl[((p + (t & 3)) & 3) * M.ps + pos[m] + (t >> 2)];
                        }
#pragma unroll
                    for (int q = 0; q < MAXN; ++q)
                        if (k0 + q < k1) {
                            sr += T.w[k0 + q] * v[q].x;
                            si += T.w[k0 + q] * v[q].y;
                        }
                } else {
                    const int k0 = T.start[c], k1 = T.start[c + 1];
                    for (int k = k0; k < k1; ++k) {
                        const int t = mo[k];
                        const C2 v = pl[((p + (t & 3)) & 3) * M.ps + pos[m] + (t >> 2)];
                        sr += T.w[k] * v.x;
                        si += T.w[k] * v.y;
                    }
                }
                C2 x, a;
                own(m, p, px, x, a);
                const size_t i = (size_t)z * layer + (unsigned)ir[m];
                const double o2 = cell_out<R, HASV>(G, T, g, out, a, x, sr, si, x0 != NULL, cre,
                                                    cim, V, i, c, bxs[m], bys[m], z, step, bad);
                if (part)
                    nn += o2;
            }
            cp_wait_n(ahead - 1); /* plane z + 2 and psi(n-1) of z + 1 are in */
            __syncthreads();
            p = p + 1 == ns ? 0 : p + 1;
            px = px == ahead ? 0 : px + 1;
        }
    }
    if (F == 2 || (F == 0 && part))
        store_part(nn, red, part);
}

/* The instance of k_march for the table's largest neighbour count (4, 8,
 * 16 or more: 0) and the cells a thread takes in a plane (CPT). */
template <typename R>
using MarchFn = void (*)(DGeo, MGeo, const unsigned char *, R, typename Vec2<R>::T *,
                         const typename Vec2<R>::T *, const typename Vec2<R>::T *, R, R,
                         const R *, unsigned long long, unsigned long long *, double *,
                         unsigned *, unsigned);

template <typename R, bool HASV, int MAXN, int F = 0>
static MarchFn<R> march_fn_n(unsigned cpt)
{
    return cpt <= 2 ? k_march<R, HASV, MAXN, 2, F>
                    : cpt == 3 ? k_march<R, HASV, MAXN, 3, F> : k_march<R, HASV, MAXN, 4, F>;
}

/* The held table (F = 1, or 2 with the norm's parts) for 4 and 8
 * neighbours only (cubic, FCC, BCC) */
template <typename R, bool HASV>
static MarchFn<R> march_fn(int maxn, unsigned cpt, int f = 0)
{
    if (f > 0 && maxn == 4)
        return f == 2 ? march_fn_n<R, HASV, 4, 2>(cpt) : march_fn_n<R, HASV, 4, 1>(cpt);
    if (f > 0 && maxn == 8)
        return f == 2 ? march_fn_n<R, HASV, 8, 2>(cpt) : march_fn_n<R, HASV, 8, 1>(cpt);
    return maxn == 4 ? march_fn_n<R, HASV, 4>(cpt)
                     : maxn == 8 ? march_fn_n<R, HASV, 8>(cpt)
                                 : maxn == 16 ? march_fn_n<R, HASV, 16>(cpt)
                                              : march_fn_n<R, HASV, 0>(cpt);
}

/* Norm and energy partial sums of the block (nlse_dec_observe). */
template <typename R, bool HASV>
__global__ void __launch_bounds__(256)
k_observe(DGeo G, const unsigned char *tab, R g, const typename Vec2<R>::T *__restrict__ x,
          const R *__restrict__ V, double *part)
{
    typedef typename Vec2<R>::T C2;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ double red[32];
    const STab<R> T = stage_table<R>(G, tab, smem);
    double an = 0, ae = 0;
    for (unsigned u = blockIdx.x; u < G.units; u += gridDim.x) {
        unsigned by, bz, bx, q;
        int c;
        if (!unit_cell(G, u, by, bz, bx, c, q))
            continue;
        const unsigned row = bz * G.ny + by;
        const size_t i = (size_t)row * G.row_len + q;
        const bool interior = by > 0 && by + 1 < G.ny && bz > 0 && bz + 1 < G.nz && bx > 0 &&
                              bx + 1 < G.nx;
        R sr, si;
        nsum<R, 0>(G, T, x, i, c, (int)bx, (int)by, (int)bz, interior, sr, si);
        const C2 xv = x[i];
        const double xr = xv.x, xi = xv.y, r2 = xr * xr + xi * xi;
        const double kin = (double)T.diag[c] * r2 - (xr * (double)sr + xi * (double)si);
        R v = trap<R>(G, T, c, (int)bx, (int)by, (int)bz);
        if (HASV)
            v = v + V[i];
        an += T.vol[c] * r2;
        ae += T.vol[c] * (kin + (double)v * r2 + 0.5 * (double)g * r2 * r2);
    }
    const double sn = nlse_block_sum(an, red);
    if (threadIdx.x == 0)
        part[2 * blockIdx.x] = sn;
    const double se = nlse_block_sum(ae, red);
    if (threadIdx.x == 0)
        part[2 * blockIdx.x + 1] = se;
}

/* factor = sqrt(norm / sum(part)) in a fixed order; a zero or non-finite
 * sum records `step` in *bad. */
__global__ void k_factor(const double *part, size_t n, double norm, double *factor,
                         unsigned long long step, unsigned long long *bad)
{
    __shared__ double red[32];
    if (*bad != NONE)
        return;
    const double t = nlse_parts_sum(part, n, red);
    if (threadIdx.x == 0) {
        if (!(t > 0 && isfinite(t)))
            atomicMin(bad, step);
        *factor = sqrt(norm / t);
    }
}

template <typename R>
__global__ void k_scale(typename Vec2<R>::T *x, size_t n, const double *factor,
                        const unsigned long long *bad)
{
    if (*bad != NONE)
        return;
    const R f = (R)*factor;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        typename Vec2<R>::T v = x[i];
        v.x *= f;
        v.y *= f;
        x[i] = v;
    }
}

struct nlse_dec {
    nlse_dec_params p;
    size_t n;
    dec_rows r;
    DGeo G;
    MGeo M;                  /* k_march's tiles (march_units)            */
    unsigned char *tab;      /* the table, laid out as in shared memory  */
    void *buf[2];            /* current buf[par], psi(n-1) buf[par ^ 1]  */
    void *V;
    unsigned long long *bad; /* first step that went non-finite, or NONE */
    double *part, *factor;   /* per-launch-block partial sums            */
    unsigned *ctr;           /* work-unit counters of k_apply, 3 slots   */
    unsigned launch;         /* k_apply launches so far (counter slot)   */
    int maxn;                /* unrolled neighbour count: 4, 8, 16, or 0 */
    int all4;                /* every cell has exactly 4 neighbours (k_pairs) */
    dec_tuning tune;         /* the tuning switches, read at create       */
    const char *form;        /* the form of the last launch (nlse_dec_kernel) */
    char march_form[160];    /* k_march's, with its tiles, ring, blocks an SM and order */
    unsigned sms;            /* the GPU's multiprocessors                 */
    double *h_part;
    size_t nparts;
    dim3 grid, block;
    unsigned resident;       /* thread blocks the GPU holds at once       */
    unsigned resident_m;     /* the same for k_march (0: not usable)      */
    const nlse_comm *comm;   /* reductions of a distributed run, or NULL  */
    struct DecLink *link;    /* the overlapped halo exchange (nlse_dec_slab_connect) */
    double last_wait;        /* of last_seconds, the edges waiting for halos */
    int par, have_prev;
    unsigned long long steps;
    cudaStream_t stream;
    cudaEvent_t ev[2];
    double last_seconds;
    int device;              /* the GPU the solver lives on (ON_DEVICE)  */
};

static size_t rsize(const nlse_dec *s) { return s->p.dtype == NLSE_COMPLEX64 ? 4 : 8; }

static unsigned align16(unsigned b) { return (b + 15u) & ~15u; }

/* Lay out the table for shared memory; host image in *img (malloc'd). */
static int build_table(nlse_dec *s, unsigned char **img)
{
    const int C = s->r.cells, K = s->r.rows;
    const unsigned r = (unsigned)rsize(s);
    DGeo *G = &s->G;
    unsigned o = 0;
    G->o_cen = o;   o = align16(o + 24u * C);
    G->o_vol = o;   o = align16(o + 8u * C);
    G->o_w = o;     o = align16(o + r * K);
    G->o_diag = o;  o = align16(o + r * C);
    G->o_start = o; o = align16(o + 4u * (C + 1));
    G->o_cell = o;  o = align16(o + 4u * K);
    G->o_delta = o; o = align16(o + 4u * K);
    G->bytes = o;
    if (o > SMEM_MAX)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec (CUDA): the block table of %d cells and %d "
                         "neighbour rows needs %u B of shared memory, more than %d", C, K, o,
                         SMEM_MAX);
    unsigned char *b = (unsigned char *)calloc(1, o);
    if (!b)
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec: out of memory");
    memcpy(b + G->o_cen, s->r.centre, 24u * C);
    memcpy(b + G->o_vol, s->r.vol, 8u * C);
    for (int k = 0; k < K; ++k) {
        if (r == 4)
            ((float *)(b + G->o_w))[k] = (float)s->r.w[k];
        else
            ((double *)(b + G->o_w))[k] = s->r.w[k];
        const int *off = s->r.off + 3 * k;
        ((int *)(b + G->o_cell))[k] =
            (s->r.cell[k] << 6) | ((off[0] + 1) << 4) | ((off[1] + 1) << 2) | (off[2] + 1);
        ((int *)(b + G->o_delta))[k] = s->r.delta[k];
    }
    for (int c = 0; c < C; ++c) {
        if (r == 4)
            ((float *)(b + G->o_diag))[c] = (float)s->r.diag[c];
        else
            ((double *)(b + G->o_diag))[c] = s->r.diag[c];
    }
    memcpy(b + G->o_start, s->r.start, 4u * (C + 1));
    *img = b;
    return NLSE_OK;
}

static void link_free(nlse_dec *s);

void nlse_dec_destroy(nlse_dec *s)
{
    ON_DEVICE_VOID(s);
    if (!s)
        return;
    link_free(s);
    void *bufs[] = {s->tab, s->buf[0], s->buf[1], s->V, s->bad, s->part, s->factor, s->ctr};
    nlse_cuda_free_all(bufs, sizeof bufs / sizeof bufs[0]);
    free(s->h_part);
    nlse_cuda_drop_stream(s->stream, s->ev, 2);
    dec_rows_free(&s->r);
    free(s);
}

/* k_march's shared memory for a ring of ns plane slots. */
static void march_layout(nlse_dec *s, unsigned ns)
{
    MGeo *M = &s->M;
    const unsigned C = s->G.cells, e = 2u * (unsigned)rsize(s);
    M->ns = ns;
    M->o_mo = align16(s->G.bytes);
    M->o_qt = align16(M->o_mo + (M->hoist ? 0u : 4u * (unsigned)s->r.start[C])); /* mo: F = 0 */
    M->o_rp = align16(M->o_qt + (M->hoist ? ns * (unsigned)s->maxn * QC * e : 0u));
    M->o_rel = align16(M->o_rp + (M->hoist ? 4u * M->txc : 0u));
    M->o_pl = align16(M->o_rel + 4u * M->ps);
    M->o_x0 = M->o_pl + ns * M->ps * e;
    M->bytes = M->o_x0 + (ns - 2u) * M->tile_cells * e;
}

/* k_march's ring set by NLSEPY_DEC_MARCH_RING (4, 5 or 6, with the table
 * held), 0 when unset (march_pick chooses). */
static unsigned march_ring_set(const nlse_dec *s)
{
    return s->M.hoist ? s->tune.march_ring : 0u;
}

/* k_march's first layout: the ring of the switch, else 4 slots. */
static void march_ring(nlse_dec *s)
{
    const unsigned ns = march_ring_set(s);
    march_layout(s, ns ? ns : 4u);
}

/* k_march's form and tiles and its shared memory.  The form: the cells'
 * table held (F > 0) by default and under NLSEPY_DEC_KERNEL=21 on grids of
 * 4 or 8 neighbours and at most QC cells a block (cubic, FCC, BCC); the
 * plain form under 18 and on other grids.  The tiles: 64 x 8 blocks of one cell; on
 * grids of 2 to 12 cells a block (BCC, FCC) 8 x 8 blocks in complex64
 * and 8 x 6 in complex128 for the held table, square tiles of at most 432
 * cells a plane in complex128 and 768 in complex64 otherwise (the fastest
 * sizes tried; bench/RESULTS.md, DEC section); NLSEPY_DEC_MARCH_TILE=TXxTY
 * (s->tune) sets them. */
static void march_tiles(nlse_dec *s)
{
    MGeo *M = &s->M;
    const unsigned C = s->G.cells;
    const bool four_eight = s->maxn == 4 || s->maxn == 8;
    M->hoist = four_eight && C <= QC && (s->tune.kernel == 21 || s->tune.kernel < 0);
    unsigned tx = 64, ty = 8;
    if (C > 1 && C <= 12 && M->hoist) {
        tx = 8;
        ty = rsize(s) == 8 ? 6 : 8;
    } else if (C > 1) {
        const unsigned most = rsize(s) == 8 ? 432 : 768;
        tx = 1;
        while ((tx + 1) * (tx + 1) * C <= most)
            ++tx;
        ty = tx;
    }
    if (s->tune.march_tx) {
        tx = s->tune.march_tx;
        ty = s->tune.march_ty;
    }
    while (tx * ty * C > 1024 && ty > 1) /* a thread takes at most 4 cells a plane */
        --ty;
    while (tx * ty * C > 1024 && tx > 1)
        --tx;
    M->TX = tx < s->G.nx ? tx : s->G.nx;
    M->TY = ty < s->G.ny ? ty : s->G.ny;
    M->ntx = (s->G.nx + M->TX - 1) / M->TX;
    M->nty = (s->G.ny + M->TY - 1) / M->TY;
    M->txc = M->TX * C;
    M->tile_cells = M->TY * M->txc;
    M->cpt = (M->tile_cells + 255) / 256;
    M->hrow = (M->TX + 2) * C;
    M->ps = (M->TY + 2) * M->hrow;
    M->d_hrow = fastdiv(M->hrow);
    M->d_tiles = fastdiv(M->ntx * M->nty);
    M->d_txc = fastdiv(M->txc);
    march_ring(s);
}

/* k_march's chunks of layers over the own layers and the order of the
 * tiles: about 8 units for each thread block the GPU holds, chunks of at
 * least 16 layers, the tiles row by row.  A unit starts about band / R of
 * a unit's time after the one of its y neighbour (R thread blocks held),
 * so band zlen / R layers behind it; past about 10 layers that neighbour's
 * planes of psi(n) have left L2 before the unit reads their halo (the
 * largest grids).  There the tiles go in bands of 8 columns and the chunks
 * are at most 72 layers long, which is faster on the largest grids
 * (bench/RESULTS.md, DEC section).  NLSEPY_DEC_MARCH_BAND and
 * NLSEPY_DEC_MARCH_CHUNKS (s->tune) set them for tuning; the form's name
 * (nlse_dec_kernel) gives the chunks' length and the bands. */
static void march_units(nlse_dec *s)
{
    MGeo *M = &s->M;
    const unsigned tiles = M->ntx * M->nty, zc = s->G.zc ? s->G.zc : 1;
    const unsigned R = s->resident_m ? s->resident_m : 1;
    unsigned chunks = (8u * R + tiles - 1) / (tiles ? tiles : 1);
    if (chunks > zc / 16)
        chunks = zc / 16;
    if (chunks < 1)
        chunks = 1;
    M->band = M->ntx;
    if (M->ntx > 8 && (double)M->ntx * ((zc + chunks - 1) / chunks) > 10.0 * R) {
        M->band = 8;
        chunks = chunks > (zc + 71) / 72 ? chunks : (zc + 71) / 72;
    }
    const unsigned ec = s->tune.march_chunks, eb = s->tune.march_band;
    if (ec)
        chunks = ec < zc ? ec : zc;
    if (eb)
        M->band = eb < M->ntx ? eb : M->ntx;
    M->zlen = (zc + chunks - 1) / chunks;
    chunks = (zc + M->zlen - 1) / M->zlen;
    M->units = tiles * chunks;
    char order[48] = "";
    if (M->band < M->ntx)
        snprintf(order, sizeof order, ", bands of %u tile column%s", M->band,
                 M->band > 1 ? "s" : "");
    snprintf(s->march_form, sizeof s->march_form,
             "z marching (tiles %ux%u, ring of %u planes, %u thread blocks an SM, "
             "chunks of %u layers%s)",
             M->TX, M->TY, M->ns, s->resident_m / (s->sms ? s->sms : 1), M->zlen, order);
}

/* The work units over the own layers (G.z0, G.zc) and the launch grid;
 * the grid never exceeds the one of the whole solver (the size of part). */
static void work_units(nlse_dec *s)
{
    DGeo *G = &s->G;
    G->units = G->ny * G->zc * G->chunks;
    G->tile_units = G->ty * G->zc * G->chunks;
    G->full_units = (G->ny / G->ty) * G->tile_units;
    const unsigned rest = G->ny - (G->ny / G->ty) * G->ty;
    G->d_tile = fastdiv(G->tile_units);
    G->d_ryc = fastdiv(rest ? rest * G->chunks : 1);
    s->grid = dim3(G->units < s->resident ? G->units : s->resident);
    s->nparts = s->grid.x;
    march_units(s);
}

/* The instance's limit of dynamic shared memory raised to `bytes` (never
 * lowered: solvers of other grids share the instances). */
template <typename R> static bool march_allow(MarchFn<R> fn, unsigned bytes)
{
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, fn) != cudaSuccess)
        return false;
    return a.maxDynamicSharedSizeBytes >= (int)bytes ||
           cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) ==
               cudaSuccess;
}

/* Thread blocks of k_march the GPU holds at once (its shared memory
 * allowed for both forms); 0 when its tiles do not fit in an SM. */
template <typename R> static unsigned march_resident(nlse_dec *s, int sms)
{
    int most = 0, nb = 0;
    const unsigned cpt = s->M.cpt, bytes = s->M.bytes;
    const int f0 = s->M.hoist ? 1 : 0, f1 = s->M.hoist ? 2 : 0;
    cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, s->device);
    bool ok = cpt <= 4 && (int)bytes <= most;
    for (int f = f0; ok && f <= f1; ++f)
        ok = march_allow<R>(march_fn<R, false>(s->maxn, cpt, f), bytes) &&
             march_allow<R>(march_fn<R, true>(s->maxn, cpt, f), bytes);
    if (!ok || cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                   &nb, march_fn<R, false>(s->maxn, cpt, f0), 256, bytes) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return (unsigned)(nb * sms);
}

/* k_march's ring and the thread blocks the GPU then holds: 4 plane slots
 * (the plane after next copied while a plane is computed) or, with the
 * table held, the deepest ring of 5 or 6 (planes copied two and three
 * ahead, so that a copy has more planes' work to arrive in) that keeps as
 * many thread blocks an SM as 4 slots and leaves at least 32 KiB of the
 * SM's shared memory to L1 (the rings that keep the blocks but leave less,
 * BCC at 5 and cubic complex128 at 6, are slower than 4 slots; the deeper
 * rings make the cubic grid faster in both precisions; bench/RESULTS.md,
 * DEC section).  NLSEPY_DEC_MARCH_RING (s->tune) sets the ring. */
template <typename R> static unsigned march_pick(nlse_dec *s, int sms)
{
    const unsigned r4 = march_resident<R>(s, sms);
    if (!s->M.hoist || march_ring_set(s) || sms < 1)
        return r4;
    int per_sm = 0, reserved = 0;
    cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, s->device);
    cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, s->device);
    cudaGetLastError();
    const size_t room = per_sm > 32768 ? (size_t)per_sm - 32768u : 0u;
    for (unsigned ns = 6; ns >= 5; --ns) {
        march_layout(s, ns);
        const unsigned r = march_resident<R>(s, sms);
        /* each block: its dynamic bytes, the reserved 1 KiB, its static ones (under 512) */
        const size_t used = (size_t)(r / (unsigned)sms) * (s->M.bytes + (unsigned)reserved + 512u);
        if (r >= r4 && r > 0 && used <= room)
            return r;
    }
    march_layout(s, 4);
    return r4;
}

int nlse_dec_create(const nlse_dec_params *p, const nlse_dec_table *t, nlse_dec **out)
{
    int st = dec_check_create(p, t, out);
    if (st)
        return st;
    nlse_dec *s = (nlse_dec *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_create: out of memory");
    s->p = *p;
    dec_tuning_read(&s->tune);
    s->device = nlse_cuda_current_device();
    s->n = nlse_dec_size(p);
    if (s->n >= 2147483647ull) {
        free(s);
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec (CUDA): %zu unknowns; the CUDA backend takes "
                         "fewer than 2^31", nlse_dec_size(p));
    }
    if ((st = dec_rows_build(p, t, &s->r))) {
        free(s);
        return st;
    }
    DGeo *G = &s->G;
    G->nx = (unsigned)p->blocks[0];
    G->ny = (unsigned)p->blocks[1];
    G->nz = (unsigned)p->blocks[2];
    G->cells = (unsigned)p->cells;
    G->row_len = G->nx * G->cells;
    G->periodic = p->periodic;
    G->ox = p->origin[0]; G->oy = p->origin[1]; G->oz = p->origin[2];
    G->ex = p->edge[0];   G->ey = p->edge[1];   G->ez = p->edge[2];
    G->hx = 0.5 * p->trap[0] * p->trap[0];
    G->hy = 0.5 * p->trap[1] * p->trap[1];
    G->hz = 0.5 * p->trap[2] * p->trap[2];
    unsigned char *img = NULL;
    if ((st = build_table(s, &img))) {
        nlse_dec_destroy(s);
        return st;
    }
    /* launch shape: work units are stretches of blockDim cells of one row
     * of blocks; a resident set of thread blocks loops over them, so the
     * table is staged once per thread block, not once per unit */
    /* the fewest stretches of at most 256 threads per row, as even as a
     * multiple of 32 allows (432 cells: 2 x 224, not 256 + 176) */
    G->chunks = (G->row_len + 255) / 256;
    unsigned threads = (G->row_len + G->chunks - 1) / G->chunks;
    threads = (threads + 31) / 32 * 32;
    G->chunks = (G->row_len + threads - 1) / threads;
    G->z0 = 0;
    G->zc = G->nz;
    G->zoff = 0;
    int most = 0;
    s->all4 = 1;
    for (int c = 0; c < p->cells; ++c) {
        const int n = s->r.start[c + 1] - s->r.start[c];
        most = n > most ? n : most;
        s->all4 &= n == 4;
    }
    s->maxn = most <= 4 ? 4 : most <= 8 ? 8 : most <= 16 ? 16 : 0;
    /* y tiles of at most 8 MiB of psi(n) per plane (whole planes below;
     * NLSEPY_DEC_TILE_MIB and NLSEPY_DEC_TILE_ROWS in s->tune) */
    const size_t row_bytes = (size_t)G->row_len * 2 * rsize(s);
    size_t ty = (size_t)(s->tune.tile_mib * 1048576.0 / (double)(row_bytes ? row_bytes : 1));
    if (s->tune.tile_rows)
        ty = s->tune.tile_rows;
    G->ty = (unsigned)(ty < 1 ? 1 : ty > G->ny ? G->ny : ty);
    G->d_cells = fastdiv(G->cells);
    G->d_chunks = fastdiv(G->chunks);
    G->d_tyc = fastdiv(G->ty * G->chunks);
    /* as many thread blocks as an SM can hold at 256 threads; those that
     * do not fit at once start later and take what units are left */
    int sms = 1;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, s->device);
    cudaGetLastError();
    unsigned per_sm = 2048u / threads;
    if (s->tune.blocks_per_sm)
        per_sm = s->tune.blocks_per_sm;
    s->resident = (unsigned)sms * per_sm;
    s->block = dim3(threads);
    march_tiles(s);
    s->resident_m = s->p.dtype == NLSE_COMPLEX64 ? march_pick<float>(s, sms)
                                                 : march_pick<double>(s, sms);
    s->sms = (unsigned)(sms > 0 ? sms : 1);
    work_units(s);
    const size_t bytes = 2 * s->n * rsize(s);
    if ((st = nlse_cuda_alloc((void **)&s->tab, G->bytes, "the DEC block table")) ||
        (st = nlse_cuda_alloc(&s->buf[0], bytes, "the DEC state")) ||
        (st = nlse_cuda_alloc(&s->buf[1], bytes, "the DEC state")) ||
        (st = nlse_cuda_alloc((void **)&s->bad, sizeof(unsigned long long), "a flag")) ||
        (st = nlse_cuda_alloc((void **)&s->part, 2 * s->nparts * sizeof(double), "sums")) ||
        (st = nlse_cuda_alloc((void **)&s->factor, sizeof(double), "a factor")) ||
        (st = nlse_cuda_alloc((void **)&s->ctr, 3 * sizeof(unsigned), "counters")) ||
        (st = nlse_cuda_check(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking),
                              "cudaStreamCreate")) ||
        (st = nlse_cuda_check(cudaEventCreate(&s->ev[0]), "cudaEventCreate")) ||
        (st = nlse_cuda_check(cudaEventCreate(&s->ev[1]), "cudaEventCreate"))) {
        free(img);
        nlse_dec_destroy(s);
        return st;
    }
    s->h_part = (double *)malloc(2 * s->nparts * sizeof(double));
    const unsigned long long none = NONE;
    if (!s->h_part ||
        (st = nlse_cuda_check(cudaMemcpy(s->tab, img, G->bytes, cudaMemcpyHostToDevice),
                              "cudaMemcpy")) ||
        (st = nlse_cuda_check(cudaMemcpy(s->bad, &none, sizeof none, cudaMemcpyHostToDevice),
                              "cudaMemcpy")) ||
        (st = nlse_cuda_check(cudaMemset(s->ctr, 0, 3 * sizeof(unsigned)), "cudaMemset")) ||
        (st = nlse_cuda_check(cudaMemset(s->buf[0], 0, bytes), "cudaMemset")) ||
        (st = nlse_cuda_check(cudaMemset(s->buf[1], 0, bytes), "cudaMemset"))) {
        free(img);
        nlse_dec_destroy(s);
        return st ? st : nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_create: out of memory");
    }
    free(img);
    *out = s;
    return NLSE_OK;
}

int nlse_dec_set_state(nlse_dec *s, const void *psi, const void *psi_prev)
{
    ON_DEVICE(s);
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    CKS(dec_check_states(psi, psi_prev, s->n, s->p.dtype));
    const size_t bytes = 2 * s->n * rsize(s);
    CK(cudaStreamSynchronize(s->stream));
    CK(cudaMemcpy(s->buf[s->par], psi, bytes, cudaMemcpyHostToDevice));
    if (psi_prev)
        CK(cudaMemcpy(s->buf[s->par ^ 1], psi_prev, bytes, cudaMemcpyHostToDevice));
    s->have_prev = psi_prev != NULL;
    return NLSE_OK;
}

int nlse_dec_get_state(const nlse_dec *s, void *psi)
{
    ON_DEVICE(s);
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_get_state: NULL argument");
    CK(cudaStreamSynchronize(s->stream));
    CK(cudaMemcpy(psi, s->buf[s->par], 2 * s->n * rsize(s), cudaMemcpyDeviceToHost));
    return NLSE_OK;
}

int nlse_dec_get_prev(const nlse_dec *s, void *psi_prev, int *have)
{
    ON_DEVICE(s);
    if (!s || !psi_prev || !have)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_get_prev: NULL argument");
    CK(cudaStreamSynchronize(s->stream));
    *have = s->have_prev;
    if (s->have_prev)
        CK(cudaMemcpy(psi_prev, s->buf[s->par ^ 1], 2 * s->n * rsize(s), cudaMemcpyDeviceToHost));
    return NLSE_OK;
}

int nlse_dec_set_potential(nlse_dec *s, const void *V)
{
    ON_DEVICE(s);
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    CK(cudaStreamSynchronize(s->stream));
    if (!V) {
        cudaFree(s->V);
        s->V = NULL;
        return NLSE_OK;
    }
    CKS(dec_check_real(V, s->n, s->p.dtype, "V"));
    if (!s->V)
        CKS(nlse_cuda_alloc(&s->V, s->n * rsize(s), "the DEC potential"));
    CK(cudaMemcpy(s->V, V, s->n * rsize(s), cudaMemcpyHostToDevice));
    return NLSE_OK;
}

int nlse_dec_set_dt(nlse_dec *s, double dt)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    return dec_set_dt(&s->p, &s->have_prev, dt);
}

/* Launch out = x0 + (cre + i cim) H(x1) x1 (see k_apply). */
template <typename R, bool HASV, int MAXN, int MINB, int UNR = 1, bool ST = false>
static void launch_k(nlse_dec *s, void *out, const void *x0, const void *x1, double cre,
                     double cim, unsigned long long step, double *part)
{
    typedef typename Vec2<R>::T C2;
    s->form = ST ? "rows, units by thread blocks, streamed" : "rows, units by thread blocks";
    k_apply<R, HASV, MAXN, MINB, UNR, ST><<<s->grid, s->block, s->G.bytes, s->stream>>>(
        s->G, s->tab, (R)s->p.g, (C2 *)out, (const C2 *)x0, (const C2 *)x1, (R)cre, (R)cim,
        (const R *)s->V, step, s->bad, part, s->ctr, s->launch % 3);
}

/* Launch out = x0 + (cre + i cim) H(x1) x1 by k_apply_w (units taken by warps). */
template <typename R, bool HASV, bool EARLY, int MINB, int UNR = 1, bool ST = false>
static void launch_w(nlse_dec *s, void *out, const void *x0, const void *x1, double cre,
                     double cim, unsigned long long step, double *part)
{
    typedef typename Vec2<R>::T C2;
    s->form = ST ? "rows, units by warps, streamed" : "rows, units by warps";
    k_apply_w<R, HASV, EARLY, MINB, UNR, ST><<<s->grid, s->block, s->G.bytes, s->stream>>>(
        s->G, s->tab, (R)s->p.g, (C2 *)out, (const C2 *)x0, (const C2 *)x1, (R)cre, (R)cim,
        (const R *)s->V, step, s->bad, part, s->ctr, s->launch % 3);
}

/* Shared memory of k_rows and k_pairs (MAXN neighbour rows a cell): the
 * staged table, then at *o_ext their q-major copy and circumcentres by axis. */
template <typename R> static unsigned rows_smem(const nlse_dec *s, int maxn, unsigned *o_ext)
{
    *o_ext = (s->G.bytes + 15u) & ~15u;
    return *o_ext + rows_qd_bytes<R>(maxn, s->G.cells) + 24u * s->G.cells;
}

/* Launch out = x0 + (cre + i cim) H(x1) x1 by k_rows; false when the
 * table has more than 8 neighbours a cell or its copies do not fit. */
template <typename R, bool HASV>
static bool launch_r(nlse_dec *s, void *out, const void *x0, const void *x1, double cre,
                     double cim, unsigned long long step, double *part, bool st = false)
{
    typedef typename Vec2<R>::T C2;
    if (s->maxn != 4 && s->maxn != 8)
        return false;
    unsigned o_ext;
    const unsigned bytes = rows_smem<R>(s, s->maxn, &o_ext);
    if (bytes > 48u * 1024u)
        return false;
    s->form = "rows, units by warps, lean";
    auto fn = s->maxn == 4 ? (part ? k_rows<R, HASV, 4, true> : k_rows<R, HASV, 4, false>)
                           : (part ? k_rows<R, HASV, 8, true> : k_rows<R, HASV, 8, false>);
    if (st && s->maxn == 4) { /* psi(n-1) and the results streamed past the caches */
        s->form = "rows, units by warps, lean, streamed";
        fn = part ? k_rows<R, HASV, 4, true, true> : k_rows<R, HASV, 4, false, true>;
    }
    fn<<<s->grid, s->block, bytes, s->stream>>>(s->G, s->tab, o_ext, (R)s->p.g, (C2 *)out,
                                                (const C2 *)x0, (const C2 *)x1, (R)cre, (R)cim,
                                                (const R *)s->V, step, s->bad, part, s->ctr,
                                                s->launch % 3);
    return true;
}

/* Launch out = x0 + (cre + i cim) H(x1) x1 by k_pairs at MINB thread
 * blocks an SM; false in complex128, with a norm to form, where a cell
 * has other than 4 neighbours, the block an odd number of cells, a
 * buffer not 16-byte aligned or the table's copies too large. */
template <typename R, bool HASV, int MINB, bool ST = true>
static bool launch_p(nlse_dec *s, void *out, const void *x0, const void *x1, double cre,
                     double cim, unsigned long long step, double *part)
{
    if constexpr (sizeof(R) != 4) {
        return false;
    } else {
        const uintptr_t al = (uintptr_t)out | (uintptr_t)x0 | (uintptr_t)x1 | (uintptr_t)s->V;
        if (part || !s->all4 || (s->G.cells & 1u) || (al & 15u))
            return false;
        unsigned o_ext;
        const unsigned bytes = rows_smem<float>(s, 4, &o_ext);
        if (bytes > 48u * 1024u)
            return false;
        s->form = ST ? (MINB == 4 ? "rows, units by warps, two cells a lane, streamed"
                                  : "rows, units by warps, two cells a lane, streamed (48 registers)")
                     : (MINB == 4 ? "rows, units by warps, two cells a lane"
                                  : "rows, units by warps, two cells a lane (48 registers)");
        k_pairs<HASV, MINB, ST><<<s->grid, s->block, bytes, s->stream>>>(
            s->G, s->tab, o_ext, (float)s->p.g, (float2 *)out, (const float2 *)x0,
            (const float2 *)x1, (float)cre, (float)cim, (const float *)s->V, step, s->bad,
            s->ctr, s->launch % 3);
        return true;
    }
}

/* Launch out = x0 + (cre + i cim) H(x1) x1 by k_march; false when its
 * tiles do not fit in shared memory. */
template <typename R, bool HASV>
static bool launch_m(nlse_dec *s, void *out, const void *x0, const void *x1, double cre,
                     double cim, unsigned long long step, double *part)
{
    typedef typename Vec2<R>::T C2;
    if (!s->resident_m)
        return false;
    s->form = s->march_form;
    const int f = s->M.hoist ? (part ? 2 : 1) : 0;
    march_fn<R, HASV>(s->maxn, s->M.cpt, f)<<<s->grid, 256, s->M.bytes, s->stream>>>(
        s->G, s->M, s->tab, (R)s->p.g, (C2 *)out, (const C2 *)x0, (const C2 *)x1, (R)cre,
        (R)cim, (const R *)s->V, step, s->bad, part, s->ctr, s->launch % 3);
    return true;
}

/* Launch out = x0 + (cre + i cim) H(x1) x1 in the kernel form of the
 * solver's variant (NLSEPY_DEC_KERNEL) or, by default, of its grid. */
template <typename R, bool HASV>
static void launch_n(nlse_dec *s, void *out, const void *x0, const void *x1, double cre,
                     double cim, unsigned long long step, double *part)
{
    int variant = s->tune.kernel;
    /* by the grid: the fastest forms (bench/RESULTS.md, DEC section); z
     * marching where it fits, else the row form of the grid */
    if (variant < 0 && s->G.cells <= 12 && launch_m<R, HASV>(s, out, x0, x1, cre, cim, step, part))
        return;
    /* complex64 on A15, C15 and Z, real time: two cells a lane, faster
     * than the lean rows (on C15 and Z with psi(n-1) and the results
     * streamed, on A15 unstreamed) */
    if (variant < 0 && sizeof(R) == 4 && s->G.cells > 12 &&
        (s->G.cells >= 64 ? launch_p<R, HASV, 4, true>(s, out, x0, x1, cre, cim, step, part)
                          : launch_p<R, HASV, 4, false>(s, out, x0, x1, cre, cim, step, part)))
        return;
    /* complex64 on A15, C15 and Z: the lean rows, faster than the units
     * by warps; complex128 on A15: the lean rows with psi(n-1) and the
     * results streamed past the caches (on C15 and Z, and unstreamed,
     * slower); streamed in complex64 on C15 and Z too (slightly faster
     * there, on A15 not) */
    if (variant < 0 && (sizeof(R) == 4 || s->G.cells < 64) &&
        launch_r<R, HASV>(s, out, x0, x1, cre, cim, step, part,
                          sizeof(R) == 8 || s->G.cells >= 64))
        return;
    if (variant < 0) { /* where the lean rows do not take the grid (more than 8
                          neighbours a cell, or their table too large), and on
                          C15 and Z in complex128: A15 by warps, C15 and Z by
                          thread blocks (Z by warps in complex64) */
        const unsigned c = s->G.cells;
        variant = sizeof(R) == 8 ? (c >= 64 ? 0 : 8) : (c >= 64 && c < 100 ? 0 : 6);
    }
    switch (variant) {
    case 18: /* z marching through tiles in shared memory */
    case 21: /* the same with the cells' table held (the default) */
        if (launch_m<R, HASV>(s, out, x0, x1, cre, cim, step, part))
            return;
        break;
    case 23: /* units taken by warps, lean (k_rows) */
    case 24: /* the same, psi(n-1) and the results streamed */
        if (launch_r<R, HASV>(s, out, x0, x1, cre, cim, step, part, variant == 24))
            return;
        break;
    case 27: /* two cells a lane, streamed, at most 48 registers */
        if (launch_p<R, HASV, 5>(s, out, x0, x1, cre, cim, step, part))
            return;
        break;
    case 28: /* two cells a lane, streamed, at most 64 registers (C15, Z) */
        if (launch_p<R, HASV, 4>(s, out, x0, x1, cre, cim, step, part))
            return;
        break;
    case 29: /* two cells a lane, at most 64 registers (A15) */
        if (launch_p<R, HASV, 4, false>(s, out, x0, x1, cre, cim, step, part))
            return;
        break;
    case 3: /* units taken by warps, at most 32 registers */
        launch_w<R, HASV, false, 8>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 4: /* units taken by warps, the cell's own loads first, at most 40 registers */
        launch_w<R, HASV, true, 6>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 5: /* units taken by warps, the cell's own loads first, at most 48 registers */
        launch_w<R, HASV, true, 5>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 6: /* units taken by warps, at most 40 registers */
        launch_w<R, HASV, false, 6>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 7: /* units taken by warps, neighbours loaded 4 at a time, at most 40 registers */
        launch_w<R, HASV, false, 6, 4>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 8: /* units taken by warps, neighbours loaded 2 at a time, at most 40 registers */
        launch_w<R, HASV, false, 6, 2>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 25: /* 8 with psi(n-1) and the results streamed */
        launch_w<R, HASV, false, 6, 2, true>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 26: /* the plain loop below, streamed */
        launch_k<R, HASV, 0, 8, 1, true>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 9: /* plain loop, neighbours loaded 4 at a time, at most 40 registers */
        launch_k<R, HASV, 0, 6, 4>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 1: /* plain loop, at most 40 registers (three quarters of the warps) */
        launch_k<R, HASV, 0, 6>(s, out, x0, x1, cre, cim, step, part);
        return;
    case 2: /* every neighbour load issued first, at most 40 registers */
        if (s->maxn > 0) {
            if (s->maxn == 4)
                launch_k<R, HASV, 4, 6>(s, out, x0, x1, cre, cim, step, part);
            else if (s->maxn == 8)
                launch_k<R, HASV, 8, 6>(s, out, x0, x1, cre, cim, step, part);
            else
                launch_k<R, HASV, 16, 6>(s, out, x0, x1, cre, cim, step, part);
            return;
        }
        break;
    }
    /* plain loop, at most 32 registers: all 64 warps of an SM resident */
    launch_k<R, HASV, 0, 8>(s, out, x0, x1, cre, cim, step, part);
}

template <typename R>
static int launch_apply(nlse_dec *s, void *out, const void *x0, const void *x1, double cre,
                        double cim, unsigned long long step, double *part)
{
    if (s->V)
        launch_n<R, true>(s, out, x0, x1, cre, cim, step, part);
    else
        launch_n<R, false>(s, out, x0, x1, cre, cim, step, part);
    ++s->launch;
    return nlse_cuda_check(cudaGetLastError(), "k_apply");
}

static int apply(nlse_dec *s, void *out, const void *x0, const void *x1, double cre, double cim,
                 unsigned long long step, double *part)
{
    return s->p.dtype == NLSE_COMPLEX64 ? launch_apply<float>(s, out, x0, x1, cre, cim, step, part)
                                        : launch_apply<double>(s, out, x0, x1, cre, cim, step, part);
}

/* The flag after the chunk: NONE or the first bad step; reset to NONE. */
static int take_bad(nlse_dec *s, unsigned long long *badstep)
{
    const unsigned long long none = NONE;
    CK(cudaMemcpyAsync(badstep, s->bad, sizeof none, cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    if (*badstep != NONE) { /* on the solver's stream: the next launches see it reset */
        CK(cudaMemcpyAsync(s->bad, &none, sizeof none, cudaMemcpyHostToDevice, s->stream));
        CK(cudaStreamSynchronize(s->stream));
    }
    return NLSE_OK;
}

/* One RK4 step into buf[par ^ 1] (step index `step` for the flag). */
static int rk4_start(nlse_dec *s, unsigned long long step)
{
    const double dt = s->p.dt;
    void *psi = s->buf[s->par], *acc = s->buf[s->par ^ 1], *ya = NULL, *yb = NULL;
    const size_t bytes = 2 * s->n * rsize(s);
    int st = nlse_cuda_alloc(&ya, bytes, "the RK4 start");
    if (!st)
        st = nlse_cuda_alloc(&yb, bytes, "the RK4 start");
    if (!st) st = apply(s, acc, psi, psi, 0, -dt / 6, step, NULL);
    if (!st) st = apply(s, ya, psi, psi, 0, -dt / 2, step, NULL);
    if (!st) st = apply(s, acc, acc, ya, 0, -dt / 3, step, NULL);
    if (!st) st = apply(s, yb, psi, ya, 0, -dt / 2, step, NULL);
    if (!st) st = apply(s, acc, acc, yb, 0, -dt / 3, step, NULL);
    if (!st) st = apply(s, ya, psi, yb, 0, -dt, step, NULL);
    if (!st) st = apply(s, acc, acc, ya, 0, -dt / 6, step, NULL);
    cudaStreamSynchronize(s->stream);
    cudaFree(ya);
    cudaFree(yb);
    return st;
}

/* last_seconds from the call's start event ev[0] to ev[1], once ev[1] is
 * done. */
static void read_clock(nlse_dec *s)
{
    float ms = 0;
    cudaEventElapsedTime(&ms, s->ev[0], s->ev[1]);
    s->last_seconds = 1e-3 * ms;
}

/* ev[1] after what the solver's stream holds, waited for; read_clock. */
static int stop_clock(nlse_dec *s)
{
    CK(cudaEventRecord(s->ev[1], s->stream));
    CK(cudaEventSynchronize(s->ev[1]));
    read_clock(s);
    return NLSE_OK;
}

/* nlse_dec_step of a distributed solver: one step at a time, each one's
 * blow-up flag agreed over the processes before it is kept. */
static int step_comm(nlse_dec *s, long n, long *done)
{
    if (!s->have_prev)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_step: a distributed solver does not start by "
                                         "RK4 (its halos need refreshing between the stages): "
                                         "start with nlse_dec_combine or give psi(-dt)");
    CK(cudaEventRecord(s->ev[0], s->stream));
    long k = 0;
    int st = NLSE_OK, bad = 0;
    for (; k < n; ++k) {
        void *prev = s->buf[s->par ^ 1];
        unsigned long long badstep;
        if (!(st = apply(s, prev, prev, s->buf[s->par], 0, -2 * s->p.dt, s->steps, NULL)))
            st = take_bad(s, &badstep);
        if (!st) {
            bad = badstep != NONE;
            st = dec_agree_bad(s->comm, &bad);
        }
        if (st || bad) {
            s->have_prev = 0; /* psi(n-1) is overwritten; the current state is good */
            break;
        }
        s->par ^= 1;
        ++s->steps;
    }
    CKS(stop_clock(s));
    return dec_steps_end(st, bad, k, n, done, DEC_REAL_BLOWUP);
}

/* ------------------------------------------------------------------ */
/* the overlapped step of GPU ranks on one node (source 001, 4.2)     */
/* ------------------------------------------------------------------ */

/* One range of own layers as the kernels take it: its work units, tiles
 * and launch grid, and counters of its own (the ranges run at once on two
 * streams, so they cannot share the solver's). */
struct DecPart {
    DGeo G;
    MGeo M;
    dim3 grid;
    size_t nparts;
    unsigned *ctr;
    unsigned launch;
    int used;
};

/* Steps whose wait for the halos is timed at once (events reused after). */
#define LINK_TIMED 64

typedef CUresult (CUDAAPI *StreamValueFn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

/* The halo exchange of nlse_dec_slab_connect: each step computes the first
 * and last own layers on a stream of high priority, copies them straight
 * into the neighbours' halo layers (their buffers mapped by CUDA IPC) and
 * raises the neighbour's arrival word (cuStreamWriteValue32, after a
 * memory fence); the interior layers run on the solver's stream meanwhile.
 * The next step's edges wait on the device for this rank's own arrival
 * words (cuStreamWaitValue32) and for the interior: no host round trip.
 * The word of a side counts the deliveries from that neighbour. */
struct DecLink {
    unsigned *flag;            /* [0] deliveries from below, [1] from above  */
    DecPart part[3];           /* first own layer, last own layer, interior */
    unsigned *ctr;             /* the parts' counters, 3 each               */
    cudaStream_t edge;
    cudaEvent_t e_edge, e_int, tw[2 * LINK_TIMED];
    void *bak[2];              /* the buffers at the call's start (blow-up) */
    char *dst[2][2];           /* [side][buffer]: where the edge layer goes  */
    unsigned *nflag[2];        /* [side]: the neighbour's word to raise     */
    unsigned seq;              /* deliveries each way so far                */
    int staged;                /* hooked for the host-staged swap (step_staged) */
    char *hs, *hr;             /* pinned: the edge layers out, the halos in (2 each) */
    long timed;                /* waits timed in this call                  */
    StreamValueFn wait, write;
};

static size_t layer_bytes(const nlse_dec *s);

static void part_swap(nlse_dec *s, DecPart *p)
{
    const DGeo G = s->G;
    const MGeo M = s->M;
    const dim3 g = s->grid;
    const size_t np = s->nparts;
    unsigned *c = s->ctr;
    const unsigned l = s->launch;
    s->G = p->G, s->M = p->M, s->grid = p->grid, s->nparts = p->nparts;
    s->ctr = p->ctr, s->launch = p->launch;
    p->G = G, p->M = M, p->grid = g, p->nparts = np, p->ctr = c, p->launch = l;
}

/* The launch shape of own layers z0 .. z0 + zc - 1, the solver's left as it was. */
static void part_make(nlse_dec *s, DecPart *p, unsigned z0, unsigned zc, unsigned *ctr)
{
    const DGeo G = s->G;
    const MGeo M = s->M;
    const dim3 grid = s->grid;
    const size_t np = s->nparts;
    char form[sizeof s->march_form];
    memcpy(form, s->march_form, sizeof form);
    s->G.z0 = z0;
    s->G.zc = zc;
    work_units(s);
    p->G = s->G, p->M = s->M, p->grid = s->grid, p->nparts = s->nparts;
    p->ctr = ctr, p->launch = 0, p->used = 1;
    s->G = G, s->M = M, s->grid = grid, s->nparts = np;
    memcpy(s->march_form, form, sizeof form);
}

/* A leapfrog step of one part on stream st: out = out - 2 i dt H(cur) cur. */
static int part_apply(nlse_dec *s, DecPart *p, cudaStream_t st, void *out, const void *cur,
                      unsigned long long step)
{
    part_swap(s, p);
    cudaStream_t keep = s->stream;
    s->stream = st;
    const int rc = apply(s, out, out, cur, 0, -2 * s->p.dt, step, NULL);
    s->stream = keep;
    part_swap(s, p);
    return rc;
}

/* Streams, events, backups and counters of a connection (the words stay). */
static void link_unhook(nlse_dec *s)
{
    DecLink *L = s->link;
    if (!L || !L->edge)
        return;
    cudaStreamSynchronize(L->edge);
    cudaEvent_t ev[2 + 2 * LINK_TIMED];
    ev[0] = L->e_edge, ev[1] = L->e_int;
    memcpy(ev + 2, L->tw, sizeof L->tw);
    nlse_cuda_drop_stream(L->edge, ev, 2 + 2 * LINK_TIMED);
    void *bufs[] = {L->bak[0], L->bak[1], L->ctr};
    nlse_cuda_free_all(bufs, 3);
    cudaFreeHost(L->hs);
    cudaFreeHost(L->hr);
    const unsigned *keep = L->flag;
    memset(L, 0, sizeof *L);
    L->flag = (unsigned *)keep;
}

static void link_free(nlse_dec *s)
{
    if (!s->link)
        return;
    link_unhook(s);
    cudaFree(s->link->flag);
    cudaGetLastError();
    free(s->link);
    s->link = NULL;
}

/* The arrival words (shared with the neighbours before the connection). */
static int link_words(nlse_dec *s)
{
    if (s->link)
        return NLSE_OK;
    s->link = (DecLink *)calloc(1, sizeof(DecLink));
    if (!s->link)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the halo connection");
    CKS(nlse_cuda_alloc((void **)&s->link->flag, 2 * sizeof(unsigned), "the arrival words"));
    CK(cudaMemset(s->link->flag, 0, 2 * sizeof(unsigned)));
    return NLSE_OK;
}

/* The driver's stream memory operations (no link to libcuda). */
static int link_fns(DecLink *L)
{
    cudaDriverEntryPointQueryResult q1 = cudaDriverEntryPointSymbolNotFound, q2 = q1;
    void *w = NULL, *x = NULL;
    const cudaError_t e1 = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &w, 12000,
                                                            cudaEnableDefault, &q1);
    const cudaError_t e2 = cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &x, 12000,
                                                            cudaEnableDefault, &q2);
    cudaGetLastError();
    if (e1 != cudaSuccess || e2 != cudaSuccess || q1 != cudaDriverEntryPointSuccess ||
        q2 != cudaDriverEntryPointSuccess || !w || !x)
        return nlse_fail(NLSE_ERR_BACKEND, "nlse_dec_slab_connect: the CUDA driver offers no "
                                           "stream memory operations (cuStreamWaitValue32)");
    L->wait = (StreamValueFn)w;
    L->write = (StreamValueFn)x;
    return NLSE_OK;
}

static int cu_check(CUresult r, const char *what)
{
    return r == CUDA_SUCCESS ? NLSE_OK
                             : nlse_fail(NLSE_ERR_BACKEND, "CUDA driver error %d in %s", (int)r,
                                         what);
}

/* The edge stream waits until both neighbours have delivered v halos. */
static int link_wait(nlse_dec *s, unsigned v)
{
    DecLink *L = s->link;
    for (int side = 0; side < 2; ++side)
        if (L->nflag[side])
            CKS(cu_check(L->wait(L->edge, (CUdeviceptr)(uintptr_t)(L->flag + side), v,
                                 CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32"));
    return NLSE_OK;
}

/* link_wait with the time the stream spent there (events LINK_TIMED apart). */
static int link_wait_timed(nlse_dec *s, unsigned v)
{
    DecLink *L = s->link;
    cudaEvent_t *e = L->tw + 2 * (L->timed % LINK_TIMED);
    if (L->timed >= LINK_TIMED) { /* the pair's last use is read before it is reused */
        float ms = 0;
        CK(cudaEventSynchronize(e[1]));
        CK(cudaEventElapsedTime(&ms, e[0], e[1]));
        s->last_wait += 1e-3 * ms;
    }
    CK(cudaEventRecord(e[0], L->edge));
    CKS(link_wait(s, v));
    CK(cudaEventRecord(e[1], L->edge));
    ++L->timed;
    return NLSE_OK;
}

/* The waits timed but not read yet (after the streams have drained). */
static void link_read_waits(nlse_dec *s)
{
    DecLink *L = s->link;
    const long first = L->timed > LINK_TIMED ? L->timed - LINK_TIMED : 0;
    for (long w = first; w < L->timed; ++w) {
        float ms = 0;
        const cudaEvent_t *e = L->tw + 2 * (w % LINK_TIMED);
        if (cudaEventElapsedTime(&ms, e[0], e[1]) == cudaSuccess)
            s->last_wait += 1e-3 * ms;
    }
    cudaGetLastError();
    L->timed = 0;
}

/* The new state's first and last own layers of buffer b into the
 * neighbours' halo layers, then their arrival words raised to v. */
static int link_send(nlse_dec *s, int b, unsigned v)
{
    DecLink *L = s->link;
    const size_t LB = layer_bytes(s);
    const char *mine[2] = {(const char *)s->buf[b] + (size_t)s->G.z0 * LB,
                           (const char *)s->buf[b] + (size_t)(s->G.z0 + s->G.zc - 1) * LB};
    for (int side = 0; side < 2; ++side)
        if (L->nflag[side])
            CK(cudaMemcpyAsync(L->dst[side][b], mine[side], LB, cudaMemcpyDefault, L->edge));
    for (int side = 0; side < 2; ++side)
        if (L->nflag[side])
            CKS(cu_check(L->write(L->edge, (CUdeviceptr)(uintptr_t)L->nflag[side], v,
                                  CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32"));
    return NLSE_OK;
}

/* n leapfrog steps from buf[par0] (step index first), queued with no host
 * synchronisation; the halos of the result have arrived when the solver's
 * stream passes its end.  Edges of step k wait for the interior of step
 * k - 1 (which reads the layer they overwrite) and for the halos of the
 * state they read; the interior of step k waits for its edges (which read
 * the interior's first and last layers of the buffer it overwrites). */
static int link_steps(nlse_dec *s, int par0, unsigned long long first, long n, unsigned seq0)
{
    DecLink *L = s->link;
    CK(cudaEventRecord(L->e_int, s->stream));
    for (long k = 0; k < n; ++k) {
        const int b = (par0 ^ (int)(k & 1)) ^ 1; /* the buffer step k writes */
        void *out = s->buf[b];
        const void *cur = s->buf[b ^ 1];
        CK(cudaStreamWaitEvent(L->edge, L->e_int, 0));
        if (k)
            CKS(link_wait_timed(s, seq0 + (unsigned)k));
        CKS(part_apply(s, &L->part[0], L->edge, out, cur, first + k));
        if (L->part[1].used)
            CKS(part_apply(s, &L->part[1], L->edge, out, cur, first + k));
        CK(cudaEventRecord(L->e_edge, L->edge));
        CKS(link_send(s, b, seq0 + (unsigned)k + 1));
        if (L->part[2].used) {
            CK(cudaStreamWaitEvent(s->stream, L->e_edge, 0));
            CKS(part_apply(s, &L->part[2], s->stream, out, cur, first + k));
            CK(cudaEventRecord(L->e_int, s->stream));
        }
    }
    if (n)
        CKS(link_wait_timed(s, seq0 + (unsigned)n));
    CK(cudaEventRecord(L->e_edge, L->edge));
    CK(cudaStreamWaitEvent(s->stream, L->e_edge, 0));
    return NLSE_OK;
}

/* Both streams drained; the first error. */
static int link_drain(nlse_dec *s, int st)
{
    const int a = nlse_cuda_check(cudaStreamSynchronize(s->link->edge), "cudaStreamSynchronize");
    const int b = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    return st ? st : a ? a : b;
}

/* A process that failed while queuing its steps raises its neighbours'
 * words to v, the end of the call, so that they do not wait for it. */
static void link_release(nlse_dec *s, unsigned v)
{
    DecLink *L = s->link;
    for (int side = 0; side < 2; ++side)
        if (L->nflag[side])
            cudaMemcpy(L->nflag[side], &v, sizeof v, cudaMemcpyHostToDevice);
    cudaGetLastError();
}

/* The error and the first bad step agreed over the processes (*bad: the
 * earliest of any, or NONE). */
static int link_agree(nlse_dec *s, int st, unsigned long long *bad)
{
    double x[2] = {st ? 1.0 : 0.0, *bad == NONE ? -1e300 : -(double)*bad};
    const int rc = s->comm->max(s->comm->ctx, x, 2);
    if (rc)
        return rc;
    *bad = x[1] > -1e299 ? (unsigned long long)(-x[1]) : NONE;
    if (!st && x[0] > 0)
        st = nlse_fail(NLSE_ERR_BACKEND, "nlse_dec_step: another process failed in its "
                                         "overlapped steps");
    return st;
}

/* Every process passes this point before any goes on (comm->max as a barrier). */
static int link_barrier(nlse_dec *s)
{
    double x = 0;
    return s->comm->max(s->comm->ctx, &x, 1);
}

/* n steps queued, drained, their error and first bad step agreed; the
 * deliveries counted. */
static int link_run(nlse_dec *s, int par0, unsigned long long first, long n,
                    unsigned long long *bad)
{
    DecLink *L = s->link;
    int st = link_steps(s, par0, first, n, L->seq);
    if (st)
        link_release(s, L->seq + (unsigned)n);
    st = link_drain(s, st);
    link_read_waits(s);
    *bad = NONE;
    if (!st)
        st = take_bad(s, bad);
    L->seq += (unsigned)n;
    return link_agree(s, st, bad);
}

/* nlse_dec_step of a connected slab: the steps queued at once, the
 * blow-up check agreed once a call.  The buffers are kept at the start;
 * when a process blew up at step b, every process takes them back and
 * steps again to b, so the state is the last good one, as on one GPU. */
static int step_linked(nlse_dec *s, long n, long *done)
{
    DecLink *L = s->link;
    const unsigned long long first = s->steps;
    const int par0 = s->par;
    const size_t bytes = 2 * s->n * rsize(s);
    if (L->seq > 0x40000000u) { /* the words restart from 0 before they wrap */
        CKS(link_barrier(s));
        CK(cudaMemset(L->flag, 0, 2 * sizeof(unsigned)));
        CKS(link_barrier(s));
        L->seq = 0;
    }
    s->last_wait = 0;
    CK(cudaEventRecord(s->ev[0], s->stream));
    CK(cudaMemcpyAsync(L->bak[0], s->buf[par0], bytes, cudaMemcpyDeviceToDevice, s->stream));
    CK(cudaMemcpyAsync(L->bak[1], s->buf[par0 ^ 1], bytes, cudaMemcpyDeviceToDevice, s->stream));
    unsigned long long bad;
    int st = link_run(s, par0, first, n, &bad);
    CKS(stop_clock(s));
    if (st) {
        s->have_prev = 0;
        return st;
    }
    const long good = bad == NONE ? n : (long)(bad - first);
    if (good < n) { /* back to the start, and the good steps again */
        /* on the solver's stream and complete before the barrier: a device to
         * device cudaMemcpy may return before its copy ends, and the
         * neighbours' deliveries of the steps taken again must land after it */
        CK(cudaMemcpyAsync(s->buf[par0], L->bak[0], bytes, cudaMemcpyDeviceToDevice, s->stream));
        CK(cudaMemcpyAsync(s->buf[par0 ^ 1], L->bak[1], bytes, cudaMemcpyDeviceToDevice,
                           s->stream));
        CK(cudaStreamSynchronize(s->stream));
        CKS(link_barrier(s)); /* no delivery lands before the neighbour's restore */
        if (good > 0 && (st = link_run(s, par0, first, good, &bad)) == NLSE_OK && bad != NONE)
            st = nlse_fail(NLSE_ERR_BACKEND, "nlse_dec_step: the steps taken again blew up "
                                             "at step %llu", bad);
    }
    s->par = par0 ^ (int)(good & 1);
    s->steps = first + good;
    s->have_prev = good == n; /* else psi(n-1) is lost, as on one GPU */
    return dec_steps_end(st, good < n, good, n, done, DEC_REAL_BLOWUP);
}

/* Whether the steps swap the halos through the host themselves: the table
 * swaps (c->halo_start) and the slab has a neighbour. */
static int swaps_halos(const nlse_dec *s)
{
    const nlse_comm *c = s->comm;
    return c && c->halo_start && c->halo_progress && c->halo_finish &&
           (s->G.z0 > 0 || s->G.z0 + s->G.zc < s->G.nz);
}

static int link_parts_alloc(nlse_dec *s);

/* The streams, parts and pinned buffers of step_staged (no peers). */
static int stage_hook(nlse_dec *s)
{
    CKS(link_words(s));
    DecLink *L = s->link;
    const size_t LB = layer_bytes(s);
    int lo = 0, hi = 0;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    CK(cudaStreamCreateWithPriority(&L->edge, cudaStreamNonBlocking, hi));
    CK(cudaEventCreateWithFlags(&L->e_edge, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&L->e_int, cudaEventDisableTiming));
    CK(cudaHostAlloc((void **)&L->hs, 2 * LB, cudaHostAllocDefault));
    CK(cudaHostAlloc((void **)&L->hr, 2 * LB, cudaHostAllocDefault));
    CKS(link_parts_alloc(s));
    L->staged = 1;
    return NLSE_OK;
}

/* One leapfrog step into buffer b with the halo swap through the host
 * overlapped (source 001, section 4.2): the edge layers first, on the edge
 * stream, and down to pinned memory; their swap (c->halo_start) while the
 * interior layers compute on the solver's stream, the library moving the
 * messages as the host polls the interior; the halos received copied up
 * on the edge stream, before the next step's edges. */
static int staged_step(nlse_dec *s, int b, unsigned long long step)
{
    DecLink *L = s->link;
    const nlse_comm *c = s->comm;
    const size_t LB = layer_bytes(s);
    const unsigned z0 = s->G.z0, z1 = s->G.z0 + s->G.zc;
    const int has_lo = z0 > 0, has_hi = z1 < s->G.nz;
    char *out = (char *)s->buf[b];
    const void *cur = s->buf[b ^ 1];
    CK(cudaStreamWaitEvent(L->edge, L->e_int, 0));
    CKS(part_apply(s, &L->part[0], L->edge, out, cur, step));
    if (L->part[1].used)
        CKS(part_apply(s, &L->part[1], L->edge, out, cur, step));
    CK(cudaMemcpyAsync(L->hs, out + (size_t)z0 * LB, LB, cudaMemcpyDeviceToHost, L->edge));
    CK(cudaMemcpyAsync(L->hs + LB, out + (size_t)(z1 - 1) * LB, LB, cudaMemcpyDeviceToHost,
                       L->edge));
    CK(cudaEventRecord(L->e_edge, L->edge));
    if (L->part[2].used) {
        CK(cudaStreamWaitEvent(s->stream, L->e_edge, 0));
        CKS(part_apply(s, &L->part[2], s->stream, out, cur, step));
    }
    CK(cudaEventRecord(L->e_int, s->stream));
    CK(cudaEventSynchronize(L->e_edge));
    CKS(c->halo_start(c->ctx, has_lo ? L->hs : NULL, has_lo ? L->hr : NULL,
                      has_hi ? L->hs + LB : NULL, has_hi ? L->hr + LB : NULL, LB));
    int st = NLSE_OK;
    cudaError_t q;
    while ((q = cudaEventQuery(L->e_int)) == cudaErrorNotReady && !st)
        st = c->halo_progress(c->ctx);
    const double t0 = dec_now();
    const int fin = c->halo_finish(c->ctx); /* always: no request left in flight */
    s->last_wait += dec_now() - t0;
    CKS(st ? st : fin);
    CK(q);
    if (has_lo)
        CK(cudaMemcpyAsync(out + (size_t)(z0 - 1) * LB, L->hr, LB, cudaMemcpyHostToDevice,
                           L->edge));
    if (has_hi)
        CK(cudaMemcpyAsync(out + (size_t)z1 * LB, L->hr + LB, LB, cudaMemcpyHostToDevice,
                           L->edge));
    CK(cudaEventRecord(L->e_edge, L->edge));
    CK(cudaStreamWaitEvent(s->stream, L->e_edge, 0)); /* the solver's stream has it all */
    return NLSE_OK;
}

/* nlse_dec_step of a slab whose table swaps halos (GPU ranks without CUDA
 * IPC between them): staged_step after staged_step, each one's blow-up
 * flag agreed before it is kept, so the halos of the result are the
 * neighbours' when the call returns. */
static int step_staged(nlse_dec *s, long n, long *done)
{
    if (!(s->link && s->link->staged)) {
        link_unhook(s);
        const int st = stage_hook(s);
        if (st) {
            link_unhook(s);
            return st;
        }
    }
    CK(cudaEventRecord(s->ev[0], s->stream));
    CK(cudaEventRecord(s->link->e_int, s->stream));
    long k = 0;
    int st = NLSE_OK, bad = 0;
    for (; k < n; ++k) {
        unsigned long long badstep = NONE;
        st = staged_step(s, s->par ^ 1, s->steps);
        if (!st)
            st = take_bad(s, &badstep);
        bad = badstep != NONE;
        const int rc = dec_agree_bad(s->comm, &bad);
        st = st ? st : rc;
        if (st || bad) {
            s->have_prev = 0; /* psi(n-1) is overwritten; the current state is good */
            break;
        }
        s->par ^= 1;
        ++s->steps;
    }
    cudaStreamSynchronize(s->link->edge);
    CKS(stop_clock(s));
    return dec_steps_end(st, bad, k, n, done, DEC_REAL_BLOWUP);
}

int nlse_dec_slab_buffers(nlse_dec *s, void *out[NLSE_DEC_SLAB_BUFFERS])
{
    ON_DEVICE(s);
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_slab_buffers: NULL argument");
    CKS(link_words(s));
    out[0] = s->buf[0];
    out[1] = s->buf[1];
    out[2] = s->link->flag;
    return NLSE_OK;
}

/* The parts of the own layers: first, last (two or more) and interior (three or more). */
static void link_parts(nlse_dec *s)
{
    DecLink *L = s->link;
    const unsigned z0 = s->G.z0, zc = s->G.zc;
    memset(L->part, 0, sizeof L->part);
    part_make(s, &L->part[0], z0, 1, L->ctr);
    if (zc > 1)
        part_make(s, &L->part[1], z0 + zc - 1, 1, L->ctr + 3);
    if (zc > 2)
        part_make(s, &L->part[2], z0 + 1, zc - 2, L->ctr + 6);
}

/* The parts' counters and launch shapes. */
static int link_parts_alloc(nlse_dec *s)
{
    DecLink *L = s->link;
    CKS(nlse_cuda_alloc((void **)&L->ctr, 9 * sizeof(unsigned), "counters"));
    CK(cudaMemset(L->ctr, 0, 9 * sizeof(unsigned)));
    link_parts(s);
    return NLSE_OK;
}

static int link_hook(nlse_dec *s, void *const *lower, long lower_layer, void *const *upper,
                     long upper_layer)
{
    DecLink *L = s->link;
    const size_t bytes = 2 * s->n * rsize(s), LB = layer_bytes(s);
    int lo = 0, hi = 0;
    CKS(link_fns(L));
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    CK(cudaStreamCreateWithPriority(&L->edge, cudaStreamNonBlocking, hi));
    CK(cudaEventCreateWithFlags(&L->e_edge, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&L->e_int, cudaEventDisableTiming));
    for (int q = 0; q < 2 * LINK_TIMED; ++q)
        CK(cudaEventCreate(&L->tw[q]));
    CKS(nlse_cuda_alloc(&L->bak[0], bytes, "the overlapped step's copy of the state"));
    CKS(nlse_cuda_alloc(&L->bak[1], bytes, "the overlapped step's copy of the state"));
    CKS(link_parts_alloc(s));
    CK(cudaMemset(L->flag, 0, 2 * sizeof(unsigned)));
    for (int b = 0; b < 2; ++b) {
        L->dst[0][b] = lower ? (char *)lower[b] + (size_t)lower_layer * LB : NULL;
        L->dst[1][b] = upper ? (char *)upper[b] + (size_t)upper_layer * LB : NULL;
    }
    L->nflag[0] = lower ? (unsigned *)lower[2] + 1 : NULL; /* its deliveries from above */
    L->nflag[1] = upper ? (unsigned *)upper[2] : NULL;     /* its deliveries from below */
    L->seq = 0;
    return NLSE_OK;
}

int nlse_dec_slab_connect(nlse_dec *s, void *const lower[NLSE_DEC_SLAB_BUFFERS],
                          long lower_layer, void *const upper[NLSE_DEC_SLAB_BUFFERS],
                          long upper_layer)
{
    ON_DEVICE(s);
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    if (lower && !(lower[0] && lower[1] && lower[2]))
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_slab_connect: a NULL address below");
    if (upper && !(upper[0] && upper[1] && upper[2]))
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_slab_connect: a NULL address above");
    if ((lower && lower_layer < 0) || (upper && upper_layer < 0))
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_slab_connect: a halo layer must be >= 0, "
                                         "got %ld and %ld", lower_layer, upper_layer);
    CK(cudaStreamSynchronize(s->stream));
    link_unhook(s);
    if (!lower && !upper)
        return NLSE_OK;
    if (!s->comm)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_slab_connect: give the reduction table first "
                                         "(nlse_dec_set_comm)");
    CKS(link_words(s));
    const int st = link_hook(s, lower, lower_layer, upper, upper_layer);
    if (st)
        link_unhook(s);
    return st;
}

int nlse_dec_step(nlse_dec *s, long n, long *done)
{
    ON_DEVICE(s);
    CKS(dec_check_steps(s, n, done));
    s->last_wait = 0;
    if (n == 0)
        return NLSE_OK;
    if (s->comm && s->link && s->link->edge && !s->link->staged)
        return step_linked(s, n, done);
    if (s->comm && s->have_prev && swaps_halos(s))
        return step_staged(s, n, done);
    if (s->comm)
        return step_comm(s, n, done);
    CK(cudaEventRecord(s->ev[0], s->stream));
    const unsigned long long first = s->steps;
    const int par0 = s->par;
    long k = 0;
    if (!s->have_prev) {
        CKS(rk4_start(s, first));
        k = 1;
    }
    for (; k < n; ++k) {
        void *prev = s->buf[((par0 + k) & 1) ^ 1];
        CKS(apply(s, prev, prev, s->buf[(par0 + k) & 1], 0, -2 * s->p.dt, first + k, NULL));
    }
    CK(cudaEventRecord(s->ev[1], s->stream));
    unsigned long long badstep;
    CKS(take_bad(s, &badstep));
    read_clock(s);
    long good = badstep == NONE ? n : (long)(badstep - first);
    /* after k good steps the state is buf[par0 ^ (k & 1)] */
    s->par = par0 ^ (int)(good & 1);
    s->steps = first + good;
    s->have_prev = good == n;
    return dec_steps_end(NLSE_OK, good < n, good, n, done, DEC_REAL_BLOWUP);
}

/* One imaginary-time step of a distributed solver into buf[par ^ 1]: the
 * norm of the own layers summed on the host in a fixed order, then over the
 * processes (NaN from a process whose step blew up), the factor back to
 * the device.  *bad = 1 (state untouched) when the sum is not finite and
 * positive. */
static int imaginary_comm(nlse_dec *s, double norm, int *bad)
{
    void *cur = s->buf[s->par], *next = s->buf[s->par ^ 1];
    unsigned long long badstep;
    CKS(apply(s, next, cur, cur, -s->p.dt, 0, s->steps, s->part));
    CK(cudaMemcpyAsync(s->h_part, s->part, s->nparts * sizeof(double), cudaMemcpyDeviceToHost,
                       s->stream));
    CKS(take_bad(s, &badstep));
    double nn = 0;
    for (size_t b = 0; b < s->nparts; ++b)
        nn += s->h_part[b];
    nn = badstep != NONE ? NAN : nn;
    CKS(s->comm->sum(s->comm->ctx, &nn, 1));
    *bad = !(nn > 0 && isfinite(nn));
    if (*bad)
        return NLSE_OK;
    const double f = sqrt(norm / nn);
    CK(cudaMemcpyAsync(s->factor, &f, sizeof f, cudaMemcpyHostToDevice, s->stream));
    const unsigned blocks = (unsigned)((s->n + 255) / 256 < 65536 ? (s->n + 255) / 256 : 65536);
    if (s->p.dtype == NLSE_COMPLEX64)
        k_scale<float><<<blocks, 256, 0, s->stream>>>((float2 *)next, s->n, s->factor, s->bad);
    else
        k_scale<double><<<blocks, 256, 0, s->stream>>>((double2 *)next, s->n, s->factor, s->bad);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s->stream));
    s->par ^= 1;
    ++s->steps;
    return NLSE_OK;
}

int nlse_dec_imaginary(nlse_dec *s, long n, double norm, long *done)
{
    ON_DEVICE(s);
    CKS(dec_check_steps(s, n, done));
    if (!(isfinite(norm) && norm > 0))
        return nlse_fail(NLSE_ERR_VALUE, "norm must be finite and > 0, got %g", norm);
    if (n == 0)
        return NLSE_OK;
    if (s->comm) {
        CK(cudaEventRecord(s->ev[0], s->stream));
        long k = 0;
        int bad = 0, st = NLSE_OK;
        while (k < n && !(st = imaginary_comm(s, norm, &bad)) && !bad)
            ++k;
        CKS(stop_clock(s));
        s->have_prev = 0;
        return dec_steps_end(st, bad, k, n, done, DEC_IMAG_BLOWUP);
    }
    CK(cudaEventRecord(s->ev[0], s->stream));
    const unsigned long long first = s->steps;
    const int par0 = s->par;
    for (long k = 0; k < n; ++k) {
        void *cur = s->buf[(par0 + k) & 1], *next = s->buf[(par0 + k + 1) & 1];
        CKS(apply(s, next, cur, cur, -s->p.dt, 0, first + k, s->part));
        k_factor<<<1, 1024, 0, s->stream>>>(s->part, s->nparts, norm, s->factor, first + k, s->bad);
        const unsigned blocks = (unsigned)((s->n + 255) / 256 < 65536 ? (s->n + 255) / 256 : 65536);
        if (s->p.dtype == NLSE_COMPLEX64)
            k_scale<float><<<blocks, 256, 0, s->stream>>>((float2 *)next, s->n, s->factor, s->bad);
        else
            k_scale<double><<<blocks, 256, 0, s->stream>>>((double2 *)next, s->n, s->factor, s->bad);
        CK(cudaGetLastError());
    }
    CK(cudaEventRecord(s->ev[1], s->stream));
    unsigned long long badstep;
    CKS(take_bad(s, &badstep));
    read_clock(s);
    long good = badstep == NONE ? n : (long)(badstep - first);
    s->par = par0 ^ (int)(good & 1);
    s->steps = first + good;
    s->have_prev = 0;
    return dec_steps_end(NLSE_OK, good < n, good, n, done, DEC_IMAG_BLOWUP);
}

int nlse_dec_observe(nlse_dec *s, double *norm, double *energy)
{
    ON_DEVICE(s);
    if (!s || !norm || !energy)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_observe: NULL argument");
    const void *x = s->buf[s->par];
    if (s->p.dtype == NLSE_COMPLEX64) {
        if (s->V)
            k_observe<float, true><<<s->grid, s->block, s->G.bytes, s->stream>>>(
                s->G, s->tab, (float)s->p.g, (const float2 *)x, (const float *)s->V, s->part);
        else
            k_observe<float, false><<<s->grid, s->block, s->G.bytes, s->stream>>>(
                s->G, s->tab, (float)s->p.g, (const float2 *)x, NULL, s->part);
    } else {
        if (s->V)
            k_observe<double, true><<<s->grid, s->block, s->G.bytes, s->stream>>>(
                s->G, s->tab, s->p.g, (const double2 *)x, (const double *)s->V, s->part);
        else
            k_observe<double, false><<<s->grid, s->block, s->G.bytes, s->stream>>>(
                s->G, s->tab, s->p.g, (const double2 *)x, NULL, s->part);
    }
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(s->h_part, s->part, 2 * s->nparts * sizeof(double), cudaMemcpyDeviceToHost,
                       s->stream));
    CK(cudaStreamSynchronize(s->stream));
    double an = 0, ae = 0;
    for (size_t b = 0; b < s->nparts; ++b) {
        an += s->h_part[2 * b];
        ae += s->h_part[2 * b + 1];
    }
    *norm = an;
    *energy = ae;
    return NLSE_OK;
}

int nlse_dec_apply(nlse_dec *s, const void *psi, void *out)
{
    ON_DEVICE(s);
    if (!s || !psi || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_apply: NULL argument");
    const size_t bytes = 2 * s->n * rsize(s);
    void *din = NULL, *dout = NULL;
    int st = nlse_cuda_alloc(&din, bytes, "apply");
    if (!st)
        st = nlse_cuda_alloc(&dout, bytes, "apply");
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(din, psi, bytes, cudaMemcpyHostToDevice, s->stream),
                             "cudaMemcpy");
    if (!st) /* the layers that are not the solver's own stay 0 */
        st = nlse_cuda_check(cudaMemsetAsync(dout, 0, bytes, s->stream), "cudaMemset");
    if (!st)
        st = apply(s, dout, NULL, din, 1, 0, NONE, NULL);
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(out, dout, bytes, cudaMemcpyDeviceToHost, s->stream),
                             "cudaMemcpy");
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    cudaFree(din);
    cudaFree(dout);
    return st;
}

int nlse_dec_set_slab(nlse_dec *s, long z_offset, long first, long count)
{
    ON_DEVICE(s);
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    CKS(dec_check_layers(&s->p, first, count, "nlse_dec_set_slab"));
    if (z_offset < -2147483647L + s->p.blocks[2] || z_offset > 2147483647L - s->p.blocks[2])
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_set_slab: z_offset %ld is out of range",
                         z_offset);
    CK(cudaStreamSynchronize(s->stream));
    s->G.z0 = (unsigned)first;
    s->G.zc = (unsigned)count;
    s->G.zoff = (int)z_offset;
    work_units(s);
    link_unhook(s); /* its parts were the old layers' (connect again) */
    return NLSE_OK;
}

/* Bytes of one layer of blocks. */
static size_t layer_bytes(const nlse_dec *s)
{
    return 2 * rsize(s) * (size_t)s->p.cells * (size_t)s->p.blocks[0] * (size_t)s->p.blocks[1];
}

int nlse_dec_get_layers(const nlse_dec *s, long first, long count, void *out)
{
    ON_DEVICE(s);
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_get_layers: NULL argument");
    CKS(dec_check_layers(&s->p, first, count, "nlse_dec_get_layers"));
    const size_t L = layer_bytes(s);
    CK(cudaStreamSynchronize(s->stream));
    CK(cudaMemcpy(out, (const char *)s->buf[s->par] + (size_t)first * L, (size_t)count * L,
                  cudaMemcpyDeviceToHost));
    return NLSE_OK;
}

int nlse_dec_set_layers(nlse_dec *s, long first, long count, const void *in)
{
    ON_DEVICE(s);
    if (!s || !in)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_set_layers: NULL argument");
    CKS(dec_check_layers(&s->p, first, count, "nlse_dec_set_layers"));
    const size_t L = layer_bytes(s);
    CKS(dec_check_real(in, (size_t)count * L / rsize(s), s->p.dtype, "layers"));
    CK(cudaStreamSynchronize(s->stream));
    CK(cudaMemcpy((char *)s->buf[s->par] + (size_t)first * L, in, (size_t)count * L,
                  cudaMemcpyHostToDevice));
    return NLSE_OK;
}

/* Device-to-device (or peer, through a CUDA IPC mapping) copies of layers
 * on the solver's stream, after its kernels; complete on return.  `to`:
 * from the state to `mem`, else from `mem` into the state. */
static int layers_copy(nlse_dec *s, long first, long count, void *mem, int to, const char *what)
{
    CKS(dec_check_layers(&s->p, first, count, what));
    char *layers = (char *)s->buf[s->par] + (size_t)first * layer_bytes(s);
    const size_t bytes = (size_t)count * layer_bytes(s);
    CK(cudaMemcpyAsync(to ? mem : layers, to ? layers : mem, bytes, cudaMemcpyDefault,
                       s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

int nlse_dec_layers_to(const nlse_dec *cs, long first, long count, void *dst)
{
    nlse_dec *s = (nlse_dec *)cs;
    ON_DEVICE(s);
    if (!s || !dst)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_layers_to: NULL argument");
    return layers_copy(s, first, count, dst, 1, "nlse_dec_layers_to");
}

int nlse_dec_layers_from(nlse_dec *s, long first, long count, const void *src)
{
    ON_DEVICE(s);
    if (!s || !src)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_layers_from: NULL argument");
    return layers_copy(s, first, count, (void *)src, 0, "nlse_dec_layers_from");
}

int nlse_dec_set_comm(nlse_dec *s, const nlse_comm *c)
{
    return dec_set_comm(s ? &s->comm : NULL, c);
}

int nlse_dec_has_prev(const nlse_dec *s) { return s ? s->have_prev : 0; }

int nlse_dec_combine(nlse_dec *s, const void *x0, const void *x1, double cre, double cim,
                     void *out, int *bad)
{
    ON_DEVICE(s);
    if (!s || !x0 || !x1 || !out || !bad)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_combine: NULL argument");
    if (!(isfinite(cre) && isfinite(cim)))
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_combine: the coefficient (%g, %g) is not "
                                         "finite", cre, cim);
    const size_t bytes = 2 * s->n * rsize(s);
    void *d0 = NULL, *d1 = NULL;
    unsigned long long badstep = NONE;
    int st = nlse_cuda_alloc(&d0, bytes, "combine");
    if (!st)
        st = nlse_cuda_alloc(&d1, bytes, "combine");
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(d0, x0, bytes, cudaMemcpyHostToDevice, s->stream),
                             "cudaMemcpy");
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(d1, x1, bytes, cudaMemcpyHostToDevice, s->stream),
                             "cudaMemcpy");
    if (!st)
        st = apply(s, d0, d0, d1, cre, cim, s->steps, NULL);
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(out, d0, bytes, cudaMemcpyDeviceToHost, s->stream),
                             "cudaMemcpy");
    if (!st)
        st = take_bad(s, &badstep);
    cudaFree(d0);
    cudaFree(d1);
    *bad = badstep != NONE;
    return st;
}

double nlse_dec_bytes_per_cell_step(const nlse_dec *s)
{
    const double r = s ? (double)rsize(s) : 8;
    return 6 * r + (s && s->V ? r : 0);
}

double nlse_dec_last_seconds(const nlse_dec *s) { return s ? s->last_seconds : 0; }

/* the time a connected slab's edges waited for the neighbours' halos */
double nlse_dec_last_wait_seconds(const nlse_dec *s) { return s ? s->last_wait : 0; }

const char *nlse_dec_kernel(const nlse_dec *s) { return s && s->form ? s->form : ""; }
