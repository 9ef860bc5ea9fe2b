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

#define NLSE_TEMPLATE "../magnet/magnet_kernels.inc"
#include "../common/instantiate.h"

static int single(const struct nlse_magnet *s) { return s->p.dtype == NLSE_COMPLEX64; }

/* fn_f(...) or fn_d(...) by the precision of s (void calls included) */
#define BY_PRECISION(s, fn, ...)                           \
    (single(s) ? NLSE_INSTANTIATE_CAT(fn, _f)(__VA_ARGS__) \
               : NLSE_INSTANTIATE_CAT(fn, _d)(__VA_ARGS__))

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

double magnet_residual_sq(const struct nlse_magnet *s) { return BY_PRECISION(s, residual_all, s); }

void magnet_phi_out(const struct nlse_magnet *s, double *phi) { BY_PRECISION(s, get_phi, s, phi); }

void magnet_phi_in(struct nlse_magnet *s, const double *phi) { BY_PRECISION(s, set_phi, s, phi); }

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

void magnet_fine_smooth(struct nlse_magnet *s) { (void)BY_PRECISION(s, sweep_rb, s, 1.0); }

void magnet_fine_residual(const struct nlse_magnet *s, double *r)
{
    BY_PRECISION(s, residual_to, s, r);
}

void magnet_fine_correct(struct nlse_magnet *s, const double *e)
{
    BY_PRECISION(s, add_correction, s, e);
}
