/*
 * magnet.cu -- CUDA backend of the magnet-design Laplace solver
 * (Madhubhashini, thesis, chapters 2 and 4), same C API as csrc/magnet/magnet.c.
 *
 * Phi lives on the device in the colour-reordered layout of section 4.5
 * (red and black nodes of each row apart, a halo row and slot around them):
 * a red-black SOR half-sweep reads one colour's array and the other's
 * neighbours with unit stride.  One RBSOR iteration (Algorithm 2) is two
 * half-sweep kernels, each adding its block's squared residuals to a
 * partial, and a one-block kernel that sums them in a fixed order, records
 * ||r|| / ||f|| (eq. 2.50) and, once below tol, a "done" word that makes the
 * rest of the batch's kernels return at once; the host reads that word once
 * per batch of iterations, so the state is exactly that of the iteration
 * that met the tolerance.
 *
 * Multigrid: the same V(2,2) cycle as the CPU (magnet_mg.c) with the
 * hierarchy of magnet_hier.c built on the host and copied once: red-black
 * Gauss-Seidel on the fine grid (the RBSOR kernel with omega = 1), 9-point
 * Galerkin operators on the coarse levels smoothed in four colours
 * ((I mod 2, J mod 2): the nodes of a colour are independent for 9-point
 * stencils), and the coarsest level solved by a dense inverse computed on
 * the host.  Coarse levels are double precision.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.cuh"
#include "common/reduce.cuh"
#include "magnet/magnet_galerkin.h"

#define MAGNET_BLK 256
#define MAGNET_NB 1024 /* blocks of the reducing kernels (fixed: deterministic sums) */

struct magnet_dlevel {
    int nr, nz;
    double *A, *b, *e, *r;
    unsigned char *mask;
};

struct nlse_magnet {
    nlse_magnet_params p;
    magnet_geom g;
    magnet_row *rows_h, *rows_d;
    size_t hw;
    void *P[2], *Q[2];
    double fnorm;
    int dirichlet;
    cudaStream_t stream;
    cudaEvent_t ev0, ev1;
    double last_seconds;
    double *part, *hist;
    int *flags; /* [0] done iteration (-1: not yet), [1] diverged iteration */
    /* multigrid */
    int nlev, built_dirichlet;
    magnet_dlevel *lev;            /* 1..nlev; lev[0]: the fine level as an explicit operator (mg-cg) */
    double *kv;                /* mg-cg: 8 Krylov vectors of nr * nz (x r rh p v y z t) */
    void *kb[2];               /* mg-cg: Phi by colour when its iteration began */
    int kopen;                 /* mg-cg iteration: 0 none, 1 in progress, 2 ended by a breakdown */
    double krho, kalpha, komega, krel; /* its scalars between calls, last ||r|| / ||f|| */
    double *r0, *e0;
    unsigned char *mask0;
    int m;                     /* coarsest unknowns */
    int *nodes;                /* their node indices */
    double *inv;               /* m x m inverse */
    int device;                /* the GPU the solver lives on (ON_DEVICE) */
};

/* ------------------------------------------------------------------ */
/* fine level: colour-reordered Phi                                   */
/* ------------------------------------------------------------------ */

struct LPArgs {
    int nr, nz, j1, kw; /* kw: slots 1..kw per row and colour hold nodes */
    size_t hw;
    double gamma, cap;
};

template <typename T>
__device__ __forceinline__ T &at(T *P0, T *P1, size_t hw, int i, int j)
{
    T *P = ((i + j) & 1) ? P1 : P0;
    return P[(size_t)(i + 1) * hw + ((j + 2) >> 1)];
}

/* f - A Phi at unknown (i, j) of row R (Table 2.1, eq. 2.38 scaling) */
template <typename T>
__device__ __forceinline__ double res_at(const magnet_row &R, const LPArgs &a, T *P0, T *P1, int i, int j)
{
    const T ca = (T)(j < R.split ? R.a1 : R.a2), cb = (T)(j < R.split ? R.b1 : R.b2);
    T cc = (T)a.gamma, cd = (T)a.gamma, f = 0;
    if (j == R.jcap) {
        cc = (T)(2.0 * a.gamma);
        cd = 0;
        f = (T)a.cap;
    } else if (j == a.j1) {
        cc = 0;
        cd = (T)(2.0 * a.gamma);
    }
    const T r = f - (ca * at(P0, P1, a.hw, i + 1, j) + cb * at(P0, P1, a.hw, i - 1, j) +
                     cc * at(P0, P1, a.hw, i, j + 1) + cd * at(P0, P1, a.hw, i, j - 1) +
                     (T)R.e * at(P0, P1, a.hw, i, j));
    return (double)r;
}

/* One colour of red-black SOR (Algorithm 2); RES: partial sums of r^2.
 * Grid: blockIdx.x tiles a row's slots, blockIdx.y strides over rows, so a
 * block reads its row's descriptor once and no thread divides.  In the
 * colour-reordered layout node (i, j) of slot k has its (i +- 1, j)
 * neighbours in slot k of the other colour's rows i +- 1, and (i, j +- 1) in
 * slots k - 1 + p and k + p of row i, p = (colour + i) & 1. */
template <typename T, bool RES>
__global__ void __launch_bounds__(MAGNET_BLK) k_rb(T *P0, T *P1, const magnet_row *rows, LPArgs a, int colour,
                                               T omega, double *part, const int *flags)
{
    __shared__ double sh[MAGNET_BLK / 32];
    if (flags && flags[0] >= 0)
        return;
    T *__restrict__ own = colour ? P1 : P0;
    const T *__restrict__ oth = colour ? P0 : P1;
    const T gam = (T)a.gamma, cap = (T)a.cap;
    const int k = blockIdx.x * blockDim.x + threadIdx.x + 1;
    double ss = 0;
    for (int i = blockIdx.y; i < a.nr; i += gridDim.y) {
        const int p = (colour + i) & 1, j = 2 * k - 2 + p;
        const magnet_row R = rows[i];
        if (k > a.kw || j < R.js || j > R.je)
            continue;
        const size_t o = (size_t)(i + 1) * a.hw + k;
        const T ca = (T)(j < R.split ? R.a1 : R.a2), cb = (T)(j < R.split ? R.b1 : R.b2);
        T cc = gam, cd = gam, f = 0;
        if (j == R.jcap) {
            cc = 2 * gam;
            cd = 0;
            f = cap;
        } else if (j == a.j1) {
            cc = 0;
            cd = 2 * gam;
        }
        const T e = (T)R.e, x = own[o];
        const T r = f - (ca * oth[o + a.hw] + cb * oth[o - a.hw] + cc * oth[o + p] + cd * oth[o - 1 + p] +
                         e * x);
        own[o] = x + r * (omega / e);
        if (RES)
            ss += (double)r * (double)r;
    }
    if (RES) {
        const double t = nlse_block_sum(ss, sh);
        if (threadIdx.x == 0)
            part[colour * gridDim.x * gridDim.y + blockIdx.y * gridDim.x + blockIdx.x] = t;
    }
}

/* Gauss-Seidel / SOR in row order (eqs. 2.42, 2.56): node (i, j) needs the
 * new (i - 1, j) and (i, j - 1) and the old (i + 1, j) and (i, j + 1), so the
 * anti-diagonal i + j = d can be updated at once after d - 1: sweeping d = 0,
 * 1, .. reproduces the row order exactly.  One block per diagonal; its
 * squared residuals are added to acc[0] by one thread, kernel after kernel
 * in stream order (a fixed order: deterministic). */
template <typename T>
__global__ void __launch_bounds__(1024) k_diag(T *P0, T *P1, const magnet_row *rows, LPArgs a, int d, T omega,
                                               double *acc, const int *flags)
{
    __shared__ double sh[32];
    if (flags[0] >= 0)
        return;
    const int i0 = d - (a.nz - 1) > 0 ? d - (a.nz - 1) : 0, i1 = d < a.nr - 1 ? d : a.nr - 1;
    double ss = 0;
    for (int i = i0 + (int)threadIdx.x; i <= i1; i += blockDim.x) {
        const int j = d - i;
        const magnet_row R = rows[i];
        if (j < R.js || j > R.je)
            continue;
        const double r = res_at(R, a, P0, P1, i, j);
        at(P0, P1, a.hw, i, j) += (T)r * (omega / (T)R.e);
        ss += r * r;
    }
    const double t = nlse_block_sum(ss, sh);
    if (threadIdx.x == 0)
        acc[0] += t;
}

/* Jacobi (eq. 2.39): Q = P + r / e at every unknown, both colours. */
template <typename T>
__global__ void __launch_bounds__(MAGNET_BLK) k_jacobi(T *P0, T *P1, T *Q0, T *Q1, const magnet_row *rows,
                                                   LPArgs a, double *part)
{
    __shared__ double sh[MAGNET_BLK / 32];
    double ss = 0;
    const long long n = 2LL * a.nr * a.kw;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        const int colour = (int)(q / ((long long)a.nr * a.kw));
        const long long qq = q % ((long long)a.nr * a.kw);
        const int i = (int)(qq / a.kw), k = (int)(qq % a.kw) + 1;
        const int j = 2 * k - 2 + ((colour + i) & 1);
        const magnet_row R = rows[i];
        if (j < R.js || j > R.je)
            continue;
        const double r = res_at(R, a, P0, P1, i, j);
        const size_t o = (size_t)(i + 1) * a.hw + k;
        (colour ? Q1 : Q0)[o] = (colour ? P1 : P0)[o] + (T)r / (T)R.e;
        ss += r * r;
    }
    const double t = nlse_block_sum(ss, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = t;
}

/* hist[it] = sqrt(sum part) / fn; the first iteration below tol into flags[0] */
__global__ void k_final(const double *part, int n, double fn, double tol, double *hist, int it,
                        int *flags)
{
    __shared__ double sh[8];
    if (flags[0] >= 0)
        return;
    const double t = nlse_parts_sum(part, (size_t)n, sh);
    if (threadIdx.x == 0) {
        const double rel = sqrt(t) / fn;
        hist[it] = rel;
        if (!isfinite(rel)) {
            flags[1] = it;
            flags[0] = it;
        } else if (rel < tol) {
            flags[0] = it;
        }
    }
}

/* fine residual into the natural layout (double), 0 off the unknowns */
template <typename T>
__global__ void k_fine_res(T *P0, T *P1, const magnet_row *rows, LPArgs a, double *r)
{
    const long long n = (long long)a.nr * a.nz;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        const int i = (int)(q / a.nz), j = (int)(q % a.nz);
        const magnet_row R = rows[i];
        r[q] = (j >= R.js && j <= R.je) ? res_at(R, a, P0, P1, i, j) : 0.0;
    }
}

template <typename T>
__global__ void k_fine_correct(T *P0, T *P1, const magnet_row *rows, LPArgs a, const double *e)
{
    const long long n = (long long)a.nr * a.nz;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        const int i = (int)(q / a.nz), j = (int)(q % a.nz);
        const magnet_row R = rows[i];
        if (j >= R.js && j <= R.je)
            at(P0, P1, a.hw, i, j) += (T)e[q];
    }
}

/* ------------------------------------------------------------------ */
/* coarse levels (natural layout, double)                             */
/* ------------------------------------------------------------------ */

__global__ void k_restrict(const double *rf, int nrf, int nzf, double *bc, const unsigned char *maskc,
                           int nrc, int nzc)
{
    const long long n = (long long)nrc * nzc;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        const int I = (int)(q / nzc), J = (int)(q % nzc);
        double v = 0.0;
        if (maskc[q])
            for (int fi = 2 * I - 1; fi <= 2 * I + 1; ++fi) {
                if (fi < 0 || fi >= nrf)
                    continue;
                const double wi = fi == 2 * I ? 1.0 : 0.5;
                for (int fj = 2 * J - 1; fj <= 2 * J + 1; ++fj)
                    if (fj >= 0 && fj < nzf)
                        v += wi * (fj == 2 * J ? 1.0 : 0.5) * rf[(size_t)fi * nzf + fj];
            }
        bc[q] = v;
    }
}

__global__ void k_prolong(const double *ec, int nrc, int nzc, double *ef, const unsigned char *maskf,
                          int nrf, int nzf, int add)
{
    const long long n = (long long)nrf * nzf;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        const int i = (int)(q / nzf), j = (int)(q % nzf);
        double v = 0.0;
        if (maskf[q]) {
            const int i0 = i / 2, i1 = (i + 1) / 2, j0 = j / 2, j1 = (j + 1) / 2;
            const double w = (i % 2 ? 0.5 : 1.0) * (j % 2 ? 0.5 : 1.0);
            v = w * ec[(size_t)i0 * nzc + j0];
            if (i1 != i0)
                v += w * ec[(size_t)i1 * nzc + j0];
            if (j1 != j0)
                v += w * ec[(size_t)i0 * nzc + j1];
            if (i1 != i0 && j1 != j0)
                v += w * ec[(size_t)i1 * nzc + j1];
        }
        ef[q] = add ? ef[q] + v : v;
    }
}

/* Gauss-Seidel on the nodes of colour (ci, cj) = (I mod 2, J mod 2) */
__global__ void k_gs4(const double *A, const unsigned char *mask, const double *b, double *e, int nr,
                      int nz, int ci, int cj)
{
    const int hr = (nr - ci + 1) / 2, hz = (nz - cj + 1) / 2;
    const long long n = (long long)hr * hz;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        const int I = 2 * (int)(q / hz) + ci, J = 2 * (int)(q % hz) + cj;
        const size_t o = (size_t)I * nz + J;
        if (!mask[o])
            continue;
        const double *row = A + 9 * o;
        double s = b[o];
        for (int p = -1; p <= 1; ++p)
            for (int r = -1; r <= 1; ++r) {
                const double c = row[3 * (p + 1) + (r + 1)];
                if ((p || r) && c != 0.0)
                    s -= c * e[o + (ptrdiff_t)p * nz + r];
            }
        e[o] = s / row[4];
    }
}

__global__ void k_res9(const double *A, const unsigned char *mask, const double *b, const double *e,
                       double *r, int nr, int nz)
{
    const long long n = (long long)nr * nz;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        double v = 0.0;
        if (mask[q]) {
            const double *row = A + 9 * q;
            v = b[q];
            const int nzz = nz;
            for (int p = -1; p <= 1; ++p)
                for (int s = -1; s <= 1; ++s) {
                    const double c = row[3 * (p + 1) + (s + 1)];
                    if (c != 0.0)
                        v -= c * e[q + (long long)p * nzz + s];
                }
        }
        r[q] = v;
    }
}

/* e = inv b on the coarsest unknowns */
__global__ void k_coarsest(const double *inv, const int *nodes, int m, const double *b, double *e)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < m; k += gridDim.x * blockDim.x) {
        double v = 0.0;
        for (int j = 0; j < m; ++j)
            v += inv[(size_t)k * m + j] * b[nodes[j]];
        e[nodes[k]] = v;
    }
}

/* the hierarchy, built on the device with the host's arithmetic (magnet_galerkin.h) */
__global__ void k_fine_mask(const magnet_row *rows, int nr, int nz, unsigned char *mask)
{
    const long long n = (long long)nr * nz;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        const int i = (int)(q / nz), j = (int)(q % nz);
        mask[q] = j >= rows[i].js && j <= rows[i].je;
    }
}

__global__ void k_galerkin(magnet_view f, int cnr, int cnz, double *A, unsigned char *mask)
{
    const long long n = (long long)cnr * cnz;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        double row[9];
        magnet_galerkin_row(&f, (int)(q / cnz), (int)(q % cnz), row);
        for (int k = 0; k < 9; ++k)
            A[9 * q + k] = row[k];
        mask[q] = row[4] != 0.0;
    }
}

/* mg-cg: the fine rows of Table 2.1 as 9-point stencils (lev[0]) */
__global__ void k_fine_explicit(const magnet_row *rows, int nr, int nz, double gamma, int j1, double *A)
{
    const long long n = (long long)nr * nz;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        const int i = (int)(q / nz), j = (int)(q % nz);
        double c[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
        if (j >= rows[i].js && j <= rows[i].je)
            magnet_stencil_of(gamma, j1, &rows[i], j, c);
        for (int k = 0; k < 9; ++k)
            A[9 * q + k] = c[k];
    }
}

/* out = A in with 9-point rows, 0 off the mask */
__global__ void k_matvec9(const double *A, const unsigned char *mask, const double *in, double *out, int nr,
                          int nz)
{
    const long long n = (long long)nr * nz;
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        double v = 0.0;
        if (mask[q]) {
            const double *row = A + 9 * q;
            for (int p = -1; p <= 1; ++p)
                for (int c = -1; c <= 1; ++c) {
                    const double a = row[3 * (p + 1) + (c + 1)];
                    if (a != 0.0)
                        v += a * in[q + (long long)p * nz + c];
                }
        }
        out[q] = v;
    }
}

/* part[block] = sum a b over the block's share (fixed order: deterministic) */
__global__ void k_dot(const double *a, const double *b, long long n, double *part)
{
    __shared__ double sh[MAGNET_BLK / 32];
    double v = 0;
    for (long long q = grid_first(); q < n; q += grid_stride())
        v += a[q] * b[q];
    const double t = nlse_block_sum(v, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = t;
}

/* the BiCGSTAB updates: p = r + beta (p - omega v); x += a y, r -= a v */
__global__ void k_bicg_p(double *p, const double *r, const double *v, double beta, double omega, long long n)
{
    for (long long q = grid_first(); q < n; q += grid_stride())
        p[q] = r[q] + beta * (p[q] - omega * v[q]);
}

__global__ void k_bicg_xr(double *x, double *r, const double *y, const double *v, double a, long long n)
{
    for (long long q = grid_first(); q < n; q += grid_stride()) {
        x[q] += a * y[q];
        r[q] -= a * v[q];
    }
}

/* ------------------------------------------------------------------ */
/* host side                                                          */
/* ------------------------------------------------------------------ */

static int blocks_for(long long n)
{
    long long b = (n + MAGNET_BLK - 1) / MAGNET_BLK;
    return (int)(b < 1 ? 1 : b > MAGNET_NB ? MAGNET_NB : b);
}

/* k_rb's grid: the slots of a row in x, rows strided in y, about MAGNET_RB_BLOCKS blocks */
#define MAGNET_RB_BLOCKS 2048
static dim3 rb_grid(const nlse_magnet *s)
{
    const int kw = (int)s->hw - 1, nx = (kw + MAGNET_BLK - 1) / MAGNET_BLK;
    int ny = MAGNET_RB_BLOCKS / nx;
    ny = ny < 1 ? 1 : ny > (int)s->g.nr ? (int)s->g.nr : ny;
    return dim3((unsigned)nx, (unsigned)ny, 1);
}

static LPArgs args_of(const nlse_magnet *s)
{
    LPArgs a;
    a.nr = (int)s->g.nr;
    a.nz = (int)s->g.nz;
    a.j1 = s->g.j1;
    a.kw = (int)s->hw - 1; /* j = nz - 1 sits in slot (nz + 1) / 2 = hw - 1 when nz is odd */
    a.hw = s->hw;
    a.gamma = s->g.gamma;
    a.cap = s->g.cap;
    return a;
}

static size_t rsize(const nlse_magnet *s) { return s->p.dtype == NLSE_COMPLEX64 ? 4 : 8; }

/* cudaMalloc, or NLSE_ERR_BACKEND naming `what` and the free memory */
static int dalloc(void **p, size_t bytes, const char *what) { return nlse_cuda_alloc(p, bytes, what); }

static void mg_free(nlse_magnet *s)
{
    if (s->lev)
        for (int l = 0; l <= s->nlev; ++l) {
            void *lev[] = {s->lev[l].A, s->lev[l].b, s->lev[l].e, s->lev[l].r, s->lev[l].mask};
            nlse_cuda_free_all(lev, sizeof lev / sizeof lev[0]);
        }
    free(s->lev);
    void *bufs[] = {s->r0, s->e0, s->mask0, s->kv, s->kb[0], s->kb[1], s->nodes, s->inv};
    nlse_cuda_free_all(bufs, sizeof bufs / sizeof bufs[0]);
    s->kv = NULL;
    s->kb[0] = s->kb[1] = NULL;
    s->kopen = 0;
    s->lev = NULL;
    s->r0 = s->e0 = s->inv = NULL;
    s->mask0 = NULL;
    s->nodes = NULL;
    s->nlev = 0;
}

extern "C" void nlse_magnet_destroy(nlse_magnet *s)
{
    ON_DEVICE_VOID(s);
    if (!s)
        return;
    nlse_cuda_wait(s->stream);
    mg_free(s);
    void *bufs[] = {s->P[0], s->Q[0], s->P[1], s->Q[1], s->rows_d, s->part, s->hist, s->flags};
    nlse_cuda_free_all(bufs, sizeof bufs / sizeof bufs[0]);
    const cudaEvent_t ev[] = {s->ev0, s->ev1};
    nlse_cuda_drop_stream(s->stream, ev, 2);
    free(s->rows_h);
    free(s);
}

static int upload_rows(nlse_magnet *s)
{
    CK(cudaMemcpyAsync(s->rows_d, s->rows_h, s->g.nr * sizeof(magnet_row), cudaMemcpyHostToDevice,
                       s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

static int create(const nlse_magnet_params *p, nlse_magnet *s)
{
    s->p = *p;
    magnet_make_geom(p, &s->g);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        return nlse_fail(NLSE_ERR_BACKEND, "no CUDA device available");
    }
    CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&s->ev0));
    CK(cudaEventCreate(&s->ev1));
    s->hw = s->g.nz / 2 + 2;
    const size_t n = (s->g.nr + 2) * s->hw;
    for (int c = 0; c < 2; ++c) {
        CKS(dalloc(&s->P[c], n * rsize(s), "Phi"));
        CK(cudaMemsetAsync(s->P[c], 0, n * rsize(s), s->stream));
    }
    s->rows_h = (magnet_row *)malloc(s->g.nr * sizeof(magnet_row));
    if (!s->rows_h)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    magnet_make_rows(&s->g, s->rows_h);
    CKS(dalloc((void **)&s->rows_d, s->g.nr * sizeof(magnet_row), "row table"));
    { /* the reducing kernels' partials: MAGNET_NB, or k_rb's grid per colour */
        const dim3 g = rb_grid(s);
        const size_t np = g.x * g.y > MAGNET_NB ? g.x * g.y : MAGNET_NB;
        CKS(dalloc((void **)&s->part, 2 * np * sizeof(double), "partial sums"));
    }
    CKS(dalloc((void **)&s->flags, 2 * sizeof(int), "flags"));
    CKS(upload_rows(s));
    s->fnorm = s->g.fnorm;
    return NLSE_OK;
}

extern "C" int nlse_magnet_create(const nlse_magnet_params *p, nlse_magnet **out)
{
    CKS(magnet_check_create(p, out));
    nlse_magnet *s = (nlse_magnet *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    s->device = nlse_cuda_current_device();
    int st = create(p, s);
    if (st) {
        nlse_magnet_destroy(s);
        return st;
    }
    *out = s;
    return NLSE_OK;
}

extern "C" void nlse_magnet_shape(const nlse_magnet *s, size_t *nr, size_t *nz)
{
    *nr = s->g.nr;
    *nz = s->g.nz;
}

/* Both colour arrays to (to_host) or from a host buffer of 2 n REALs. */
static int stage(const nlse_magnet *s, char *h, int to_host)
{
    const size_t n = (s->g.nr + 2) * s->hw, rs = rsize(s);
    for (int c = 0; c < 2; ++c)
        CK(cudaMemcpyAsync(to_host ? (void *)(h + c * n * rs) : s->P[c],
                           to_host ? s->P[c] : (const void *)(h + c * n * rs), n * rs,
                           to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

/* offset of node (i, j) in the staged buffer */
static size_t staged(const nlse_magnet *s, int i, int j)
{
    const size_t n = (s->g.nr + 2) * s->hw;
    return ((i + j) & 1) * n + (size_t)(i + 1) * s->hw + (size_t)((j + 2) >> 1);
}

/* A new host buffer of both colour arrays, copied from the device (stage);
 * NULL with the status in *st when out of memory or the copy failed. */
static char *fetch_colours(const nlse_magnet *s, int *st)
{
    char *h = (char *)malloc(2 * (s->g.nr + 2) * s->hw * rsize(s));
    *st = h ? stage(s, h, 1) : nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    if (*st) {
        free(h);
        return NULL;
    }
    return h;
}

/* the colour arrays -> a host natural-layout double grid */
static int download(const nlse_magnet *s, double *out)
{
    const size_t rs = rsize(s);
    int st;
    char *h = fetch_colours(s, &st);
    for (int i = 0; h && i < (int)s->g.nr; ++i)
        for (int j = 0; j < (int)s->g.nz; ++j) {
            const size_t o = staged(s, i, j);
            out[(size_t)i * s->g.nz + j] = rs == 4 ? (double)((float *)h)[o] : ((double *)h)[o];
        }
    free(h);
    return st;
}

/* values (NULL: zeros) into the unknowns, or (all) every node outside the magnet */
static int upload_nodes(nlse_magnet *s, const double *in, int all)
{
    const size_t rs = rsize(s);
    int st;
    char *h = fetch_colours(s, &st);
    for (int i = 0; h && i < (int)s->g.nr; ++i)
        for (int j = 0; j < (int)s->g.nz; ++j) {
            const magnet_row *R = &s->rows_h[i];
            if ((i < s->g.i0 && j < s->g.j0) || (!all && (j < R->js || j > R->je)))
                continue;
            const size_t o = staged(s, i, j);
            const double v = in ? in[(size_t)i * s->g.nz + j] : 0.0;
            if (rs == 4)
                ((float *)h)[o] = (float)v;
            else
                ((double *)h)[o] = v;
        }
    if (!st)
        st = stage(s, h, 0);
    free(h);
    return st;
}

extern "C" int nlse_magnet_get_phi(const nlse_magnet *s, double *phi)
{
    ON_DEVICE(s);
    if (!s || !phi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_get_phi: NULL argument");
    CKS(download(s, phi));
    for (int i = 0; i < s->g.i0; ++i)
        for (int j = 0; j < s->g.j0; ++j)
            phi[(size_t)i * s->g.nz + j] = NAN;
    return NLSE_OK;
}

extern "C" int nlse_magnet_set_phi(nlse_magnet *s, const double *phi)
{
    ON_DEVICE(s);
    if (!s || !phi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_set_phi: NULL argument");
    for (int i = 0; i < (int)s->g.nr; ++i)
        for (int j = s->rows_h[i].js; j <= s->rows_h[i].je; ++j)
            if (!isfinite(phi[(size_t)i * s->g.nz + j]))
                return nlse_fail(NLSE_ERR_VALUE,
                                 "phi must be finite at the unknowns, got %g at node (%d, %d)",
                                 phi[(size_t)i * s->g.nz + j], i, j);
    s->kopen = 0;
    return upload_nodes(s, phi, 0);
}

extern "C" int nlse_magnet_restart(nlse_magnet *s)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_restart: NULL solver");
    s->kopen = 0;
    return NLSE_OK;
}

template <typename T> static double residual_t(const nlse_magnet *s_)
{
    nlse_magnet *s = (nlse_magnet *)s_;
    const LPArgs a = args_of(s);
    const size_t nn = s->g.nr * s->g.nz;
    double *r = NULL;
    if (dalloc((void **)&r, nn * sizeof(double), "a residual"))
        return NAN;
    k_fine_res<T><<<blocks_for((long long)nn), MAGNET_BLK, 0, s->stream>>>((T *)s->P[0], (T *)s->P[1],
                                                                        s->rows_d, a, r);
    double *h = (double *)malloc(nn * sizeof(double));
    double ss = NAN;
    if (h && cudaMemcpyAsync(h, r, nn * sizeof(double), cudaMemcpyDeviceToHost, s->stream) ==
                 cudaSuccess &&
        cudaStreamSynchronize(s->stream) == cudaSuccess) {
        ss = 0;
        for (size_t q = 0; q < nn; ++q)
            ss += h[q] * h[q];
    }
    free(h);
    cudaFree(r);
    return ss;
}

static double denom(const nlse_magnet *s) { return s->fnorm > 0 ? s->fnorm : 1.0; }

extern "C" double nlse_magnet_rel_residual(const nlse_magnet *s)
{
    ON_DEVICE_OR(s, NAN);
    const double ss = s->p.dtype == NLSE_COMPLEX64 ? residual_t<float>(s) : residual_t<double>(s);
    return sqrt(ss) / denom(s);
}

extern "C" int nlse_magnet_set_dirichlet(nlse_magnet *s, const double *values)
{
    ON_DEVICE(s);
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_set_dirichlet: NULL solver");
    s->kopen = 0;
    if (!values) {
        magnet_make_rows(&s->g, s->rows_h);
        CKS(upload_rows(s));
        s->fnorm = s->g.fnorm;
        s->dirichlet = 0;
        const size_t n = (s->g.nr + 2) * s->hw;
        for (int c = 0; c < 2; ++c)
            CK(cudaMemsetAsync(s->P[c], 0, n * rsize(s), s->stream));
        CK(cudaStreamSynchronize(s->stream));
        return NLSE_OK;
    }
    for (size_t q = 0; q < s->g.nr * s->g.nz; ++q) {
        const int i = (int)(q / s->g.nz), j = (int)(q % s->g.nz);
        if (!(i < s->g.i0 && j < s->g.j0) && !isfinite(values[q]))
            return nlse_fail(NLSE_ERR_VALUE, "boundary values must be finite, got %g at node (%d, %d)",
                             values[q], i, j);
    }
    magnet_make_rows_dirichlet(&s->g, s->rows_h);
    CKS(upload_rows(s));
    CKS(upload_nodes(s, values, 1));
    CKS(upload_nodes(s, NULL, 0)); /* unknowns restart at 0 */
    s->dirichlet = 1;
    const double ss = s->p.dtype == NLSE_COMPLEX64 ? residual_t<float>(s) : residual_t<double>(s);
    s->fnorm = sqrt(ss);
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* multigrid                                                          */
/* ------------------------------------------------------------------ */

/* inv = A^{-1} (m x m) through the shared LU */
static int invert(double *A, int m, double *inv)
{
    int *piv = (int *)malloc(((size_t)m + 1) * sizeof(int));
    double *x = (double *)malloc(((size_t)m + 1) * sizeof(double));
    int st = piv && x ? magnet_lu_factor(A, m, piv) : nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    for (int c = 0; !st && c < m; ++c) {
        for (int k = 0; k < m; ++k)
            x[k] = k == c;
        magnet_lu_solve(A, piv, m, x);
        for (int k = 0; k < m; ++k)
            inv[(size_t)k * m + c] = x[k];
    }
    free(piv);
    free(x);
    return st;
}

/* host -> device on the solver's stream, complete on return */
static int h2d(nlse_magnet *s, void *dst, const void *src, size_t bytes)
{
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

/* The coarsest level's dense inverse (host: it has at most a few hundred
 * unknowns) from its device operator. */
static int mg_coarsest(nlse_magnet *s, const magnet_dlevel *L)
{
    const size_t n = (size_t)L->nr * L->nz;
    double *A = (double *)malloc(9 * n * sizeof(double));
    unsigned char *M = (unsigned char *)malloc(n);
    int *idx = (int *)malloc(n * sizeof(int)), m = 0;
    double *D = NULL, *inv = NULL;
    int *nodes = NULL;
    int st = A && M && idx ? NLSE_OK : nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    if (!st && (cudaMemcpy(A, L->A, 9 * n * sizeof(double), cudaMemcpyDeviceToHost) != cudaSuccess ||
                cudaMemcpy(M, L->mask, n, cudaMemcpyDeviceToHost) != cudaSuccess))
        st = nlse_fail(NLSE_ERR_BACKEND, "copying the coarsest level failed");
    if (!st)
        st = magnet_coarsest_dense(L->nr, L->nz, A, M, idx, &m, &D);
    if (!st) {
        inv = (double *)malloc(((size_t)m * m + 1) * sizeof(double));
        nodes = (int *)malloc(((size_t)m + 1) * sizeof(int));
        if (!inv || !nodes)
            st = nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    }
    for (size_t q = 0; !st && q < n; ++q)
        if (idx[q] >= 0)
            nodes[idx[q]] = (int)q;
    if (!st)
        st = invert(D, m, inv);
    s->m = m;
    if (!st && !(st = dalloc((void **)&s->inv, ((size_t)m * m + 1) * sizeof(double), "the coarsest inverse")) &&
        !(st = dalloc((void **)&s->nodes, ((size_t)m + 1) * sizeof(int), "the coarsest nodes")) &&
        !(st = h2d(s, s->inv, inv, (size_t)m * m * sizeof(double))))
        st = h2d(s, s->nodes, nodes, (size_t)m * sizeof(int));
    free(A);
    free(M);
    free(idx);
    free(D);
    free(inv);
    free(nodes);
    return st;
}

/* The hierarchy of magnet_hier.c, built level by level on the device. */
static int mg_build(nlse_magnet *s)
{
    if (s->lev && s->built_dirichlet == s->dirichlet)
        return NLSE_OK;
    mg_free(s);
    const int nr = (int)s->g.nr, nz = (int)s->g.nz;
    const size_t nn = s->g.nr * s->g.nz;
    size_t unk = 0;
    for (int i = 0; i < nr; ++i)
        unk += s->rows_h[i].je >= s->rows_h[i].js ? (size_t)(s->rows_h[i].je - s->rows_h[i].js + 1) : 0;
    const int nlev = magnet_level_count(nr, nz, unk);
    s->lev = (magnet_dlevel *)calloc((size_t)nlev + 1, sizeof(magnet_dlevel));
    if (!s->lev)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    s->nlev = nlev;
    CKS(dalloc((void **)&s->mask0, nn, "the fine mask"));
    CKS(dalloc((void **)&s->r0, nn * sizeof(double), "the fine residual"));
    CKS(dalloc((void **)&s->e0, nn * sizeof(double), "the fine correction"));
    k_fine_mask<<<blocks_for((long long)nn), MAGNET_BLK, 0, s->stream>>>(s->rows_d, nr, nz, s->mask0);
    CK(cudaGetLastError());
    magnet_view f = {s->g.gamma, s->g.j1, s->rows_d, nr, nz, s->mask0, NULL};
    for (int l = 1; l <= nlev; ++l) {
        magnet_dlevel *L = &s->lev[l];
        L->nr = magnet_coarse_dim(f.nr);
        L->nz = magnet_coarse_dim(f.nz);
        const size_t n = (size_t)L->nr * L->nz;
        CKS(dalloc((void **)&L->A, 9 * n * sizeof(double), "a coarse operator"));
        CKS(dalloc((void **)&L->mask, n, "a coarse mask"));
        CKS(dalloc((void **)&L->b, n * sizeof(double), "a coarse level"));
        CKS(dalloc((void **)&L->e, n * sizeof(double), "a coarse level"));
        CKS(dalloc((void **)&L->r, n * sizeof(double), "a coarse level"));
        k_galerkin<<<blocks_for((long long)n), MAGNET_BLK, 0, s->stream>>>(f, L->nr, L->nz, L->A, L->mask);
        CK(cudaGetLastError());
        f.nr = L->nr;
        f.nz = L->nz;
        f.mask = L->mask;
        f.A = L->A;
    }
    CK(cudaStreamSynchronize(s->stream));
    CKS(mg_coarsest(s, &s->lev[nlev]));
    s->built_dirichlet = s->dirichlet;
    return NLSE_OK;
}

static void gs_coarse(nlse_magnet *s, magnet_dlevel *L, int reverse)
{
    static const int order[4][2] = {{0, 0}, {1, 1}, {0, 1}, {1, 0}};
    const int blocks = blocks_for((long long)L->nr * L->nz / 4 + 1);
    for (int c = 0; c < 4; ++c) {
        const int *o = order[reverse ? 3 - c : c];
        k_gs4<<<blocks, MAGNET_BLK, 0, s->stream>>>(L->A, L->mask, L->b, L->e, L->nr, L->nz, o[0], o[1]);
    }
}

static void vcycle(nlse_magnet *s, int l)
{
    magnet_dlevel *L = &s->lev[l];
    const size_t n = (size_t)L->nr * L->nz;
    if (l == s->nlev) {
        cudaMemsetAsync(L->e, 0, n * sizeof(double), s->stream);
        k_coarsest<<<(s->m + 127) / 128, 128, 0, s->stream>>>(s->inv, s->nodes, s->m, L->b, L->e);
        return;
    }
    magnet_dlevel *C = &s->lev[l + 1];
    for (int k = 0; k < 2; ++k)
        gs_coarse(s, L, 0);
    k_res9<<<blocks_for((long long)n), MAGNET_BLK, 0, s->stream>>>(L->A, L->mask, L->b, L->e, L->r, L->nr,
                                                                L->nz);
    k_restrict<<<blocks_for((long long)C->nr * C->nz), MAGNET_BLK, 0, s->stream>>>(
        L->r, L->nr, L->nz, C->b, C->mask, C->nr, C->nz);
    cudaMemsetAsync(C->e, 0, (size_t)C->nr * C->nz * sizeof(double), s->stream);
    vcycle(s, l + 1);
    k_prolong<<<blocks_for((long long)n), MAGNET_BLK, 0, s->stream>>>(C->e, C->nr, C->nz, L->e, L->mask,
                                                                   L->nr, L->nz, 1);
    for (int k = 0; k < 2; ++k)
        gs_coarse(s, L, 1);
}

template <typename T> static int mg_cycle(nlse_magnet *s)
{
    const LPArgs a = args_of(s);
    const long long nn = (long long)s->g.nr * s->g.nz;
    T *P0 = (T *)s->P[0], *P1 = (T *)s->P[1];
    for (int k = 0; k < 2; ++k)
        for (int c = 0; c < 2; ++c)
            k_rb<T, false><<<rb_grid(s), MAGNET_BLK, 0, s->stream>>>(P0, P1, s->rows_d, a, c, (T)1, NULL, NULL);
    k_fine_res<T><<<blocks_for(nn), MAGNET_BLK, 0, s->stream>>>(P0, P1, s->rows_d, a, s->r0);
    magnet_dlevel *C = &s->lev[1];
    k_restrict<<<blocks_for((long long)C->nr * C->nz), MAGNET_BLK, 0, s->stream>>>(
        s->r0, a.nr, a.nz, C->b, C->mask, C->nr, C->nz);
    cudaMemsetAsync(C->e, 0, (size_t)C->nr * C->nz * sizeof(double), s->stream);
    vcycle(s, 1);
    k_prolong<<<blocks_for(nn), MAGNET_BLK, 0, s->stream>>>(C->e, C->nr, C->nz, s->e0, s->mask0, a.nr,
                                                        a.nz, 0);
    k_fine_correct<T><<<blocks_for(nn), MAGNET_BLK, 0, s->stream>>>(P0, P1, s->rows_d, a, s->e0);
    for (int k = 0; k < 2; ++k)
        for (int c = 0; c < 2; ++c)
            k_rb<T, false><<<rb_grid(s), MAGNET_BLK, 0, s->stream>>>(P0, P1, s->rows_d, a, c, (T)1, NULL, NULL);
    CK(cudaGetLastError());
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* solve                                                              */
/* ------------------------------------------------------------------ */

#define MAGNET_BATCH 32

template <typename T>
static int solve_t(nlse_magnet *s, int method, double omega, double tol, long max_iter, double *history,
                   long *iterations, double *rel_residual, int *converged)
{
    const LPArgs a = args_of(s);
    const double fn = denom(s);
    const int nb = blocks_for((long long)a.nr * a.kw);
    const dim3 gr = rb_grid(s);
    T *P0 = (T *)s->P[0], *P1 = (T *)s->P[1];
    int flags[2] = {-1, -1};
    CK(cudaMemcpyAsync(s->flags, flags, sizeof flags, cudaMemcpyHostToDevice, s->stream));
    cudaFree(s->hist);
    s->hist = NULL;
    CKS(dalloc((void **)&s->hist, (size_t)max_iter * sizeof(double), "the residual history"));
    if (method == NLSE_MAGNET_JACOBI && !s->Q[0]) {
        const size_t n = (s->g.nr + 2) * s->hw;
        for (int c = 0; c < 2; ++c)
            CKS(dalloc(&s->Q[c], n * rsize(s), "Jacobi's second copy"));
    }
    if (method == NLSE_MAGNET_JACOBI)
        for (int c = 0; c < 2; ++c)
            CK(cudaMemcpyAsync(s->Q[c], s->P[c], (s->g.nr + 2) * s->hw * rsize(s),
                               cudaMemcpyDeviceToDevice, s->stream));
    CK(cudaEventRecord(s->ev0, s->stream));
    long it = 0;
    while (it < max_iter) {
        const long batch = method == NLSE_MAGNET_RBSOR ? (max_iter - it < MAGNET_BATCH ? max_iter - it : MAGNET_BATCH) : 1;
        for (long b = 0; b < batch; ++b, ++it) {
            if (method == NLSE_MAGNET_RBSOR) {
                for (int c = 0; c < 2; ++c)
                    k_rb<T, true><<<gr, MAGNET_BLK, 0, s->stream>>>(P0, P1, s->rows_d, a, c, (T)omega, s->part,
                                                                s->flags);
                k_final<<<1, 256, 0, s->stream>>>(s->part, 2 * (int)(gr.x * gr.y), fn, tol, s->hist, (int)it, s->flags);
            } else if (method == NLSE_MAGNET_GAUSS_SEIDEL || method == NLSE_MAGNET_SOR) {
                const T w = (T)(method == NLSE_MAGNET_SOR ? omega : 1.0);
                CK(cudaMemsetAsync(s->part, 0, sizeof(double), s->stream));
                for (int d = 0; d <= a.nr + a.nz - 2; ++d)
                    k_diag<T><<<1, 1024, 0, s->stream>>>(P0, P1, s->rows_d, a, d, w, s->part, s->flags);
                k_final<<<1, 32, 0, s->stream>>>(s->part, 1, fn, tol, s->hist, (int)it, s->flags);
            } else if (method == NLSE_MAGNET_JACOBI) {
                k_jacobi<T><<<nb, MAGNET_BLK, 0, s->stream>>>(P0, P1, (T *)s->Q[0], (T *)s->Q[1], s->rows_d, a,
                                                          s->part);
                k_final<<<1, 256, 0, s->stream>>>(s->part, nb, fn, tol, s->hist, (int)it, s->flags);
                for (int c = 0; c < 2; ++c) {
                    void *t = s->P[c];
                    s->P[c] = s->Q[c];
                    s->Q[c] = t;
                }
                P0 = (T *)s->P[0];
                P1 = (T *)s->P[1];
            } else { /* multigrid: a cycle, then the whole grid's residual */
                CKS(mg_cycle<T>(s));
                const long long nn = (long long)s->g.nr * s->g.nz;
                k_fine_res<T><<<blocks_for(nn), MAGNET_BLK, 0, s->stream>>>(P0, P1, s->rows_d, a, s->r0);
                const int nbr = blocks_for(nn);
                k_dot<<<nbr, MAGNET_BLK, 0, s->stream>>>(s->r0, s->r0, nn, s->part);
                k_final<<<1, 256, 0, s->stream>>>(s->part, nbr, fn, tol, s->hist, (int)it, s->flags);
            }
        }
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(flags, s->flags, sizeof flags, cudaMemcpyDeviceToHost, s->stream));
        CK(cudaStreamSynchronize(s->stream));
        if (flags[0] >= 0) {
            it = flags[0] + 1;
            break;
        }
    }
    CK(cudaEventRecord(s->ev1, s->stream));
    CK(cudaEventSynchronize(s->ev1));
    float ms = 0;
    cudaEventElapsedTime(&ms, s->ev0, s->ev1);
    s->last_seconds = ms * 1e-3;
    *iterations = it;
    double *hh = history;
    double last = NAN;
    if (!hh)
        hh = (double *)malloc((size_t)it * sizeof(double) + 8);
    if (hh && it > 0) {
        CK(cudaMemcpy(hh, s->hist, (size_t)it * sizeof(double), cudaMemcpyDeviceToHost));
        last = hh[it - 1];
    }
    if (!history)
        free(hh);
    *rel_residual = last;
    *converged = flags[0] >= 0 && flags[1] < 0;
    if (flags[1] >= 0)
        return nlse_fail(NLSE_ERR_BLOWUP, "the iteration diverged at iteration %d", flags[1] + 1);
    return NLSE_OK;
}

/* sum of a kernel's partials, on the host */
static int sum_parts(nlse_magnet *s, int nb, double *out)
{
    double h[MAGNET_NB];
    CK(cudaMemcpyAsync(h, s->part, (size_t)nb * sizeof(double), cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    double t = 0;
    for (int b = 0; b < nb; ++b)
        t += h[b];
    *out = t;
    return NLSE_OK;
}

static int ddot(nlse_magnet *s, const double *a, const double *b, long long n, double *out)
{
    const int nb = blocks_for(n);
    k_dot<<<nb, MAGNET_BLK, 0, s->stream>>>(a, b, n, s->part);
    CK(cudaGetLastError());
    return sum_parts(s, nb, out);
}

/* lev[0] (the fine operator, explicit) and the Krylov vectors */
static int mgcg_setup(nlse_magnet *s)
{
    magnet_dlevel *L = &s->lev[0];
    const size_t n = s->g.nr * s->g.nz;
    if (!L->A) {
        L->nr = (int)s->g.nr;
        L->nz = (int)s->g.nz;
        CKS(dalloc((void **)&L->A, 9 * n * sizeof(double), "the explicit fine operator"));
        CKS(dalloc((void **)&L->b, n * sizeof(double), "a fine vector"));
        CKS(dalloc((void **)&L->e, n * sizeof(double), "a fine vector"));
        CKS(dalloc((void **)&L->r, n * sizeof(double), "a fine vector"));
        CKS(dalloc((void **)&L->mask, n, "the fine mask"));
        k_fine_explicit<<<blocks_for((long long)n), MAGNET_BLK, 0, s->stream>>>(s->rows_d, L->nr, L->nz, s->g.gamma,
                                                                           s->g.j1, L->A);
        CK(cudaMemcpyAsync(L->mask, s->mask0, n, cudaMemcpyDeviceToDevice, s->stream));
    }
    if (!s->kv)
        CKS(dalloc((void **)&s->kv, 8 * n * sizeof(double), "the Krylov vectors"));
    const size_t cb = (s->g.nr + 2) * s->hw * rsize(s);
    for (int c = 0; c < 2; ++c)
        if (!s->kb[c])
            CKS(dalloc(&s->kb[c], cb, "the first Phi of the Krylov iteration"));
    return NLSE_OK;
}

/* Begin BiCGSTAB on A d = f - A Phi from d = 0: r = rh = the residual,
 * p = v = 0, rho = alpha = omega = 1, the first Phi kept. */
template <typename T> static int mgcg_open(nlse_magnet *s)
{
    const LPArgs a = args_of(s);
    const long long n = (long long)s->g.nr * s->g.nz;
    const size_t cb = (s->g.nr + 2) * s->hw * rsize(s);
    double *r = s->kv + n, *rh = r + n;
    CK(cudaMemsetAsync(s->kv, 0, 8 * (size_t)n * sizeof(double), s->stream));
    k_fine_res<T><<<blocks_for(n), MAGNET_BLK, 0, s->stream>>>((T *)s->P[0], (T *)s->P[1], s->rows_d, a, r);
    CK(cudaMemcpyAsync(rh, r, (size_t)n * sizeof(double), cudaMemcpyDeviceToDevice, s->stream));
    for (int c = 0; c < 2; ++c)
        CK(cudaMemcpyAsync(s->kb[c], s->P[c], cb, cudaMemcpyDeviceToDevice, s->stream));
    CK(cudaGetLastError());
    s->krho = s->kalpha = s->komega = 1.0;
    s->krel = NAN;
    s->kopen = 1;
    return NLSE_OK;
}

/* z = M^{-1} v: one V(2,2) cycle on A z = v from z = 0 */
static void precondition(nlse_magnet *s, const double *v, double *z)
{
    magnet_dlevel *L = &s->lev[0];
    const size_t n = (size_t)L->nr * L->nz;
    cudaMemcpyAsync(L->b, v, n * sizeof(double), cudaMemcpyDeviceToDevice, s->stream);
    cudaMemsetAsync(L->e, 0, n * sizeof(double), s->stream);
    vcycle(s, 0);
    cudaMemcpyAsync(z, L->e, n * sizeof(double), cudaMemcpyDeviceToDevice, s->stream);
}

/* out = A in (lev[0]) on the unknowns, 0 elsewhere */
static void matvec(nlse_magnet *s, const double *in, double *out)
{
    magnet_dlevel *L = &s->lev[0];
    const long long n = (long long)L->nr * L->nz;
    k_matvec9<<<blocks_for(n), MAGNET_BLK, 0, s->stream>>>(L->A, L->mask, in, out, L->nr, L->nz);
}

/* One BiCGSTAB iteration on the vectors and scalars kept in s; *rr: ||r||^2
 * of the new residual. */
static int bicgstab_step(nlse_magnet *s, double *rr)
{
    const long long n = (long long)s->g.nr * s->g.nz;
    const int nb = blocks_for(n);
    double *x = s->kv, *r = x + n, *rh = r + n, *p = rh + n, *v = p + n, *y = v + n, *z = y + n, *t = z + n;
    double rho1, rv, tt, tr;
    CKS(ddot(s, rh, r, n, &rho1));
    const double beta = (rho1 / s->krho) * (s->kalpha / s->komega);
    s->krho = rho1;
    k_bicg_p<<<nb, MAGNET_BLK, 0, s->stream>>>(p, r, v, beta, s->komega, n);
    precondition(s, p, y);
    matvec(s, y, v);
    CKS(ddot(s, rh, v, n, &rv));
    s->kalpha = s->krho / rv;
    k_bicg_xr<<<nb, MAGNET_BLK, 0, s->stream>>>(x, r, y, v, s->kalpha, n); /* s = r - alpha v, kept in r */
    precondition(s, r, z);
    matvec(s, z, t);
    CKS(ddot(s, t, t, n, &tt));
    CKS(ddot(s, t, r, n, &tr));
    s->komega = tt > 0 ? tr / tt : 0.0;
    k_bicg_xr<<<nb, MAGNET_BLK, 0, s->stream>>>(x, r, z, t, s->komega, n);
    return ddot(s, r, r, n, rr);
}

/* BiCGSTAB with the V-cycle as right preconditioner on A d = r0 (as the CPU,
 * magnet_mg.c: Table 2.1's rows are not symmetrisable); Phi = Phi0 + d.  The
 * iteration lives in the handle between calls (as on the CPU): a call
 * continues the one in progress, and calls of m_1 .. m_k iterations give the
 * bits of one call of m_1 + .. + m_k. */
template <typename T>
static int mgcg_t(nlse_magnet *s, double tol, long max_iter, double *history, long *iterations,
                  double *rel_residual, int *converged)
{
    CKS(mgcg_setup(s));
    const LPArgs a = args_of(s);
    const long long n = (long long)s->g.nr * s->g.nz;
    const size_t cb = (s->g.nr + 2) * s->hw * rsize(s);
    const double fn = denom(s);
    CK(cudaEventRecord(s->ev0, s->stream));
    if (!s->kopen)
        CKS(mgcg_open<T>(s));
    *rel_residual = s->krel;
    int st = NLSE_OK;
    for (long it = 1; it <= max_iter && s->kopen == 1; ++it) {
        double rr;
        if ((st = bicgstab_step(s, &rr))) {
            s->kopen = 0;
            break;
        }
        const double rel = sqrt(rr) / fn;
        if (history)
            history[it - 1] = rel;
        *iterations = it;
        *rel_residual = s->krel = rel;
        if (!isfinite(rel)) {
            s->kopen = 0; /* Phi stays that of the previous call */
            st = nlse_fail(NLSE_ERR_BLOWUP, "mg-cg diverged at iteration %ld", it);
            break;
        }
        if (rel < tol) {
            *converged = 1;
            break;
        }
        if (s->komega == 0.0 || s->krho == 0.0)
            s->kopen = 2; /* breakdown: the residual reached is reported */
    }
    if (!st) { /* Phi = the first Phi + x */
        for (int c = 0; c < 2; ++c)
            CK(cudaMemcpyAsync(s->P[c], s->kb[c], cb, cudaMemcpyDeviceToDevice, s->stream));
        k_fine_correct<T><<<blocks_for(n), MAGNET_BLK, 0, s->stream>>>((T *)s->P[0], (T *)s->P[1], s->rows_d,
                                                                      a, s->kv);
        CK(cudaGetLastError());
        if (*converged)
            s->kopen = 0;
    }
    CK(cudaEventRecord(s->ev1, s->stream));
    CK(cudaEventSynchronize(s->ev1));
    float ms = 0;
    cudaEventElapsedTime(&ms, s->ev0, s->ev1);
    s->last_seconds = ms * 1e-3;
    return st;
}

extern "C" int nlse_magnet_solve(nlse_magnet *s, int method, double omega, double tol, long max_iter,
                             double *history, long *iterations, double *rel_residual, int *converged)
{
    ON_DEVICE(s);
    if (!s || !iterations || !rel_residual || !converged)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_solve: NULL argument");
    *iterations = 0;
    *rel_residual = NAN;
    *converged = 0;
    if (method < NLSE_MAGNET_JACOBI || method > NLSE_MAGNET_MGCG)
        return nlse_fail(NLSE_ERR_VALUE, "method must be 0-5, got %d", method);
    if ((method == NLSE_MAGNET_RBSOR || method == NLSE_MAGNET_SOR) && !(omega > 0 && omega < 2))
        return nlse_fail(NLSE_ERR_VALUE, "omega must be in (0, 2), got %g", omega);
    if (!(tol > 0) || !isfinite(tol))
        return nlse_fail(NLSE_ERR_VALUE, "tol must be finite and > 0, got %g", tol);
    if (max_iter < 1 || max_iter > (1L << 30))
        return nlse_fail(NLSE_ERR_VALUE, "max_iter must be in [1, 2^30], got %ld", max_iter);
    if (method != NLSE_MAGNET_MGCG)
        s->kopen = 0; /* Phi moves on: the Krylov iteration no longer applies */
    if (method == NLSE_MAGNET_MULTIGRID || method == NLSE_MAGNET_MGCG)
        CKS(mg_build(s));
    if (method == NLSE_MAGNET_MGCG)
        return s->p.dtype == NLSE_COMPLEX64
                   ? mgcg_t<float>(s, tol, max_iter, history, iterations, rel_residual, converged)
                   : mgcg_t<double>(s, tol, max_iter, history, iterations, rel_residual, converged);
    return s->p.dtype == NLSE_COMPLEX64
               ? solve_t<float>(s, method, omega, tol, max_iter, history, iterations, rel_residual, converged)
               : solve_t<double>(s, method, omega, tol, max_iter, history, iterations, rel_residual, converged);
}

extern "C" double nlse_magnet_last_solve_seconds(const nlse_magnet *s) { return s->last_seconds; }
