/*
 * dipolar_spike.c -- the coupling of the slabs' Crank-Nicolson x solves of
 * a distributed run by substructuring (the scheme of Loncar, thesis, eqs.
 * 2.29-2.34 and 2.42 solved slab by slab): the responses of a slab's local
 * tridiagonal system to unit boundary values, and the rows of the inverse
 * of the 2P x 2P system that couples the slabs' end values.  Shared by the
 * CPU ranks (dipolar_slab.c) and the GPU slabs (dipolar_dist.cu).
 *
 * The system of one line is A x_(i-1) + A0 x_i + A x_(i+1) = c_i with
 * constant A, A0 (imaginary time A = -r/2, A0 = 1 + r; real time A = -i r/2,
 * A0 = 1 + i r; r = dt kin / h^2).  Rank q holds xc[q] rows; its local
 * system adds the neighbours' rows at its ends (xc[q] + 2 points, one fewer
 * at a global end, whose own row is the fixed boundary).  Its solution on
 * the own rows is u = y + L v + (R - h) w (dipolar_slab.c), and the first
 * and last values F_q, E_q of every rank satisfy
 *     F_q - w_q(first) F_(q+1) - v_q(first) E_(q-1) = d_(q,0)
 *     E_q - w_q(last)  F_(q+1) - v_q(last)  E_(q-1) = d_(q,1).
 */
#include <complex.h>
#include <stdlib.h>

#include "dipolar_params.h"

typedef double complex dcx;

/* Responses of the system of n points (interior 1 .. n-2), zero right-hand
 * side: v to x_0 = 1, w to x_(n-1) = 1, by the recursions of
 * dipolar_cn_coefficients (x_(i+1) = alpha_i x_i + beta_i from the bottom,
 * alpha and beta from the top). */
static void responses(dcx A, dcx A0, size_t n, dcx *v, dcx *w, dcx *al, dcx *be)
{
    dcx g = -1.0 / A0;
    al[n - 2] = 0;
    be[n - 2] = 1.0;
    for (size_t i = n - 2; i > 0; --i) {
        al[i - 1] = A * g;
        be[i - 1] = g * (A * be[i]);
        g = -1.0 / (A0 + A * al[i - 1]);
    }
    v[0] = 1.0;
    w[0] = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
        v[i + 1] = al[i] * v[i];
        w[i + 1] = al[i] * w[i] + be[i];
    }
}

static void swap_rows(dcx *a, size_t n, size_t r1, size_t r2)
{
    for (size_t k = 0; k < n; ++k) {
        const dcx t = a[r1 * n + k];
        a[r1 * n + k] = a[r2 * n + k];
        a[r2 * n + k] = t;
    }
}

/* inv = a^-1 (a destroyed; Gauss-Jordan with partial pivots). */
static int invert(dcx *a, size_t n, dcx *inv)
{
    for (size_t i = 0; i < n * n; ++i)
        inv[i] = (i / n == i % n);
    for (size_t c = 0; c < n; ++c) {
        size_t p = c;
        for (size_t r = c + 1; r < n; ++r)
            if (cabs(a[r * n + c]) > cabs(a[p * n + c]))
                p = r;
        if (!(cabs(a[p * n + c]) > 0))
            return nlse_fail(NLSE_ERR_INTERNAL, "the coupling system of the x solve is singular");
        swap_rows(a, n, c, p);
        swap_rows(inv, n, c, p);
        const dcx d = 1.0 / a[c * n + c];
        for (size_t k = 0; k < n; ++k) {
            a[c * n + k] *= d;
            inv[c * n + k] *= d;
        }
        for (size_t r = 0; r < n; ++r)
            if (r != c && a[r * n + c] != 0) {
                const dcx f = a[r * n + c];
                for (size_t k = 0; k < n; ++k) {
                    a[r * n + k] -= f * a[c * n + k];
                    inv[r * n + k] -= f * inv[c * n + k];
                }
            }
    }
    return NLSE_OK;
}

static size_t local_len(const size_t *xc, int P, int q)
{
    return xc[q] + 2 - (q == 0) - (q == P - 1);
}

int dipolar_spike_setup(double r, int real_time, int P, const size_t *xc, int rank, double *sv,
                        double *sw, double *kv, double *kw)
{
    const dcx A = real_time ? -0.5 * r * I : -0.5 * r;
    const dcx A0 = real_time ? 1.0 + r * I : 1.0 + r;
    size_t most = 0;
    for (int q = 0; q < P; ++q)
        most = local_len(xc, P, q) > most ? local_len(xc, P, q) : most;
    const size_t K = 2 * (size_t)P;
    dcx *v = (dcx *)malloc(4 * most * sizeof(dcx));
    dcx *k = (dcx *)calloc(2 * K * K, sizeof(dcx));
    if (!v || !k) {
        free(v);
        free(k);
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the x solve's coupling system");
    }
    dcx *w = v + most, *al = w + most, *be = al + most, *inv = k + K * K;
    for (int q = 0; q < P; ++q) {
        const size_t n = local_len(xc, P, q), o = q == 0 ? 0 : 1, e = o + xc[q] - 1;
        responses(A, A0, n, v, w, al, be);
        k[(2 * q) * K + 2 * q] = 1;
        k[(2 * q + 1) * K + 2 * q + 1] = 1;
        if (q + 1 < P) { /* the top: F_(q+1) */
            k[(2 * q) * K + 2 * (q + 1)] -= w[o];
            k[(2 * q + 1) * K + 2 * (q + 1)] -= w[e];
        }
        if (q > 0) { /* the bottom: E_(q-1) */
            k[(2 * q) * K + 2 * (q - 1) + 1] -= v[o];
            k[(2 * q + 1) * K + 2 * (q - 1) + 1] -= v[e];
        }
        if (q == rank)
            for (size_t i = 0; i < xc[q]; ++i) {
                sv[2 * i] = creal(v[o + i]);
                sv[2 * i + 1] = cimag(v[o + i]);
                sw[2 * i] = creal(w[o + i]);
                sw[2 * i + 1] = cimag(w[o + i]);
            }
    }
    int st = invert(k, K, inv);
    for (size_t c = 0; !st && c < K; ++c) {
        const dcx a = rank > 0 ? inv[(2 * (size_t)(rank - 1) + 1) * K + c] : 0;
        const dcx b = rank + 1 < P ? inv[(2 * (size_t)(rank + 1)) * K + c] : 0;
        kv[2 * c] = creal(a);
        kv[2 * c + 1] = cimag(a);
        kw[2 * c] = creal(b);
        kw[2 * c + 1] = cimag(b);
    }
    free(v);
    free(k);
    return st;
}
