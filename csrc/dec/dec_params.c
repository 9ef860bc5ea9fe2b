/*
 * dec_params.c -- what every backend of the DEC GPE (source 001, eq. 8)
 * shares: the checks of the parameters and of the block table with named
 * errors, and the table in kernel form (interior index distances, the
 * diagonal sum_j w_ij of each cell), the layer ranges of a z slab and the
 * agreement on a blow-up across the processes of a distributed run
 * (section 4.2).
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dec_internal.h"

static int positive(const char *name, double x)
{
    if (!(isfinite(x) && x > 0))
        return nlse_fail(NLSE_ERR_VALUE, "%s must be finite and > 0, got %g", name, x);
    return NLSE_OK;
}

static int finite(const char *name, double x)
{
    if (!isfinite(x))
        return nlse_fail(NLSE_ERR_VALUE, "%s must be finite, got %g", name, x);
    return NLSE_OK;
}

static int check_params(const nlse_dec_params *p)
{
    static const char *ax[3] = {"x", "y", "z"};
    char name[32];
    if (p->cells < 1 || p->cells > NLSE_DEC_MAX_CELLS)
        return nlse_fail(NLSE_ERR_VALUE, "cells per block must be in [1, %d], got %d",
                         NLSE_DEC_MAX_CELLS, p->cells);
    if (p->rows < 1 || p->rows > NLSE_DEC_MAX_ROWS)
        return nlse_fail(NLSE_ERR_VALUE, "neighbour rows must be in [1, %d], got %d",
                         NLSE_DEC_MAX_ROWS, p->rows);
    double total = p->cells;
    for (int q = 0; q < 3; ++q) {
        if (p->blocks[q] < 1)
            return nlse_fail(NLSE_ERR_VALUE, "blocks along %s must be >= 1, got %ld", ax[q],
                             p->blocks[q]);
        total *= (double)p->blocks[q];
        snprintf(name, sizeof name, "edge[%d]", q);
        if (positive(name, p->edge[q]))
            return NLSE_ERR_VALUE;
        snprintf(name, sizeof name, "origin[%d]", q);
        if (finite(name, p->origin[q]))
            return NLSE_ERR_VALUE;
        snprintf(name, sizeof name, "trap[%d]", q);
        if (finite(name, p->trap[q]))
            return NLSE_ERR_VALUE;
    }
    /* interior index distances are ints, the state index 2i fits a long */
    if ((double)p->cells * p->blocks[0] * p->blocks[1] * 2 > 2147483647.0)
        return nlse_fail(NLSE_ERR_VALUE, "a z plane of %ld x %ld blocks of %d cells is too large",
                         p->blocks[0], p->blocks[1], p->cells);
    if (total > 4.0e18 / 16)
        return nlse_fail(NLSE_ERR_VALUE, "grid of %g unknowns is too large", total);
    if (p->periodic != 0 && p->periodic != 1)
        return nlse_fail(NLSE_ERR_VALUE, "periodic must be 0 or 1, got %d", p->periodic);
    if (finite("g", p->g) || positive("dt", p->dt))
        return NLSE_ERR_VALUE;
    if (p->dtype != NLSE_COMPLEX64 && p->dtype != NLSE_COMPLEX128)
        return nlse_fail(NLSE_ERR_TYPE, "dtype must be NLSE_COMPLEX64 or NLSE_COMPLEX128, got %d",
                         p->dtype);
    return NLSE_OK;
}

static int check_table(const nlse_dec_params *p, const nlse_dec_table *t)
{
    if (!t->row_start || !t->nbr_cell || !t->nbr_offset || !t->weight || !t->volume ||
        !t->centre)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: the block table has a NULL array");
    if (t->row_start[0] != 0 || t->row_start[p->cells] != p->rows)
        return nlse_fail(NLSE_ERR_VALUE, "row_start must run from 0 to rows = %d, got %d .. %d",
                         p->rows, t->row_start[0], t->row_start[p->cells]);
    for (int c = 0; c < p->cells; ++c) {
        if (t->row_start[c + 1] <= t->row_start[c])
            return nlse_fail(NLSE_ERR_VALUE, "cell %d has no neighbours (row_start %d, %d)", c,
                             t->row_start[c], t->row_start[c + 1]);
        if (!(isfinite(t->volume[c]) && t->volume[c] > 0))
            return nlse_fail(NLSE_ERR_VALUE, "volume[%d] must be finite and > 0, got %g", c,
                             t->volume[c]);
        for (int q = 0; q < 3; ++q)
            if (!isfinite(t->centre[3 * c + q]))
                return nlse_fail(NLSE_ERR_VALUE, "centre[%d][%d] must be finite", c, q);
    }
    for (int k = 0; k < p->rows; ++k) {
        if (t->nbr_cell[k] < 0 || t->nbr_cell[k] >= p->cells)
            return nlse_fail(NLSE_ERR_VALUE, "nbr_cell[%d] = %d is not a cell of the block", k,
                             t->nbr_cell[k]);
        for (int q = 0; q < 3; ++q)
            if (t->nbr_offset[3 * k + q] < -1 || t->nbr_offset[3 * k + q] > 1)
                return nlse_fail(NLSE_ERR_VALUE, "nbr_offset[%d][%d] = %d is not -1, 0 or 1", k,
                                 q, t->nbr_offset[3 * k + q]);
        if (!(isfinite(t->weight[k]) && t->weight[k] > 0))
            return nlse_fail(NLSE_ERR_VALUE, "weight[%d] must be finite and > 0, got %g", k,
                             t->weight[k]);
    }
    return NLSE_OK;
}

int nlse_dec_check(const nlse_dec_params *p, const nlse_dec_table *t)
{
    if (!p || !t)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL parameters or table");
    int st = check_params(p);
    return st ? st : check_table(p, t);
}

size_t nlse_dec_size(const nlse_dec_params *p)
{
    return (size_t)p->cells * (size_t)p->blocks[0] * (size_t)p->blocks[1] * (size_t)p->blocks[2];
}

void dec_rows_free(dec_rows *r)
{
    free(r->start);
    free(r->cell);
    free(r->off);
    free(r->delta);
    free(r->w);
    free(r->diag);
    free(r->vol);
    free(r->centre);
    memset(r, 0, sizeof *r);
}

int dec_rows_build(const nlse_dec_params *p, const nlse_dec_table *t, dec_rows *r)
{
    const int C = p->cells, K = p->rows;
    memset(r, 0, sizeof *r);
    r->cells = C;
    r->rows = K;
    r->start = malloc(sizeof(int) * (size_t)(C + 1));
    r->cell = malloc(sizeof(int) * (size_t)K);
    r->off = malloc(sizeof(int) * 3 * (size_t)K);
    r->delta = malloc(sizeof(int) * (size_t)K);
    r->w = malloc(sizeof(double) * (size_t)K);
    r->diag = calloc((size_t)C, sizeof(double));
    r->vol = malloc(sizeof(double) * (size_t)C);
    r->centre = malloc(sizeof(double) * 3 * (size_t)C);
    if (!r->start || !r->cell || !r->off || !r->delta || !r->w || !r->diag || !r->vol ||
        !r->centre) {
        dec_rows_free(r);
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec: out of memory for the block table");
    }
    memcpy(r->start, t->row_start, sizeof(int) * (size_t)(C + 1));
    memcpy(r->cell, t->nbr_cell, sizeof(int) * (size_t)K);
    memcpy(r->off, t->nbr_offset, sizeof(int) * 3 * (size_t)K);
    memcpy(r->w, t->weight, sizeof(double) * (size_t)K);
    memcpy(r->vol, t->volume, sizeof(double) * (size_t)C);
    memcpy(r->centre, t->centre, sizeof(double) * 3 * (size_t)C);
    const long nx = p->blocks[0], ny = p->blocks[1];
    for (int c = 0; c < C; ++c)
        for (int k = t->row_start[c]; k < t->row_start[c + 1]; ++k) {
            const int *o = t->nbr_offset + 3 * k;
            r->delta[k] = (int)(((o[2] * ny + o[1]) * nx + o[0]) * (long)C + t->nbr_cell[k] - c);
            r->diag[c] += t->weight[k];
        }
    return NLSE_OK;
}

int dec_check_create(const nlse_dec_params *p, const nlse_dec_table *t, nlse_dec **out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_create: NULL output");
    *out = NULL;
    return nlse_dec_check(p, t);
}

int dec_check_states(const void *psi, const void *psi_prev, size_t n, int dtype)
{
    const int st = dec_check_complex(psi, n, dtype, "psi");
    if (st || !psi_prev)
        return st;
    return dec_check_complex(psi_prev, n, dtype, "psi_prev");
}

int dec_set_dt(nlse_dec_params *p, int *have_prev, double dt)
{
    if (!(isfinite(dt) && dt > 0))
        return nlse_fail(NLSE_ERR_VALUE, "dt must be finite and > 0, got %g", dt);
    if (dt != p->dt)
        *have_prev = 0;
    p->dt = dt;
    return NLSE_OK;
}

int dec_set_comm(const nlse_comm **slot, const nlse_comm *c)
{
    if (!slot)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_set_comm: NULL solver");
    if (c && (!c->sum || !c->max))
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_set_comm: the table has no sum or max");
    *slot = c;
    return NLSE_OK;
}

int dec_check_steps(const void *s, long n, long *done)
{
    return nlse_check_steps(s, n, done, "nlse_dec", "steps");
}

int dec_steps_end(int st, int bad, long k, long n, long *done, const char *what)
{
    if (done)
        *done = k;
    if (st)
        return st;
    if (bad)
        return nlse_fail(NLSE_ERR_BLOWUP, "the state became %s %ld of %ld", what, k + 1, n);
    return NLSE_OK;
}

int dec_check_real(const void *v, size_t n, int dtype, const char *name)
{
    if (!v)
        return nlse_fail(NLSE_ERR_VALUE, "%s is NULL", name);
    for (size_t i = 0; i < n; ++i) {
        double x = dtype == NLSE_COMPLEX64 ? ((const float *)v)[i] : ((const double *)v)[i];
        if (!isfinite(x))
            return nlse_fail(NLSE_ERR_VALUE, "%s[%zu] is not finite (%g)", name, i, x);
    }
    return NLSE_OK;
}

int dec_check_complex(const void *v, size_t n, int dtype, const char *name)
{
    return dec_check_real(v, 2 * n, dtype, name);
}

int dec_check_layers(const nlse_dec_params *p, long first, long count, const char *what)
{
    if (first < 0 || count < 1 || count > p->blocks[2] - first)
        return nlse_fail(NLSE_ERR_VALUE, "%s: layers %ld .. %ld are not inside the %ld layers "
                         "of blocks along z", what, first, first + count - 1, p->blocks[2]);
    return NLSE_OK;
}

int dec_agree_bad(const nlse_comm *c, int *bad)
{
    if (!c)
        return NLSE_OK;
    double b = *bad ? 1.0 : 0.0;
    const int st = c->max(c->ctx, &b, 1);
    if (st)
        return st;
    *bad = b != 0.0;
    return NLSE_OK;
}

double dec_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
