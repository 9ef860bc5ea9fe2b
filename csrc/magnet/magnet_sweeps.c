/*
 * magnet_sweeps.c -- the fine-grid work of the CPU magnet solver
 * (Madhubhashini, thesis, chapter 2): the iterations of section 2.2 on the
 * colour-reordered storage of section 4.5 (Jacobi, Gauss-Seidel and SOR in
 * the row order of Algorithm 1, red-black SOR as Algorithm 2), the residual
 * of eq. 2.50, and Phi in and out of the natural layout, each dispatched by
 * precision over magnet_kernels.inc (written once, included for float and
 * double).
 *
 * The lowest file of the model: magnet.c (the handle and the solve loop)
 * and magnet_mg.c (multigrid, mg-cg) call it; it calls neither.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "magnet_cpu.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define FN(name) CAT(name, _f)
#include "magnet_kernels.inc"
#undef FN
#undef REAL

#define REAL double
#define FN(name) CAT(name, _d)
#include "magnet_kernels.inc"
#undef FN
#undef REAL

static int single(const struct nlse_magnet *s) { return s->p.dtype == NLSE_COMPLEX64; }

double magnet_sweep(struct nlse_magnet *s, int method, double omega)
{
    const int f = single(s);
    switch (method) {
    case NLSE_MAGNET_JACOBI: return f ? sweep_jacobi_f(s) : sweep_jacobi_d(s);
    case NLSE_MAGNET_GAUSS_SEIDEL: return f ? sweep_lex_f(s, 1.0) : sweep_lex_d(s, 1.0);
    case NLSE_MAGNET_SOR: return f ? sweep_lex_f(s, omega) : sweep_lex_d(s, omega);
    default: return f ? sweep_rb_f(s, omega) : sweep_rb_d(s, omega);
    }
}

double magnet_residual_sq(const struct nlse_magnet *s)
{
    return single(s) ? residual_all_f(s) : residual_all_d(s);
}

void magnet_phi_out(const struct nlse_magnet *s, double *phi)
{
    if (single(s))
        get_phi_f(s, phi);
    else
        get_phi_d(s, phi);
}

void magnet_phi_in(struct nlse_magnet *s, const double *phi)
{
    if (single(s))
        set_phi_f(s, phi);
    else
        set_phi_d(s, phi);
}

void magnet_boundary_in(struct nlse_magnet *s, const double *values)
{
    if (single(s)) {
        set_all_f(s, values);
        zero_unknowns_f(s);
    } else {
        set_all_d(s, values);
        zero_unknowns_d(s);
    }
}

void magnet_fine_smooth(struct nlse_magnet *s)
{
    if (single(s))
        (void)sweep_rb_f(s, 1.0);
    else
        (void)sweep_rb_d(s, 1.0);
}

void magnet_fine_residual(const struct nlse_magnet *s, double *r)
{
    if (single(s))
        residual_to_f(s, r);
    else
        residual_to_d(s, r);
}

void magnet_fine_correct(struct nlse_magnet *s, const double *e)
{
    if (single(s))
        add_correction_f(s, e);
    else
        add_correction_d(s, e);
}
