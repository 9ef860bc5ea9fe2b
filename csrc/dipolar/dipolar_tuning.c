/*
 * dipolar_tuning.c -- dipolar_tuning_read: the distributed dipolar GPE's
 * tuning switches (dipolar_tuning.h), read from the environment when a
 * distributed solver is created.  The only place the dipolar backends read
 * the environment.
 */
#include <stdlib.h>
#include <string.h>

#include "nlsepy/dipolar.h"
#include "dipolar_tuning.h"

static int is(const char *v, const char *name)
{
    return v && strcmp(v, name) == 0;
}

void dipolar_tuning_read(dipolar_tuning *t)
{
    const char *x = getenv("NLSEPY_DIPOLAR_XSOLVE");
    const char *c = getenv("NLSEPY_DIPOLAR_COPY");
    t->xsolve = is(x, "transpose") ? NLSE_DIPOLAR_XSOLVE_TRANSPOSE
                                   : NLSE_DIPOLAR_XSOLVE_SUBSTRUCTURE;
    t->copy = is(c, "engines") ? DIPOLAR_COPY_ENGINES
              : is(c, "kernel") ? DIPOLAR_COPY_KERNEL
                                : DIPOLAR_COPY_AUTO;
}
