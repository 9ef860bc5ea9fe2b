/*
 * mbloch_tuning.c -- mbloch_tuning_read: the Maxwell-Bloch solver's tuning
 * switches (mbloch_tuning.h), read from the environment when a solver is
 * created.  The only place the Maxwell-Bloch backends read the
 * environment; the helpers parse a variable's value (NULL when it is
 * unset).
 */
#include <stdlib.h>
#include <string.h>

#include "mbloch_tuning.h"

/* enum mbloch_kernel_choice of NLSEPY_MBLOCH_KERNEL's value. */
static int kernel_choice(const char *v)
{
    if (!v)
        return MBLOCH_KERNEL_AUTO;
    if (strcmp(v, "simt") == 0)
        return MBLOCH_KERNEL_SIMT;
    if (strcmp(v, "tc64") == 0)
        return MBLOCH_KERNEL_TC64;
    if (strcmp(v, "tcf") == 0)
        return MBLOCH_KERNEL_TCF;
    return MBLOCH_KERNEL_AUTO;
}

/* A power of two from 1 to 32, else 0. */
static int power_of_two_to_32(const char *v)
{
    const int n = v ? atoi(v) : 0;
    return n >= 1 && n <= 32 && (n & (n - 1)) == 0 ? n : 0;
}

void mbloch_tuning_read(mbloch_tuning *t)
{
    const char *pipe = getenv("NLSEPY_MBLOCH_PIPE");
    t->kernel = kernel_choice(getenv("NLSEPY_MBLOCH_KERNEL"));
    t->atoms_per_block = power_of_two_to_32(getenv("NLSEPY_MBLOCH_ATOMS_PER_BLOCK"));
    t->pipe = pipe && atoi(pipe) >= 1 ? atoi(pipe) : 0;
}
