/*
 * dipolar_dist.cu -- the 3D dipolar GPE of the split-step Crank-Nicolson
 * scheme (Loncar, thesis, chapter 2) on GPU ranks: the distributed layout of
 * the OpenMP/MPI edition of DBEC-GP (thesis, chapter 6) on cuFFT and device
 * to device copies.
 *
 *   layout      rank r holds x rows [xs[r], xs[r] + xc[r]) of the state (a
 *               slab, section 6.1) and y rows [ys[r], ys[r] + yc[r]) of the
 *               x pencils (n0, yc[r], nz)
 *   x solve     each slab solves its own rows and the slabs are coupled
 *               through their lines' end values (spike_x, the scheme of
 *               dipolar_slab.c); or, with NLSEPY_DIPOLAR_XSOLVE=transpose,
 *               the lines go to the pencils of their y rows on every rank,
 *               the Crank-Nicolson solve along x runs on whole x lines, and
 *               the lines come back (the transpose of section 6.2)
 *   dipolar     R2C along (y, z) on the slab's rows, the same transpose of the
 *               half spectrum, C2C along x on the pencils, the kernel (with
 *               1/N), the way back, C2R (eq. 2.37 by transposed transforms)
 *   sums        the norm of every step and the observables add the ranks'
 *               parts in rank order (section 2.4)
 *
 * The transposes are one cudaMemcpy2DAsync per pair of ranks, straight into
 * the receiving rank's buffer (mapped into this process by CUDA IPC), each
 * on a stream of its own so that the copies to all ranks run at once: the
 * copy engines move the data over NVLink or PCIe, no packing pass and no
 * host memory.  Ranks on several hosts (no IPC) stage the same blocks
 * through pinned host buffers and the comm table's all-to-all (an
 * MPI_Alltoallv).  One rank alone solves x and transforms in place.
 * Each transpose ends with a barrier (the rank-ordered max of
 * the nlse_comm table) that also carries errors: a rank that fails goes on
 * to the next barrier and every rank returns there, so no rank waits for
 * one that has left.  The arithmetic on the slab is the single-device
 * solver's (dipolar_zsolve.cu, dipolar_lanes.cu); the slab's handle has x
 * tables of its own rows and Crank-Nicolson tables of all n0 rows.
 */
#include <chrono>

#include "dipolar/dipolar.cuh"
#include "dipolar/dipolar_tuning.h"

struct dipolar_dist {
    int rank, size;
    dipolar_tuning tune;       /* the tuning switches, read at create        */
    const nlse_comm *comm;
    size_t n0, n1, n2, nh;
    size_t *xc, *xs, *yc, *ys; /* every rank's x rows and pencil y rows   */
    size_t nj, j0;             /* this rank's pencil y rows              */
    void *pen;                 /* (n0, nj, nz) complex; spectrum (n0, nj, nh) */
    size_t pen_bytes, dens_bytes;
    void **peer;               /* buffer b of rank r at peer[b * size + r] */
    int connected;
    cufftHandle f2, b2, fx;    /* (y, z) R2C / C2R of the slab; C2C along x */
    int plans;                 /* 0: none, 1: f2 and b2, 2: and fx        */
    void *kern;                /* (n0, nj, nh) kernel values times 1/N   */
    size_t kern_bytes;
    void *ext;                 /* the state with two rows of each neighbour: */
    size_t ext_bytes;          /* s->psi lies in it from its third row      */
    cudaStream_t *cs;          /* one copy stream per rank (copies run at once) */
    cudaEvent_t ready, *done;
    int have_events;
    int staged;                /* transposes through host memory (several hosts) */
    unsigned char *sm_copy;    /* per rank: its transposes' blocks by k_copy2d, else
                                  by the copy engines (copy_paths) */
    char *hsend, *hrecv;       /* pinned staging buffers                   */
    size_t *cnt;               /* 4 x size: send counts/displs, receive counts/displs */
    double tm[5];              /* step, x transposes, FFTs, their transposes, sums */
    /* the dipolar term's transposes pipelined (pipe_plans): chunks of the
     * slab's x rows and of the pencils' y rows, each chunk's copies
     * running while the next chunk transforms */
    int pipe;                  /* chunk plans made                         */
    size_t pq, jq;             /* x rows and y rows a chunk (the last: the rest) */
    cufftHandle pf[2], px[2];  /* R2C of pq rows and of the last chunk's; C2C along x of jq y rows and of the last's */
    int npf, npx;              /* plans made of each                       */
    void *pwork;               /* their shared work area (one runs at a time) */
    /* the x solve by substructuring (spike_x; dipolar_spike.c) */
    int xsolve;                /* -1 undecided, else NLSE_DIPOLAR_XSOLVE_*   */
    void *ends;                /* this rank's lines' end values, 4 doubles a line */
    size_t ends_bytes;
    void *drecv;               /* every rank's ends, rank order            */
    void *hrow;                /* the top halo row as the local solve took it */
    double *spk;               /* device: sv, sw (2 ni each), kv, kw (4 P each) */
    double *hspk;              /* the same on the host                     */
    int spike_mode;
    double spike_dt;
    int norm_parts;            /* > 0: k_spike_back left this many norm parts */
    char *hends_s, *hends_r;   /* pinned staging of the ends (several hosts) */
};

static double now(void)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/* ------------------------------------------------------------------ */
/* agreement and sums                                                 */
/* ------------------------------------------------------------------ */

/* The ranks' max of v[0 .. n-1] (collective), v[0] set here to whether
 * this rank failed (st): st, the comm table's failure, the peer status
 * when another rank failed, or NLSE_OK. */
static int agree_max(dipolar_dist *D, int st, double *v, int n)
{
    v[0] = st ? 1.0 : 0.0;
    const int rc = D->comm->max(D->comm->ctx, v, n);
    if (st)
        return st;
    if (rc)
        return rc;
    if (v[0] != 0)
        return nlse_fail(NLSE_ERR_INTERNAL, NLSE_DIPOLAR_PEER " another rank failed");
    return NLSE_OK;
}

/* The barrier of a collective call: this rank's work on the stream done,
 * then every rank learns whether any failed.  The failing rank returns its
 * own status, the others a peer status. */
static int dist_sync(nlse_dipolar *s, int st)
{
    dipolar_dist *D = s->dist;
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    double v = 0;
    return agree_max(D, st, &v, 1);
}

/* x summed over the ranks in rank order (n values in place). */
static int rank_sum(nlse_dipolar *s, double *x, size_t n)
{
    double t = now();
    int st = s->dist->comm->sum(s->dist->comm->ctx, x, n);
    s->dist->tm[3] += now() - t;
    return st;
}

/* The same with a local status: x has n + 1 slots, the last one carries
 * whether any rank failed (every rank takes part either way). */
static int rank_sum_st(nlse_dipolar *s, double *x, size_t n, int st)
{
    if (st)
        for (size_t q = 0; q < n; ++q)
            x[q] = 0;
    x[n] = st ? 1.0 : 0.0;
    int rc = rank_sum(s, x, n + 1);
    if (st)
        return st;
    if (rc)
        return rc;
    if (x[n] != 0)
        return nlse_fail(NLSE_ERR_INTERNAL, NLSE_DIPOLAR_PEER " another rank failed");
    return NLSE_OK;
}

/* The start of a collective call: local status st agreed; when any rank's
 * state is complex (or complex_needed), every rank's becomes complex (the
 * transposes move one kind of value). */
static int begin(nlse_dipolar *s, int st, int complex_needed)
{
    dipolar_dist *D = s->dist;
    if (!st && !D->connected)
        st = nlse_fail(NLSE_ERR_VALUE, "the slab is not connected to the other ranks' buffers");
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    double v[2] = {0, s->is_real ? 0.0 : 1.0};
    if ((st = agree_max(D, st, v, 2)))
        return st;
    if (v[1] != 0 || complex_needed)
        st = dipolar_promote(s);
    return dist_sync(s, st);
}

/* ------------------------------------------------------------------ */
/* transposes                                                         */
/* ------------------------------------------------------------------ */

/* rows x w items of E: dst (pitch dp items) <- src (pitch sp items), by
 * the SMs (dst or src may be another GPU's memory, mapped by CUDA IPC). */
template <typename E>
__global__ void __launch_bounds__(256)
k_copy2d(E *dst, size_t dp, const E *src, size_t sp, size_t w, size_t rows)
{
    for (size_t r = blockIdx.y; r < rows; r += gridDim.y)
        for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < w;
             c += (size_t)gridDim.x * blockDim.x)
            dst[r * dp + c] = src[r * sp + c];
}

/* cudaMemcpy2DAsync's copy by k_copy2d on stream st, in the widest items
 * that every address, pitch and the width allow. */
static int copy2d_sm(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t rows, cudaStream_t st)
{
    const size_t al = (size_t)dst | (size_t)src | dpitch | spitch | width;
    const size_t e = al % 16 == 0 ? 16 : al % 8 == 0 ? 8 : al % 4 == 0 ? 4 : 1, w = width / e;
    if (!w || !rows)
        return NLSE_OK;
    const dim3 grid((unsigned)(w < 256 * 32 ? (w + 255) / 256 : 32),
                    (unsigned)(rows < 65535 ? rows : 65535));
    if (e == 16)
        k_copy2d<uint4><<<grid, 256, 0, st>>>((uint4 *)dst, dpitch / e, (const uint4 *)src,
                                              spitch / e, w, rows);
    else if (e == 8)
        k_copy2d<uint2><<<grid, 256, 0, st>>>((uint2 *)dst, dpitch / e, (const uint2 *)src,
                                              spitch / e, w, rows);
    else if (e == 4)
        k_copy2d<unsigned><<<grid, 256, 0, st>>>((unsigned *)dst, dpitch / e,
                                                 (const unsigned *)src, spitch / e, w, rows);
    else
        k_copy2d<unsigned char><<<grid, 256, 0, st>>>((unsigned char *)dst, dpitch,
                                                      (const unsigned char *)src, spitch, w, rows);
    return nlse_cuda_check(cudaGetLastError(), "k_copy2d");
}

/* A 2D copy to rank r on r's copy stream, after what the solver's stream
 * has queued; the solver's stream waits for it. */
static int copy_start(nlse_dipolar *s, int r, void *dst, size_t dpitch, const void *src,
                      size_t spitch, size_t width, size_t rows)
{
    dipolar_dist *D = s->dist;
    CK(cudaStreamWaitEvent(D->cs[r], D->ready, 0));
    if (D->sm_copy[r])
        CKS(copy2d_sm(dst, dpitch, src, spitch, width, rows, D->cs[r]));
    else
        CK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDefault,
                             D->cs[r]));
    CK(cudaEventRecord(D->done[r], D->cs[r]));
    return NLSE_OK;
}

static int copy_to(nlse_dipolar *s, int r, void *dst, size_t dpitch, const void *src,
                   size_t spitch, size_t width, size_t rows)
{
    CKS(copy_start(s, r, dst, dpitch, src, spitch, width, rows));
    CK(cudaStreamWaitEvent(s->stream, s->dist->done[r], 0));
    return NLSE_OK;
}

/* The bytes of one x row of the state as it is stored now (real or complex). */
static size_t state_plane(const nlse_dipolar *s)
{
    return s->dist->n1 * s->dist->n2 * (s->is_real ? 1 : 2) * s->rs;
}

/* The state's row -2: two rows of the rank below, the state, two rows of
 * the rank above follow it (rows of `plane` bytes; halo_rows fills them). */
static char *ext_of(nlse_dipolar *s, size_t plane)
{
    return (char *)s->psi - 2 * plane;
}

/* This rank's buffer b (the pencils, the state, the density). */
static char *own(nlse_dipolar *s, int b)
{
    return (char *)(b == 0 ? s->dist->pen : b == 1 ? s->psi : s->dens);
}

/* The all-to-all of the staging buffers in items of `item` bytes (counts in
 * D->cnt); every rank calls it, a failed one too (then with its status). */
static int exchange(nlse_dipolar *s, size_t item, int st)
{
    dipolar_dist *D = s->dist;
    const int P = D->size;
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    int rc = D->comm->alltoallv(D->comm->ctx, item, D->hsend, D->cnt, D->cnt + P, D->hrecv,
                                D->cnt + 2 * P, D->cnt + 3 * P);
    return st ? st : rc;
}

/* The all-to-all's counts and displacements in D->cnt (items of one line)
 * between the slab's blocks packed by rank (ni yc[r] lines each, in rank
 * order) and the pencils (xc[r] nj lines at xs[r] nj): slab to pencils
 * when `to`, else back.  The own block does not go through the host (the
 * callers copy it on the device): its counts are 0. */
static void staged_counts(dipolar_dist *D, size_t ni, int to)
{
    const int P = D->size;
    size_t *sc = D->cnt, *sd = sc + P, *rc = sd + P, *rd = rc + P, off = 0;
    size_t *bc = to ? sc : rc, *bd = to ? sd : rd, *pc = to ? rc : sc, *pd = to ? rd : sd;
    for (int r = 0; r < P; ++r) {
        bc[r] = r == D->rank ? 0 : ni * D->yc[r];
        bd[r] = off;
        off += bc[r];
        pc[r] = r == D->rank ? 0 : D->xc[r] * D->nj;
        pd[r] = D->xs[r] * D->nj;
    }
}

/* Host <-> device copies of the pencils' lines outside this rank's x rows
 * (the other ranks' blocks, which the all-to-all moves): `down` to the
 * host buffer h from the device buffer d, else back. */
static int pencils_staged(nlse_dipolar *s, char *d, char *h, size_t line, int down)
{
    dipolar_dist *D = s->dist;
    const size_t a = D->xs[D->rank] * D->nj * line, e = a + s->L.n[0] * D->nj * line,
                 all = D->n0 * D->nj * line;
    const cudaMemcpyKind k = down ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    int st = NLSE_OK;
    if (a)
        st = nlse_cuda_check(cudaMemcpyAsync(down ? h : d, down ? d : h, a, k, s->stream),
                             "cudaMemcpy");
    if (!st && all > e)
        st = nlse_cuda_check(cudaMemcpyAsync((down ? h : d) + e, (down ? d : h) + e, all - e, k,
                                             s->stream), "cudaMemcpy");
    return st;
}

/* The own block between the slab (lines at ys[rank], pitch n1) and the
 * pencils (x rows at xs[rank], pitch nj) on the device: to the pencils
 * when `to`, else back. */
static int own_block(nlse_dipolar *s, const void *src, int b, size_t line, int to)
{
    dipolar_dist *D = s->dist;
    const size_t ni = s->L.n[0], w = D->nj * line;
    if (!ni || !D->nj)
        return NLSE_OK;
    const size_t so = to ? D->ys[D->rank] * line : D->xs[D->rank] * w,
                 dof = to ? D->xs[D->rank] * w : D->ys[D->rank] * line;
    return copy2d_sm(own(s, b) + dof, to ? w : D->n1 * line, (const char *)src + so,
                     to ? D->n1 * line : w, w, ni, s->stream);
}

/* to_pencils through host memory: blocks packed by destination (the own
 * block stays on the device). */
static int to_pencils_staged(nlse_dipolar *s, const void *src, int b, size_t line)
{
    dipolar_dist *D = s->dist;
    const size_t ni = s->L.n[0], *sd = D->cnt + D->size;
    int st = NLSE_OK;
    staged_counts(D, ni, 1);
    for (int r = 0; r < D->size; ++r) {
        if (!st && D->yc[r] && r != D->rank)
            st = nlse_cuda_check(cudaMemcpy2DAsync(D->hsend + sd[r] * line, D->yc[r] * line,
                                                   (const char *)src + D->ys[r] * line,
                                                   D->n1 * line, D->yc[r] * line, ni,
                                                   cudaMemcpyDeviceToHost, s->stream),
                                 "cudaMemcpy2D");
    }
    st = exchange(s, line, st);
    if (!st) /* what came from rank r is its x rows: the pencils as they lie */
        st = pencils_staged(s, own(s, b), D->hrecv, line, 0);
    return st ? st : own_block(s, src, b, line, 1);
}

/* from_pencils through host memory: the pencils' rows of rank r are one
 * block (the own block stays on the device). */
static int from_pencils_staged(nlse_dipolar *s, const void *src, int b, size_t line)
{
    dipolar_dist *D = s->dist;
    const int P = D->size;
    const size_t ni = s->L.n[0], *rd = D->cnt + 3 * P;
    staged_counts(D, ni, 0);
    int st = pencils_staged(s, (char *)src, D->hsend, line, 1);
    st = exchange(s, line, st);
    for (int r = 0; !st && r < P; ++r)
        if (D->yc[r] && r != D->rank)
            st = nlse_cuda_check(cudaMemcpy2DAsync(own(s, b) + D->ys[r] * line, D->n1 * line,
                                                   D->hrecv + rd[r] * line, D->yc[r] * line,
                                                   D->yc[r] * line, ni, cudaMemcpyHostToDevice,
                                                   s->stream), "cudaMemcpy2D");
    return st ? st : own_block(s, src, b, line, 0);
}

/* Slab (ni, n1, L values of es bytes) at src -> buffer b of every rank r as
 * its pencils (n0, yc[r], L), at this rank's x rows. */
static int to_pencils(nlse_dipolar *s, const void *src, int b, size_t L, size_t es)
{
    dipolar_dist *D = s->dist;
    const size_t line = L * es, ni = s->L.n[0];
    if (D->staged)
        return to_pencils_staged(s, src, b, line);
    CK(cudaEventRecord(D->ready, s->stream));
    for (int r = 0; r < D->size; ++r) {
        if (!D->yc[r])
            continue;
        char *dst = (char *)D->peer[b * D->size + r] + D->xs[D->rank] * D->yc[r] * line;
        const char *from = (const char *)src + D->ys[r] * line;
        CKS(copy_to(s, r, dst, D->yc[r] * line, from, D->n1 * line, D->yc[r] * line, ni));
    }
    return NLSE_OK;
}

/* Pencils (n0, nj, L) at src -> buffer b of every rank r as its slab
 * (xc[r], n1, L), at this rank's y rows. */
static int from_pencils(nlse_dipolar *s, const void *src, int b, size_t L, size_t es)
{
    dipolar_dist *D = s->dist;
    const size_t line = L * es;
    if (D->staged)
        return from_pencils_staged(s, src, b, line);
    if (!D->nj)
        return NLSE_OK;
    CK(cudaEventRecord(D->ready, s->stream));
    for (int r = 0; r < D->size; ++r) {
        char *dst = (char *)D->peer[b * D->size + r] + D->j0 * line;
        const char *from = (const char *)src + D->xs[r] * D->nj * line;
        CKS(copy_to(s, r, dst, D->n1 * line, from, D->nj * line, D->nj * line, D->xc[r]));
    }
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* the dipolar term                                                   */
/* ------------------------------------------------------------------ */

static int make_plans(nlse_dipolar *s)
{
    dipolar_dist *D = s->dist;
    const int dbl = s->p.dtype == NLSE_COMPLEX128;
    int n[2] = {(int)D->n1, (int)D->n2}, rin[2] = {(int)D->n1, (int)s->nlp},
        cin[2] = {(int)D->n1, (int)D->nh};
    const int ni = (int)s->L.n[0];
    size_t w = 0;
    CKS(dipolar_fft_check(cufftCreate(&D->f2), "cufftCreate"));
    if (cufftCreate(&D->b2) != CUFFT_SUCCESS) {
        cufftDestroy(D->f2);
        return nlse_fail(NLSE_ERR_BACKEND, "cuFFT error in cufftCreate");
    }
    D->plans = 1;
    CKS(dipolar_fft_check(cufftMakePlanMany(D->f2, 2, n, rin, 1, (int)(D->n1 * s->nlp), cin, 1,
                                            (int)(D->n1 * D->nh), dbl ? CUFFT_D2Z : CUFFT_R2C,
                                            ni, &w),
                          "cufftMakePlanMany (y, z)"));
    s->fft_work += w;
    CKS(dipolar_fft_check(cufftMakePlanMany(D->b2, 2, n, cin, 1, (int)(D->n1 * D->nh), rin, 1,
                                            (int)(D->n1 * s->nlp), dbl ? CUFFT_Z2D : CUFFT_C2R,
                                            ni, &w),
                          "cufftMakePlanMany (y, z)"));
    s->fft_work += w;
    CKS(dipolar_fft_check(cufftSetStream(D->f2, s->stream), "cufftSetStream"));
    CKS(dipolar_fft_check(cufftSetStream(D->b2, s->stream), "cufftSetStream"));
    if (D->nj) {
        int nx[1] = {(int)D->n0}, emb[1] = {(int)D->n0};
        const int lines = (int)(D->nj * D->nh);
        CKS(dipolar_fft_check(cufftCreate(&D->fx), "cufftCreate"));
        D->plans = 2;
        CKS(dipolar_fft_check(cufftMakePlanMany(D->fx, 1, nx, emb, lines, 1, emb, lines, 1,
                                                dbl ? CUFFT_Z2Z : CUFFT_C2C, lines, &w),
                              "cufftMakePlanMany (x)"));
        s->fft_work += w;
        CKS(dipolar_fft_check(cufftSetStream(D->fx, s->stream), "cufftSetStream"));
    }
    s->dev_bytes += s->fft_work;
    return NLSE_OK;
}

/* The kernel on this rank's pencils of the spectrum, (n0, nj, nh), with 1/N. */
static int make_kernel(nlse_dipolar *s)
{
    dipolar_dist *D = s->dist;
    const size_t nk = D->n0 * D->nj * D->nh;
    D->kern_bytes = (nk ? nk : 1) * s->rs;
    CKS(dmalloc(s, &D->kern, D->kern_bytes, "the dipolar kernel"));
    if (!nk)
        return NLSE_OK;
    double *K = (double *)malloc(nk * sizeof(double));
    if (!K)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the dipolar kernel");
    dipolar_layout G = s->L;
    G.n[0] = D->n0;
    const double invN = 1.0 / ((double)D->n0 * (double)D->n1 * (double)D->n2);
    for (size_t i = 0; i < D->n0; ++i)
        for (size_t jl = 0; jl < D->nj; ++jl)
            for (size_t k = 0; k < D->nh; ++k)
                K[(i * D->nj + jl) * D->nh + k] =
                    dipolar_kernel_value(&s->p, &G, i, D->j0 + jl, k) * invN;
    int st = upload(s, D->kern, K, nk);
    free(K);
    return st;
}

static int pipe_plans(nlse_dipolar *s); /* the pipelined transposes' plans, below */

/* Plans and kernel of the dipolar term (local: no message). */
static int dipolar_dist_enable(nlse_dipolar *s)
{
    if (s->have_plans)
        return NLSE_OK;
    CKS(dipolar_check_dipolar(&s->p));
    CKS(make_plans(s));
    CKS(pipe_plans(s));
    CKS(make_kernel(s));
    s->have_plans = 1;
    s->p.dipolar = 1;
    return NLSE_OK;
}

/* The local work queued so far done (the start of a timed transpose). */
static int drain(nlse_dipolar *s, int st)
{
    return st ? st : nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
}

/* A transpose to the pencils (to) or back, once the local work queued has
 * drained, and the barrier after it; its seconds are added to *acc. */
static int transpose(nlse_dipolar *s, int to, const void *src, int b, size_t L, size_t es, int st,
                     double *acc)
{
    st = drain(s, st);
    const double t0 = now();
    if (!st)
        st = to ? to_pencils(s, src, b, L, es) : from_pencils(s, src, b, L, es);
    st = dist_sync(s, st);
    *acc += now() - t0;
    return st;
}

/* The C2C transform along x of the spectrum's pencils at pen, in place. */
static int exec_x(nlse_dipolar *s, void *pen, int dir)
{
    cufftHandle p = s->dist->fx;
    if (s->p.dtype == NLSE_COMPLEX128)
        return dipolar_fft_check(cufftExecZ2Z(p, (cufftDoubleComplex *)pen,
                                              (cufftDoubleComplex *)pen, dir), "cufftExecZ2Z");
    return dipolar_fft_check(cufftExecC2C(p, (cufftComplex *)pen, (cufftComplex *)pen, dir),
                             "cufftExecC2C");
}

/* ------------------------------------------------------------------ */
/* the dipolar term's transposes pipelined with its transforms        */
/* ------------------------------------------------------------------ */

/* Chunks of each pipelined transpose: the first chunk's transform and the
 * last chunk's copies are not hidden, so more chunks hide more, down to
 * transforms too small to fill the GPU. */
#ifndef DIPOLAR_PIPE_CHUNKS
#define DIPOLAR_PIPE_CHUNKS 4
#endif

/* The R2C plans of pq x rows and of the last chunk's rows (layout of D->f2). */
static int pipe_plans_r2c(nlse_dipolar *s, size_t *most)
{
    dipolar_dist *D = s->dist;
    const size_t ni = s->L.n[0];
    const int dbl = s->p.dtype == NLSE_COMPLEX128;
    int n[2] = {(int)D->n1, (int)D->n2}, rin[2] = {(int)D->n1, (int)s->nlp},
        cin[2] = {(int)D->n1, (int)D->nh};
    D->pq = (ni + DIPOLAR_PIPE_CHUNKS - 1) / DIPOLAR_PIPE_CHUNKS;
    const size_t rows[2] = {D->pq, D->pq ? ni - (ni - 1) / D->pq * D->pq : 0};
    for (int q = 0; q < 2 && D->pq && (q == 0 || rows[1] != rows[0]); ++q) {
        cufftHandle *h = &D->pf[q];
        size_t w = 0;
        CKS(dipolar_fft_check(cufftCreate(h), "cufftCreate"));
        ++D->npf;
        CKS(dipolar_fft_check(cufftSetAutoAllocation(*h, 0), "cufftSetAutoAllocation"));
        CKS(dipolar_fft_check(cufftMakePlanMany(*h, 2, n, rin, 1, (int)(D->n1 * s->nlp), cin, 1,
                                                (int)(D->n1 * D->nh), dbl ? CUFFT_D2Z : CUFFT_R2C,
                                                (int)rows[q], &w),
                              "cufftMakePlanMany (a chunk of rows)"));
        CKS(dipolar_fft_check(cufftSetStream(*h, s->stream), "cufftSetStream"));
        *most = w > *most ? w : *most;
    }
    return NLSE_OK;
}

/* The C2C plans along x of jq y rows of the pencils and of the last chunk's
 * (the pencils' layout, (n0, nj, nh): a chunk is a stretch of every x row). */
static int pipe_plans_x(nlse_dipolar *s, size_t *most)
{
    dipolar_dist *D = s->dist;
    const int dbl = s->p.dtype == NLSE_COMPLEX128;
    int nx[1] = {(int)D->n0}, emb[1] = {(int)D->n0};
    D->jq = (D->nj + DIPOLAR_PIPE_CHUNKS - 1) / DIPOLAR_PIPE_CHUNKS;
    const size_t cols[2] = {D->jq, D->jq ? D->nj - (D->nj - 1) / D->jq * D->jq : 0};
    const int stride = (int)(D->nj * D->nh);
    for (int q = 0; q < 2 && D->jq && (q == 0 || cols[1] != cols[0]); ++q) {
        cufftHandle *h = &D->px[q];
        size_t w = 0;
        CKS(dipolar_fft_check(cufftCreate(h), "cufftCreate"));
        ++D->npx;
        CKS(dipolar_fft_check(cufftSetAutoAllocation(*h, 0), "cufftSetAutoAllocation"));
        CKS(dipolar_fft_check(cufftMakePlanMany(*h, 1, nx, emb, stride, 1, emb, stride, 1,
                                                dbl ? CUFFT_Z2Z : CUFFT_C2C,
                                                (int)(cols[q] * D->nh), &w),
                              "cufftMakePlanMany (a chunk of lines)"));
        CKS(dipolar_fft_check(cufftSetStream(*h, s->stream), "cufftSetStream"));
        *most = w > *most ? w : *most;
    }
    return NLSE_OK;
}

/* The chunk plans and their work area, on ranks that transpose device to
 * device (made with the dipolar term's plans; counted in its work). */
static int pipe_plans(nlse_dipolar *s)
{
    dipolar_dist *D = s->dist;
    size_t most = 0;
    if (D->size == 1)
        return NLSE_OK;
    CKS(pipe_plans_r2c(s, &most));
    CKS(pipe_plans_x(s, &most));
    CKS(dmalloc(s, &D->pwork, most ? most : 1, "the chunked transforms' work area"));
    s->fft_work += most;
    for (int q = 0; q < D->npf; ++q)
        CKS(dipolar_fft_check(cufftSetWorkArea(D->pf[q], D->pwork), "cufftSetWorkArea"));
    for (int q = 0; q < D->npx; ++q)
        CKS(dipolar_fft_check(cufftSetWorkArea(D->px[q], D->pwork), "cufftSetWorkArea"));
    D->pipe = 1;
    return NLSE_OK;
}

/* rows x w complex values at pitch `pitch` times the kernel at the same places. */
template <typename T>
__global__ void k_kmul_rows(typename Vec2<T>::T *d, const T *K, long long rows, long long w,
                            long long pitch)
{
    const long long n = rows * w;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n;
         q += (long long)gridDim.x * blockDim.x) {
        const long long i = q / w, at = i * pitch + (q - i * w);
        typename Vec2<T>::T v = d[at];
        const T k = K[at];
        v.x *= k;
        v.y *= k;
        d[at] = v;
    }
}

/* The streams' copies queued so far joined to the solver's stream; the
 * time from the end of the transforms to the end of the barrier after
 * the copies (the part the transforms did not hide) added to *acc. */
static int pipe_join(nlse_dipolar *s, int st, double *acc)
{
    dipolar_dist *D = s->dist;
    if (!st)
        st = nlse_cuda_check(cudaEventRecord(D->ready, s->stream), "cudaEventRecord");
    if (!st)
        st = nlse_cuda_check(cudaEventSynchronize(D->ready), "cudaEventSynchronize");
    const double t0 = now();
    for (int r = 0; !st && r < D->size; ++r)
        st = nlse_cuda_check(cudaStreamWaitEvent(s->stream, D->done[r], 0),
                             "cudaStreamWaitEvent");
    st = dist_sync(s, st);
    *acc += now() - t0;
    return st;
}

/* The density's R2C along (y, z) by chunks of x rows, each chunk sent to
 * every rank's pencils while the next transforms; then the barrier. */
template <typename T> static int pipe_forward(nlse_dipolar *s)
{
    dipolar_dist *D = s->dist;
    const size_t ni = s->L.n[0], line = D->nh * 2 * s->rs;
    int st = NLSE_OK;
    for (size_t a = 0; a < ni && !st; a += D->pq) {
        const size_t rows = D->pq < ni - a ? D->pq : ni - a;
        T *base = (T *)((char *)s->dens + a * D->n1 * line);
        cufftHandle h = rows == D->pq ? D->pf[0] : D->pf[1];
        st = dipolar_fft_check(sizeof(T) == 8 ? cufftExecD2Z(h, (cufftDoubleReal *)base,
                                                             (cufftDoubleComplex *)base)
                                              : cufftExecR2C(h, (cufftReal *)base,
                                                             (cufftComplex *)base),
                               "cufftExec (R2C of a chunk)");
        if (!st)
            st = nlse_cuda_check(cudaEventRecord(D->ready, s->stream), "cudaEventRecord");
        for (int r = 0; !st && r < D->size; ++r)
            if (D->yc[r])
                st = copy_start(s, r,
                                (char *)D->peer[r] + (D->xs[D->rank] + a) * D->yc[r] * line,
                                D->yc[r] * line, (const char *)base + D->ys[r] * line,
                                D->n1 * line, D->yc[r] * line, rows);
    }
    return pipe_join(s, st, &D->tm[3]);
}

/* Along x on the pencils by chunks of y rows: transform, kernel, back,
 * and the chunk's lines sent to every rank's slab while the next chunk
 * transforms; then the barrier. */
template <typename T> static int pipe_back(nlse_dipolar *s)
{
    typedef typename Vec2<T>::T T2;
    dipolar_dist *D = s->dist;
    const size_t line = D->nh * 2 * s->rs, pitch = D->nj * D->nh;
    int st = NLSE_OK;
    for (size_t ja = 0; ja < D->nj && !st; ja += D->jq) {
        const size_t cols = D->jq < D->nj - ja ? D->jq : D->nj - ja;
        const cufftHandle h = cols == D->jq ? D->px[0] : D->px[1];
        T2 *p = (T2 *)D->pen + ja * D->nh;
        for (int dir = CUFFT_FORWARD; !st; dir = CUFFT_INVERSE) {
            st = dipolar_fft_check(sizeof(T) == 8 ? cufftExecZ2Z(h, (cufftDoubleComplex *)p,
                                                                 (cufftDoubleComplex *)p, dir)
                                                  : cufftExecC2C(h, (cufftComplex *)p,
                                                                 (cufftComplex *)p, dir),
                                   "cufftExec (along x, a chunk)");
            if (st || dir == CUFFT_INVERSE)
                break;
            const long long w = (long long)(cols * D->nh), n = (long long)D->n0 * w;
            k_kmul_rows<T><<<grid_for(n, 256), 256, 0, s->stream>>>(
                p, (const T *)D->kern + ja * D->nh, (long long)D->n0, w, (long long)pitch);
            st = nlse_cuda_check(cudaGetLastError(), "k_kmul_rows");
        }
        if (!st)
            st = nlse_cuda_check(cudaEventRecord(D->ready, s->stream), "cudaEventRecord");
        for (int r = 0; !st && r < D->size; ++r)
            if (D->xc[r])
                st = copy_start(s, r, (char *)D->peer[2 * D->size + r] + (D->j0 + ja) * line,
                                D->n1 * line, (const char *)D->pen + D->xs[r] * D->nj * line +
                                                  ja * line,
                                D->nj * line, cols * line, D->xc[r]);
    }
    return pipe_join(s, st, &D->tm[3]);
}

/* The end of dist_fft: the C2R of the slab's spectrum back in dens (when
 * st is NLSE_OK), the stream drained, the term's seconds since t0 counted. */
template <typename T> static int back_to_real(nlse_dipolar *s, int st, double t0)
{
    if (!st)
        st = sizeof(T) == sizeof(double)
                 ? dipolar_fft_check(cufftExecZ2D(s->dist->b2, (cufftDoubleComplex *)s->dens,
                                                  (cufftDoubleReal *)s->dens), "cufftExecZ2D")
                 : dipolar_fft_check(cufftExecC2R(s->dist->b2, (cufftComplex *)s->dens,
                                                  (cufftReal *)s->dens), "cufftExecC2R");
    st = drain(s, st);
    s->dist->tm[2] += now() - t0;
    return st;
}

/* dens <- V_dd * dens (the density in dens; collective).  The spectrum's x
 * pencils are the other ranks' (pen), or dens itself on one rank. */
template <typename T> static int dist_fft(nlse_dipolar *s)
{
    dipolar_dist *D = s->dist;
    const double t0 = now();
    const int dbl = sizeof(T) == sizeof(double), one = D->size == 1;
    const size_t ces = 2 * s->rs;
    void *pen = one ? s->dens : D->pen;
    if (D->pipe && !D->staged) { /* transposes pipelined with the transforms */
        int st = pipe_forward<T>(s);
        if (!st)
            st = pipe_back<T>(s);
        return back_to_real<T>(s, st, t0);
    }
    int st = dbl ? dipolar_fft_check(cufftExecD2Z(D->f2, (cufftDoubleReal *)s->dens,
                                                  (cufftDoubleComplex *)s->dens), "cufftExecD2Z")
                 : dipolar_fft_check(cufftExecR2C(D->f2, (cufftReal *)s->dens,
                                                  (cufftComplex *)s->dens), "cufftExecR2C");
    if (!one && (st = transpose(s, 1, s->dens, 0, D->nh, ces, st, &D->tm[3])))
        return st;
    if (D->nj && !st) {
        const long long nk = (long long)(D->n0 * D->nj * D->nh);
        st = exec_x(s, pen, CUFFT_FORWARD);
        if (!st)
            st = dipolar_kmul<T>(s, pen, D->kern, nk);
        if (!st)
            st = exec_x(s, pen, CUFFT_INVERSE);
    }
    if (!one && (st = transpose(s, 0, D->pen, 2, D->nh, ces, st, &D->tm[3])))
        return st;
    return back_to_real<T>(s, st, t0);
}

/* ------------------------------------------------------------------ */
/* stepping                                                           */
/* ------------------------------------------------------------------ */

/* Density (when `want`) and the norm of the whole grid: the slab's part,
 * summed over the ranks, into *nrm and the device word the steps read. */
template <typename T> static int global_norm(nlse_dipolar *s, int want, double *nrm, int st)
{
    dipolar_dist *D = s->dist;
    double v[2] = {0, 0};
    if (!st && D->norm_parts > 0) /* the x solve's correction made the density and parts */
        dipolar_norm(s, D->norm_parts, -2, NULL);
    else if (!st)
        st = dipolar_prepare<T>(s, want, -2);
    D->norm_parts = 0;
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(v, s->norm, sizeof(double), cudaMemcpyDeviceToHost,
                                             s->stream), "cudaMemcpy");
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    CKS(rank_sum_st(s, v, 1, st));
    *nrm = v[0];
    st = nlse_cuda_check(cudaMemcpyAsync(s->norm, nrm, sizeof(double), cudaMemcpyHostToDevice,
                                         s->stream), "cudaMemcpy");
    return dist_sync(s, st);
}

/* ------------------------------------------------------------------ */
/* the x solve by substructuring                                      */
/* ------------------------------------------------------------------ */

static int halo_rows(nlse_dipolar *s, int st); /* the observables' halo rows, below */

template <typename V> __device__ __forceinline__ double2 to_d2(V v)
{
    return make_double2(re_of(v), im_of(v));
}
template <typename V> __device__ __forceinline__ V from_d2(double2 v);
template <> __device__ __forceinline__ float from_d2<float>(double2 v) { return (float)v.x; }
template <> __device__ __forceinline__ double from_d2<double>(double2 v) { return v.x; }
template <> __device__ __forceinline__ float2 from_d2<float2>(double2 v)
{
    return make_float2((float)v.x, (float)v.y);
}
template <> __device__ __forceinline__ double2 from_d2<double2>(double2 v) { return v; }

/* L and R - h of line l (k_spike_back): every rank's ends d
 * (rank order) times the rows kv, kw of K^-1, h the top value the local
 * solve took (NULL at the grid's top). */
template <typename V>
__device__ __forceinline__ void spike_lr(const double *d, int P, long long lanes, long long l,
                                         const double *kv, const double *kw, const V *h,
                                         double &lr, double &li, double &rr, double &ri)
{
    lr = li = rr = ri = 0;
    for (int q = 0; q < P; ++q)
        for (int e = 0; e < 2; ++e) {
            const double *x = d + ((size_t)q * lanes + l) * 4 + 2 * e;
            const double *a = kv + 2 * (2 * q + e), *b = kw + 2 * (2 * q + e);
            lr += a[0] * x[0] - a[1] * x[1];
            li += a[0] * x[1] + a[1] * x[0];
            rr += b[0] * x[0] - b[1] * x[1];
            ri += b[0] * x[1] + b[1] * x[0];
        }
    if (h) {
        const double2 hv = to_d2(h[l]);
        rr -= hv.x;
        ri -= hv.y;
    }
}

/* y + L v(r) + (R - h) w(r) at own row r (v = 0 at the grid's bottom rank,
 * w = 0 at its top rank). */
template <typename V>
__device__ __forceinline__ V spike_value(V y, int r, int lo, int hi, const double *sv,
                                         const double *sw, double lr, double li, double rr,
                                         double ri)
{
    const double2 yv = to_d2(y);
    const double vr = lo ? 0 : sv[2 * r], vi = lo ? 0 : sv[2 * r + 1];
    const double wr = hi ? 0 : sw[2 * r], wi = hi ? 0 : sw[2 * r + 1];
    const double cr = (lr * vr - li * vi) + (rr * wr - ri * wi);
    const double ci = (lr * vi + li * vr) + (rr * wi + ri * wr);
    return from_d2<V>(make_double2(yv.x + cr, yv.y + ci));
}

/* The forward sweep of the substructured x solve: the local systems'
 * forward sweep (k_lanes' recursion, beta stored in the
 * state shifted by one row) also gives both ends of every line, so no pass
 * reads the local solution back: the first own value is beta_0 (less h w_0)
 * and, the local system being symmetric Toeplitz, the last one's part from
 * the right-hand side is sum_i k_i c_i with k = -w / A, w the response to a
 * unit top value (sw on the own rows).  d[4 l ..] = (y_first - h w_first,
 * y_last - h w_last) of line l as complex doubles (h: the top value the
 * local solve took, 0 at the grid's top).  mia = -1 / A (complex). */
template <typename T, typename V, typename C>
__global__ void __launch_bounds__(BLK)
k_spike_fwd(V *p0, long long lanes, int n, CN<C> cn, const double *sw, int lo, int hi,
            const V *h, double2 mia, double *d)
{
    const C A = cn.A, A0r = cn.A0r;
    const int o = lo ? 0 : 1; /* local point of own row 0 */
    constexpr int UNR = UNR_OF(V);
    for (long long l = (long long)blockIdx.x * blockDim.x + threadIdx.x; l < lanes;
         l += (long long)gridDim.x * blockDim.x) {
        V *p = p0 + l;
        const long long rs = lanes;
        double ar = 0, ai = 0; /* sum_i w_i c_i over the interior points */
        V beta;
        CN_FORWARD(V, p, rs, n, A, A0r, cn.ga, UNR, beta, if (!hi) {
            const double2 c2 = to_d2(cc);
            const double wr = sw[2 * (ii - o)], wi = sw[2 * (ii - o) + 1];
            ar += wr * c2.x - wi * c2.y;
            ai += wr * c2.y + wi * c2.x;
        });
        double *e = d + 4 * l;
        if (lo) { /* the own first row is the grid's boundary: 0 */
            e[0] = 0;
            e[1] = 0;
        } else { /* y_1 = beta_0, less the part of the top value h */
            const double2 b = to_d2(beta);
            double2 hv = make_double2(0, 0);
            if (!hi)
                hv = to_d2(h[l]);
            e[0] = b.x - (hv.x * sw[0] - hv.y * sw[1]);
            e[1] = b.y - (hv.x * sw[1] + hv.y * sw[0]);
        }
        /* the last own row: sum k_i c_i = (-1/A) sum w_i c_i (0 at the grid's top) */
        e[2] = hi ? 0 : mia.x * ar - mia.y * ai;
        e[3] = hi ? 0 : mia.x * ai + mia.y * ar;
    }
}

/* The back sweep of the substructured x solve: the local solution y from
 * 0 at the bottom point (x_m = alpha_(m-1) x_(m-1) + beta_(m-1), beta in slot m + 1)
 * and at once psi = y + L v + (R - h) w on the own rows (L and R of each
 * line from every rank's ends, in rank order, and the rows kv, kw of
 * K^-1), the density (out.dens unless NULL) and the block's part of the
 * Simpson norm (out.partial), which k_prepare would otherwise make in one
 * more pass over the state. */
template <typename T, typename V, typename C>
__global__ void __launch_bounds__(BLK)
k_spike_back(V *p0, int ni, long long lanes, int n, CN<C> cn, const double *d, int P,
             const double *kv, const double *kw, const double *sv, const double *sw, const V *h,
             int lo, int hi, Grid<T> G, Dens<T> out)
{
    __shared__ double red[BLK / 32];
    double nsum = 0;
    const int o = lo ? 0 : 1;
    for (long long l = (long long)blockIdx.x * blockDim.x + threadIdx.x; l < lanes;
         l += (long long)gridDim.x * blockDim.x) {
        double lr, li, rr, ri;
        spike_lr<V>(d, P, lanes, l, kv, kw, hi ? NULL : h, lr, li, rr, ri);
        const long long j = l / G.n2, k = l - j * G.n2;
        V *p = p0 + l;
        const long long rs = lanes;
        double ls = 0;
        /* psi at local point m from y there (0 at the system's end points) */
        auto put = [&](int m, V y) {
            const int r = m - o; /* own row */
            if (r < 0 || r >= ni)
                return;
            const V pv = spike_value<V>(y, r, lo, hi, sv, sw, lr, li, rr, ri);
            p[m * rs] = pv;
            const T dv = abs2(pv);
            if (out.dens)
                out.dens[((long long)r * G.n1 + j) * G.nlp + k] = dv;
            ls += G.w0[r] * (double)dv;
        };
        put(0, zero<V>());
        V x = zero<V>();
        constexpr int UNR = UNR_OF(V);
        CN_BACK(V, p, rs, n, cn.al, UNR, x, put(mm, x));
        put(n - 1, zero<V>());
        nsum += ls * G.w1[j] * G.w2[k];
    }
    write_partial(nsum, red, out);
}

/* The path of the x solve, agreed by every rank at its first x solve
 * (every rank's NLSEPY_DIPOLAR_XSOLVE, D->tune: the highest choice of any
 * rank). */
static int spike_decide(nlse_dipolar *s, int st)
{
    dipolar_dist *D = s->dist;
    double v[2] = {0, (double)D->tune.xsolve};
    if ((st = agree_max(D, st, v, 2)))
        return st;
    D->xsolve = D->size > 1 ? (int)v[1] : NLSE_DIPOLAR_XSOLVE_TRANSPOSE;
    return NLSE_OK;
}

/* The responses and coupling rows for this mode and dt, on the device. */
static int spike_prepare(nlse_dipolar *s, int real_time)
{
    dipolar_dist *D = s->dist;
    const int mode = real_time ? NLSE_DIPOLAR_REAL : NLSE_DIPOLAR_IMAG;
    if (D->spike_mode == mode && D->spike_dt == s->p.dt)
        return NLSE_OK;
    const size_t ni = s->L.n[0], P = (size_t)D->size, cnt = 4 * ni + 8 * P;
    if (!D->spk) {
        CKS(dmalloc(s, (void **)&D->spk, cnt * sizeof(double), "the x solve's coupling rows"));
        D->hspk = (double *)calloc(cnt, sizeof(double));
        if (!D->hspk)
            return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    }
    double *h = D->hspk;
    const double r = s->p.dt * s->p.kin / (s->L.h[0] * s->L.h[0]);
    CKS(dipolar_spike_setup(r, real_time, D->size, D->xc, D->rank, h, h + 2 * ni, h + 4 * ni,
                            h + 4 * ni + 4 * P));
    CK(cudaMemcpyAsync(D->spk, h, cnt * sizeof(double), cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    D->spike_mode = mode;
    D->spike_dt = s->p.dt;
    return NLSE_OK;
}

/* Every rank's ends into drecv: read from the other GPUs (IPC) or through
 * host memory and the comm table's all-to-all (collective; the ends of
 * every rank written before, by the barrier). */
static int spike_gather(nlse_dipolar *s, int st)
{
    dipolar_dist *D = s->dist;
    const int P = D->size;
    const size_t E = D->ends_bytes;
    if ((st = dist_sync(s, st)))
        return st;
    if (!D->staged) {
        for (int r = 0; !st && r < P; ++r)
            st = nlse_cuda_check(cudaMemcpyAsync((char *)D->drecv + (size_t)r * E,
                                                 D->peer[3 * P + r], E, cudaMemcpyDefault,
                                                 s->stream), "cudaMemcpy");
        return dist_sync(s, st); /* read before any rank writes its ends again */
    }
    if (!D->hends_s) {
        if (cudaHostAlloc((void **)&D->hends_s, E, cudaHostAllocDefault) != cudaSuccess ||
            cudaHostAlloc((void **)&D->hends_r, E * (size_t)P, cudaHostAllocDefault) != cudaSuccess) {
            (void)cudaGetLastError();
            st = nlse_fail(NLSE_ERR_NOMEM, "out of pinned host memory for the lines' ends");
        }
    }
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(D->hends_s, D->ends, E, cudaMemcpyDeviceToHost,
                                             s->stream), "cudaMemcpy");
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    size_t *c = D->cnt;
    for (int r = 0; r < P; ++r) {
        c[r] = 1;              /* the same block to every rank */
        c[P + r] = 0;
        c[2 * P + r] = 1;
        c[3 * P + r] = (size_t)r;
    }
    int rc = D->comm->alltoallv(D->comm->ctx, E, D->hends_s, c, c + P, D->hends_r, c + 2 * P,
                                c + 3 * P);
    st = st ? st : rc;
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(D->drecv, D->hends_r, E * (size_t)P,
                                             cudaMemcpyHostToDevice, s->stream), "cudaMemcpy");
    return dist_sync(s, st);
}

/* spike_x once the halo rows are in place (ext) and the top one saved in
 * D->hrow: k_spike_fwd (the local systems and the lines' ends), the
 * gather of every rank's ends, k_spike_back (the local solution and the
 * correction, the density, the norm's parts). */
template <typename T, typename V, typename C>
static int spike_solve(nlse_dipolar *s, int real_time, int want, int st, char *ext, size_t n,
                       size_t shift)
{
    dipolar_dist *D = s->dist;
    const int P = D->size, lo = D->rank == 0, hi = D->rank == P - 1;
    const size_t ni = s->L.n[0], lanes = D->n1 * D->n2, plane = lanes * sizeof(V);
    const double *sv = D->spk, *sw = sv + 2 * ni, *kv = sw + 2 * ni, *kw = kv + 4 * (size_t)P;
    const int blocks = grid_for((long long)lanes, BLK);
    CN<C> cn = dipolar_cn<T, C>(s, 0, real_time);
    cn.al += shift;
    cn.ga += shift;
    V *base = (V *)(ext + (lo ? 2 : 1) * plane);
    const double r = s->p.dt * s->p.kin / (s->L.h[0] * s->L.h[0]);
    const double2 mia = real_time ? make_double2(0, -2 / r) : make_double2(2 / r, 0); /* -1/A */
    if (!st) {
        k_spike_fwd<T, V, C><<<blocks, BLK, 0, s->stream>>>(
            base, (long long)lanes, (int)n, cn, sw, lo, hi, hi ? NULL : (const V *)D->hrow, mia,
            (double *)D->ends);
        st = nlse_cuda_check(cudaGetLastError(), "k_spike_fwd");
    }
    const double t1 = now();
    st = spike_gather(s, st);
    D->tm[1] += now() - t1;
    if (!st) {
        Grid<T> G = grid_of<T>(s);
        G.n0 = (int)ni;
        k_spike_back<T, V, C><<<blocks, BLK, 0, s->stream>>>(
            base, (int)ni, (long long)lanes, (int)n, cn, (const double *)D->drecv, P, kv, kw, sv,
            sw, (const V *)D->hrow, lo, hi, G, dens_of<T>(want ? (T *)s->dens : NULL, s->partial));
        st = nlse_cuda_check(cudaGetLastError(), "k_spike_back");
        if (!st)
            D->norm_parts = blocks; /* global_norm: the parts are made */
    }
    return st;
}

/* The Crank-Nicolson solve along x by substructuring (collective): the
 * slab with one row of each neighbour (halo_rows), then spike_solve: the
 * local systems on the table rows from `shift`, the ends of every line
 * gathered, the correction. */
template <typename T, typename V, typename C>
static int spike_x(nlse_dipolar *s, int real_time, int want, int st)
{
    dipolar_dist *D = s->dist;
    const int P = D->size, lo = D->rank == 0, hi = D->rank == P - 1;
    const size_t ni = s->L.n[0], lanes = D->n1 * D->n2, plane = lanes * sizeof(V);
    const double t0 = now();
    if (!st)
        st = spike_prepare(s, real_time);
    if (!st && !D->drecv)
        st = dmalloc(s, &D->drecv, D->ends_bytes * (size_t)P, "every rank's line ends");
    if (!st && !D->hrow)
        st = dmalloc(s, &D->hrow, lanes * 2 * s->rs, "the top halo row");
    st = halo_rows(s, st); /* ext: 2 rows below, the state from row 2, 2 rows above */
    D->tm[1] += now() - t0;
    char *ext = ext_of(s, plane);
    if (!st && !hi)
        st = nlse_cuda_check(cudaMemcpyAsync(D->hrow, ext + (ni + 2) * plane, plane,
                                             cudaMemcpyDeviceToDevice, s->stream), "cudaMemcpy");
    const size_t n = ni + 2 - lo - hi, shift = D->n0 - n;
    return spike_solve<T, V, C>(s, real_time, want, st, ext, n, shift);
}

/* The x solve of the whole grid on the pencils (collective; a local error
 * st is carried to the first barrier); one rank alone solves its slab. */
template <typename T, typename V, typename C>
static int solve_x(nlse_dipolar *s, int real_time, int want, int st)
{
    dipolar_dist *D = s->dist;
    if (D->xsolve < 0 && (st = spike_decide(s, st)))
        return st;
    if (D->xsolve == NLSE_DIPOLAR_XSOLVE_SUBSTRUCTURE && s->rot == 0)
        return spike_x<T, V, C>(s, real_time, want, st); /* rotating: one table row a line */
    const size_t es = sizeof(V);
    const int one = D->size == 1;
    if (!one && (st = transpose(s, 1, s->psi, 0, D->n2, es, st, &D->tm[1])))
        return st;
    if (D->nj && !st) {
        Grid<T> G = grid_of<T>(s);
        G.n0 = (int)D->n0;
        G.n1 = (int)D->nj;
        Dens<T> out = dens_of<T>(NULL, s->partial);
        int parts = 0;
        V *pen = one ? (V *)s->psi : (V *)D->pen;
        if (s->rot != 0)
            st = dipolar_rot_solve<T, V>(s, pen, G, 0, real_time, 0, (int)D->n0, out, false,
                                         &parts, (int)D->j0);
        else
            st = dipolar_lanes<T, V, C>(s, pen, G, dipolar_cn<T, C>(s, 0, real_time), 0,
                                        (int)D->n0, out, false, &parts);
    }
    return one ? st : transpose(s, 0, D->pen, 1, D->n2, es, st, &D->tm[1]);
}

/* One step on the slab: H1 and the z solve, the y solve (local), the x
 * solve (collective). */
template <typename T, typename V, typename C>
static int step_once(nlse_dipolar *s, const H1Args<T> &a, int want, int st)
{
    const int real_time = !a.imag;
    Grid<T> G = grid_of<T>(s);
    Dens<T> out = dens_of<T>(NULL, s->partial);
    V *psi = (V *)s->psi;
    int parts = 0;
    if (!st && (s->zreg > 0 || s->zwarps > 0)) {
        st = dipolar_zsolve<T, V, C>(s, psi, G, a, dipolar_cn<T, C>(s, 2, real_time), out, false,
                                     &parts);
    } else if (!st) {
        st = dipolar_h1<T, V>(s, psi, G, a);
        if (!st)
            st = dipolar_lanes<T, V, C>(s, psi, G, dipolar_cn<T, C>(s, 2, real_time), 2, G.n2, out,
                                        false, &parts);
    }
    if (!st && s->rot != 0)
        st = dipolar_rot_solve<T, V>(s, psi, G, 1, real_time, 1, G.n1, out, false, &parts, 0);
    else if (!st)
        st = dipolar_lanes<T, V, C>(s, psi, G, dipolar_cn<T, C>(s, 1, real_time), 1, G.n1, out,
                                    false, &parts);
    if (!st)
        st = nlse_cuda_check(cudaGetLastError(), "the z and y solves");
    return solve_x<T, V, C>(s, real_time, want, st);
}

template <typename T>
static int step_t(nlse_dipolar *s, int mode, long n, double t0, double dg, double dgdd, long *done)
{
    typedef typename Vec2<T>::T T2;
    dipolar_dist *D = s->dist;
    const size_t bytes = (s->is_real ? 1 : 2) * s->L.N * s->rs;
    int st0 = nlse_cuda_check(cudaMemcpyAsync(s->backup, s->psi, bytes, cudaMemcpyDeviceToDevice,
                                              s->stream), "cudaMemcpy");
    const double g_start = s->g, gdd_start = s->gdd;
    const int want = s->have_plans && (s->gdd != 0 || dgdd != 0);
    double nrm = 0;
    CKS(global_norm<T>(s, want, &nrm, st0));
    if (!(nrm > 0) || !isfinite(nrm))
        return nlse_fail(nrm == 0 ? NLSE_ERR_VALUE : NLSE_ERR_BLOWUP,
                         nrm == 0 ? "the state is zero everywhere" : "the state is not finite");
    const double start = now();
    H1Args<T> a;
    a.imag = mode == NLSE_DIPOLAR_IMAG;
    a.dt = (T)s->p.dt;
    a.norm = s->norm;
    for (long k = 0; k < n; ++k) {
        double t;
        int st = dipolar_step_inputs<T>(s, &a, mode, k, t0, dg, dgdd, want, &t) != 0
                     ? dipolar_obstacle_at(s, t)
                     : NLSE_OK;
        if (want && s->gdd != 0) {
            if ((st = st ? dist_sync(s, st) : dist_fft<T>(s)))
                return st;
            a.D = (const T *)s->dens;
        }
        if (mode == NLSE_DIPOLAR_REAL)
            st = step_once<T, T2, T2>(s, a, want, st);
        else if (s->is_real)
            st = step_once<T, T, T>(s, a, want, st);
        else
            st = step_once<T, T2, T>(s, a, want, st);
        if (st || (st = global_norm<T>(s, want, &nrm, NLSE_OK)))
            return st;
        if (!isfinite(nrm) || !(nrm > 0)) /* the same sum on every rank: all stop here */
            return dipolar_blowup(s, bytes, g_start, gdd_start, k, n, done);
    }
    if (mode == NLSE_DIPOLAR_IMAG) {
        dipolar_scale_by_norm<T>(s);
        CK(cudaGetLastError());
    }
    CK(cudaStreamSynchronize(s->stream));
    D->tm[0] = now() - start;
    s->last_seconds = D->tm[0];
    if (done)
        *done = n;
    return NLSE_OK;
}

static int dipolar_dist_step(nlse_dipolar *s, int mode, long n, double t0, double dg, double dgdd,
                      long *done)
{
    int st = NLSE_OK;
    if (dgdd != 0 && !s->have_plans)
        st = dipolar_dist_enable(s);
    if (!st)
        st = dipolar_ensure_backup(s);
    CKS(begin(s, st, mode == NLSE_DIPOLAR_REAL || s->rot != 0));
    for (int q = 0; q < 5; ++q)
        s->dist->tm[q] = 0;
    return s->p.dtype == NLSE_COMPLEX64 ? step_t<float>(s, mode, n, t0, dg, dgdd, done)
                                        : step_t<double>(s, mode, n, t0, dg, dgdd, done);
}

/* ------------------------------------------------------------------ */
/* observables                                                        */
/* ------------------------------------------------------------------ */

template <typename T> static int of_state_t(nlse_dipolar *s)
{
    int st = dipolar_prepare<T>(s, 1, -2);
    if ((st = dist_sync(s, st)))
        return st;
    return dist_fft<T>(s);
}

static int dipolar_dist_of_state(nlse_dipolar *s)
{
    CKS(begin(s, NLSE_OK, 0));
    return s->p.dtype == NLSE_COMPLEX64 ? of_state_t<float>(s) : of_state_t<double>(s);
}

/* The neighbours' rows of halo_rows through host memory (items: planes). */
static int halo_staged(nlse_dipolar *s, size_t plane)
{
    dipolar_dist *D = s->dist;
    const int P = D->size, r = D->rank;
    const size_t ni = s->L.n[0];
    size_t *c = D->cnt;
    memset(c, 0, 4 * (size_t)P * sizeof(size_t));
    int st = nlse_cuda_check(cudaMemcpyAsync(D->hsend, s->psi, 2 * plane, cudaMemcpyDeviceToHost,
                                             s->stream), "cudaMemcpy");
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(D->hsend + 2 * plane, (const char *)s->psi +
                                             (ni - 2) * plane, 2 * plane, cudaMemcpyDeviceToHost,
                                             s->stream), "cudaMemcpy");
    if (r > 0) { /* my first rows down, its last rows in at ext row 0 */
        c[r - 1] = 2;
        c[P + r - 1] = 0;
        c[2 * P + r - 1] = 2;
        c[3 * P + r - 1] = 0;
    }
    if (r < P - 1) { /* my last rows up, its first rows in at ext row ni + 2 */
        c[r + 1] = 2;
        c[P + r + 1] = 2;
        c[2 * P + r + 1] = 2;
        c[3 * P + r + 1] = ni + 2;
    }
    st = exchange(s, plane, st);
    char *ext = ext_of(s, plane);
    if (!st && r > 0)
        st = nlse_cuda_check(cudaMemcpyAsync(ext, D->hrecv, 2 * plane, cudaMemcpyHostToDevice,
                                             s->stream), "cudaMemcpy");
    if (!st && r < P - 1)
        st = nlse_cuda_check(cudaMemcpyAsync(ext + (ni + 2) * plane,
                                             D->hrecv + (ni + 2) * plane, 2 * plane,
                                             cudaMemcpyHostToDevice, s->stream), "cudaMemcpy");
    return st;
}

/* The ext rows around the state <- the last two x rows of the rank below
 * and the first two of the rank above (read from the neighbours' states
 * while no rank writes its own). */
static int halo_rows(nlse_dipolar *s, int st)
{
    dipolar_dist *D = s->dist;
    const size_t plane = state_plane(s), ni = s->L.n[0];
    char *ext = ext_of(s, plane);
    if ((st = dist_sync(s, st)))
        return st;
    const int r = D->rank;
    if (D->staged)
        return dist_sync(s, halo_staged(s, plane));
    if (r > 0)
        st = nlse_cuda_check(
            cudaMemcpyAsync(ext, (const char *)D->peer[D->size + r - 1] + (D->xc[r - 1] - 2) * plane,
                            2 * plane, cudaMemcpyDefault, s->stream), "cudaMemcpy");
    if (!st && r < D->size - 1)
        st = nlse_cuda_check(cudaMemcpyAsync(ext + (ni + 2) * plane,
                                             D->peer[D->size + r + 1], 2 * plane,
                                             cudaMemcpyDefault, s->stream), "cudaMemcpy");
    return dist_sync(s, st); /* read before any rank writes its state again */
}

template <typename T> static int observe_t(nlse_dipolar *s, double t, nlse_dipolar_obs *o)
{
    dipolar_dist *D = s->dist;
    const int use_dd = s->have_plans && s->gdd != 0;
    if (use_dd)
        CKS(of_state_t<T>(s)); /* collective: every rank returns together */
    int st = dipolar_obstacle_at(s, t);
    CKS(halo_rows(s, st));
    double Tq[OQ_N + 2];
    st = dipolar_observe_sums<T>(s, t, ext_of(s, state_plane(s)), 2, Tq);
    /* |Psi|^2 at the grid's centre: from the rank that holds its row */
    const size_t ic = D->n0 / 2;
    Tq[OQ_N] = 0;
    if (!st && ic >= s->row0 && ic < s->row0 + s->L.n[0]) {
        const size_t mc = (((ic - s->row0) * D->n1) + D->n1 / 2) * D->n2 + D->n2 / 2;
        T v[2] = {0, 0};
        st = nlse_cuda_check(cudaMemcpyAsync(v, (const char *)s->psi + mc * (s->is_real ? 1 : 2) *
                                                                          s->rs,
                                             (s->is_real ? 1 : 2) * s->rs, cudaMemcpyDeviceToHost,
                                             s->stream), "cudaMemcpy");
        if (!st)
            st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
        Tq[OQ_N] = (double)v[0] * v[0] + (double)v[1] * v[1];
    }
    CKS(rank_sum_st(s, Tq, OQ_N + 1, st));
    dipolar_observe_finish(s, Tq, use_dd, o);
    o->psi0sq = Tq[OQ_N];
    return NLSE_OK;
}

static int dipolar_dist_observe(nlse_dipolar *s, double t, nlse_dipolar_obs *out)
{
    CKS(begin(s, NLSE_OK, 0));
    return s->p.dtype == NLSE_COMPLEX64 ? observe_t<float>(s, t, out)
                                        : observe_t<double>(s, t, out);
}

/* ------------------------------------------------------------------ */
/* create, connect, free                                              */
/* ------------------------------------------------------------------ */

static void dipolar_dist_free(nlse_dipolar *s)
{
    dipolar_dist *D = s->dist;
    if (!D)
        return;
    if (D->plans >= 1) {
        cufftDestroy(D->f2);
        cufftDestroy(D->b2);
    }
    if (D->plans >= 2)
        cufftDestroy(D->fx);
    for (int q = 0; q < D->npf; ++q)
        cufftDestroy(D->pf[q]);
    for (int q = 0; q < D->npx; ++q)
        cufftDestroy(D->px[q]);
    if (D->have_events) {
        for (int r = 0; r < D->size; ++r) {
            cudaStreamDestroy(D->cs[r]);
            cudaEventDestroy(D->done[r]);
        }
        cudaEventDestroy(D->ready);
    }
    s->have_plans = 0; /* the solver's own plans were never made */
    if (D->ext && (char *)s->psi > (char *)D->ext &&
        (char *)s->psi < (char *)D->ext + D->ext_bytes)
        s->psi = NULL; /* not an allocation of its own */
    void *dev[] = {D->pen, D->kern, D->ext, D->ends, D->drecv, D->hrow, D->spk, D->pwork};
    nlse_cuda_free_all(dev, sizeof dev / sizeof dev[0]);
    void *pinned[] = {D->hsend, D->hrecv, D->hends_s, D->hends_r};
    for (size_t q = 0; q < sizeof pinned / sizeof pinned[0]; ++q)
        cudaFreeHost(pinned[q]);
    void *host[] = {D->cs, D->done, D->cnt, D->hspk, D->xc, D->peer, D->sm_copy, D};
    nlse_free_all(host, sizeof host / sizeof host[0]);
    s->dist = NULL;
}

static const dipolar_dist_ops DIST_OPS = {dipolar_dist_free, dipolar_dist_enable, dipolar_dist_step,
                                          dipolar_dist_observe, dipolar_dist_of_state};

/* Move the state into D->ext, two complex rows from its start, so that the
 * neighbours' rows land around it and the x solve and the observables read
 * one array without copying the slab. */
static int state_in_ext(nlse_dipolar *s)
{
    dipolar_dist *D = s->dist;
    const size_t cplane = D->n1 * D->n2 * 2 * s->rs, ni = s->L.n[0];
    D->ext_bytes = (ni + 4) * cplane;
    CKS(dmalloc(s, &D->ext, D->ext_bytes, "the state with its halo rows"));
    CK(cudaMemsetAsync(D->ext, 0, D->ext_bytes, s->stream));
    CK(cudaMemcpyAsync((char *)D->ext + 2 * cplane, s->psi, ni * cplane, cudaMemcpyDeviceToDevice,
                       s->stream));
    CK(cudaStreamSynchronize(s->stream));
    cudaFree(s->psi);
    s->dev_bytes -= ni * cplane; /* the state's own allocation, now given back */
    s->psi = (char *)D->ext + 2 * cplane;
    return NLSE_OK;
}

static int make_dist(nlse_dipolar *s, int rank, int size, const size_t *xc, const size_t *yc,
                     const nlse_comm *comm)
{
    dipolar_dist *D = (dipolar_dist *)calloc(1, sizeof *D);
    if (!D)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    s->dist = D;
    s->dops = &DIST_OPS;
    dipolar_tuning_read(&D->tune);
    D->rank = rank;
    D->size = size;
    D->comm = comm;
    D->n0 = s->n0_all;
    D->n1 = s->L.n[1];
    D->n2 = s->L.n[2];
    D->nh = D->n2 / 2 + 1;
    D->xc = (size_t *)calloc(4 * (size_t)size, sizeof(size_t));
    D->sm_copy = (unsigned char *)calloc((size_t)size, 1);
    D->peer = (void **)calloc(NLSE_DIPOLAR_SLAB_BUFFERS * (size_t)size, sizeof(void *));
    if (!D->xc || !D->peer || !D->sm_copy)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    dipolar_slab_layout(D->xc, size, xc, yc);
    D->xs = D->xc + size;
    D->yc = D->xs + size;
    D->ys = D->yc + size;
    D->nj = yc[rank];
    D->j0 = D->ys[rank];
    D->cs = (cudaStream_t *)calloc((size_t)size, sizeof(cudaStream_t));
    D->done = (cudaEvent_t *)calloc((size_t)size, sizeof(cudaEvent_t));
    if (!D->cs || !D->done)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    CK(cudaEventCreateWithFlags(&D->ready, cudaEventDisableTiming));
    D->have_events = 1;
    for (int r = 0; r < size; ++r) {
        CK(cudaStreamCreateWithFlags(&D->cs[r], cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&D->done[r], cudaEventDisableTiming));
    }
    D->pen_bytes = (size > 1 && D->nj ? 2 * D->n0 * D->nj * D->n2 : 1) * s->rs; /* one rank: in place */
    CKS(dmalloc(s, &D->pen, D->pen_bytes, "the x pencils"));
    D->xsolve = -1;
    D->spike_mode = -1;
    D->ends_bytes = 4 * D->n1 * D->n2 * sizeof(double);
    CKS(dmalloc(s, &D->ends, D->ends_bytes, "the lines' end values"));
    CKS(state_in_ext(s));
    D->dens_bytes = s->L.n[0] * D->n1 * s->nlp * s->rs;
    CKS(dmalloc(s, &s->dens, D->dens_bytes, "the density / FFT buffer"));
    CK(cudaMemsetAsync(s->dens, 0, D->dens_bytes, s->stream));
    CKS(dipolar_ensure_backup(s));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

extern "C" int nlse_dipolar_slab_create(const nlse_dipolar_params *p, int rank, int size,
                                        const size_t *xcount, const size_t *ycount,
                                        const nlse_comm *comm, nlse_dipolar **out)
{
    if (!p || !xcount || !ycount || !comm || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_slab_create: NULL argument");
    *out = NULL;
    CKS(dipolar_check_params(p));
    CKS(dipolar_check_slab(p, rank, size, xcount, ycount));
    if (p->dipolar)
        CKS(dipolar_check_dipolar(p));
    nlse_dipolar_params q = *p;
    q.dipolar = 0; /* the slab's dipolar term is dipolar_dist_enable's */
    q.gdd = 0;
    size_t row0 = 0;
    for (int r = 0; r < rank; ++r)
        row0 += xcount[r];
    nlse_dipolar *s = NULL;
    CKS(dipolar_create_rows(&q, row0, xcount[rank], &s));
    s->gdd = p->gdd;
    s->p.gdd = p->gdd;
    int st = make_dist(s, rank, size, xcount, ycount, comm);
    if (!st && p->dipolar)
        st = dipolar_dist_enable(s);
    if (st) {
        nlse_dipolar_destroy(s);
        return st;
    }
    *out = s;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_slab_buffers(const nlse_dipolar *s, void *out[NLSE_DIPOLAR_SLAB_BUFFERS])
{
    if (!s || !s->dist || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_slab_buffers: not a slab");
    out[0] = s->dist->pen;
    out[1] = s->dist->ext; /* the allocation of the state (IPC maps whole ones) */
    out[2] = s->dens;
    out[3] = s->dist->ends;
    return NLSE_OK;
}

/* Which ranks' transposes the SMs copy (k_copy2d): where other ranks
 * share this GPU, the blocks for them and for this rank itself; the rest
 * go by the copy engines.  With ranks sharing a GPU the SMs move the half
 * spectrum's transposes faster than the copy engines; between GPUs the
 * engines are the faster, for the blocks over NVLink and for the own
 * block too (bench/RESULTS.md, dipolar section).  NLSEPY_DIPOLAR_COPY
 * (D->tune) =engines or =kernel takes one path for every rank. */
static void copy_paths(dipolar_dist *D)
{
    const int all_ce = D->tune.copy == DIPOLAR_COPY_ENGINES;
    const int all_sm = D->tune.copy == DIPOLAR_COPY_KERNEL;
    int dev = -1, shared = 0;
    if (cudaGetDevice(&dev) != cudaSuccess)
        dev = -1;
    for (int r = 0; r < D->size; ++r) {
        cudaPointerAttributes a;
        D->sm_copy[r] = dev >= 0 && cudaPointerGetAttributes(&a, D->peer[r]) == cudaSuccess &&
                        a.type == cudaMemoryTypeDevice && a.device == dev;
        shared |= r != D->rank && D->sm_copy[r];
    }
    (void)cudaGetLastError();
    for (int r = 0; r < D->size; ++r)
        D->sm_copy[r] = (unsigned char)(all_sm || (!all_ce && shared && D->sm_copy[r]));
}

extern "C" int nlse_dipolar_slab_connect(nlse_dipolar *s, void *const *peers)
{
    if (!s || !s->dist || !peers)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_slab_connect: not a slab");
    dipolar_dist *D = s->dist;
    for (int b = 0; b < NLSE_DIPOLAR_SLAB_BUFFERS; ++b)
        for (int r = 0; r < D->size; ++r)
            if (!peers[b * D->size + r])
                return nlse_fail(NLSE_ERR_VALUE, "buffer %d of rank %d is missing", b, r);
    memcpy(D->peer, peers, NLSE_DIPOLAR_SLAB_BUFFERS * (size_t)D->size * sizeof(void *));
    for (int r = 0; r < D->size; ++r) /* every state lies two complex rows into its ext */
        D->peer[D->size + r] = (char *)D->peer[D->size + r] + 2 * D->n1 * D->n2 * 2 * s->rs;
    copy_paths(D);
    D->connected = 1;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_slab_stage(nlse_dipolar *s)
{
    if (!s || !s->dist)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_slab_stage: not a slab");
    ON_DEVICE(s);
    dipolar_dist *D = s->dist;
    const size_t ni = s->L.n[0], plane = D->n1 * D->n2 * 2 * s->rs;
    size_t a = ni * plane, b = D->n0 * D->nj * D->n2 * 2 * s->rs;
    size_t bytes = (a > b ? a : b) + 4 * plane; /* and the observables' halo rows */
    D->cnt = (size_t *)calloc(4 * (size_t)D->size, sizeof(size_t));
    if (!D->cnt)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    if (cudaHostAlloc((void **)&D->hsend, bytes, cudaHostAllocDefault) != cudaSuccess ||
        cudaHostAlloc((void **)&D->hrecv, bytes, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        return nlse_fail(NLSE_ERR_NOMEM, "out of pinned host memory for the staging buffers "
                         "(2 x %zu bytes)", bytes);
    }
    D->staged = 1;
    D->connected = 1;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_slab_timings(const nlse_dipolar *s, double out[5])
{
    if (!s || !s->dist || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_slab_timings: not a slab");
    memcpy(out, s->dist->tm, 5 * sizeof(double));
    return NLSE_OK;
}
