/*
 * dec_tuning.c -- dec_tuning_read: the DEC GPE's tuning switches
 * (dec_tuning.h), read from the environment when a solver is created.  The
 * only place the DEC backends read the environment; the helpers parse a
 * variable's value (NULL when it is unset).
 */
#include <stdio.h>
#include <stdlib.h>

#include "dec_tuning.h"

/* A positive integer, 0 when v is unset or not positive. */
static unsigned count_of(const char *v)
{
    const int n = v ? atoi(v) : 0;
    return n > 0 ? (unsigned)n : 0u;
}

/* An integer, `none` when v is unset or empty. */
static int int_of(const char *v, int none)
{
    return v && *v ? atoi(v) : none;
}

/* A positive number, `none` when v is unset or not positive. */
static double positive_of(const char *v, double none)
{
    return v && atof(v) > 0 ? atof(v) : none;
}

/* k_march's tile TXxTY, 0 x 0 unless both are positive. */
static void tile_of(const char *v, unsigned *tx, unsigned *ty)
{
    unsigned a, b;
    *tx = *ty = 0;
    if (v && sscanf(v, "%ux%u", &a, &b) == 2 && a > 0 && b > 0) {
        *tx = a;
        *ty = b;
    }
}

void dec_tuning_read(dec_tuning *t)
{
    const int ring = int_of(getenv("NLSEPY_DEC_MARCH_RING"), 0);
    t->kernel = int_of(getenv("NLSEPY_DEC_KERNEL"), -1);
    t->tile_mib = positive_of(getenv("NLSEPY_DEC_TILE_MIB"), 8.0);
    t->tile_rows = count_of(getenv("NLSEPY_DEC_TILE_ROWS"));
    t->blocks_per_sm = count_of(getenv("NLSEPY_DEC_BLOCKS_PER_SM"));
    t->march_ring = ring >= 4 && ring <= 6 ? (unsigned)ring : 0u;
    tile_of(getenv("NLSEPY_DEC_MARCH_TILE"), &t->march_tx, &t->march_ty);
    t->march_chunks = count_of(getenv("NLSEPY_DEC_MARCH_CHUNKS"));
    t->march_band = count_of(getenv("NLSEPY_DEC_MARCH_BAND"));
}
