/*
 * dipolar_lhy.c -- the non-derivative factor of a split-step (Loncar, thesis,
 * eq. 2.24; eq. 2.41 in imaginary time) with the Lee-Huang-Yang term of
 * quantum fluctuations, q |Psi|^3, in H1:
 *
 *     Psi <- s Psi exp(-dt H1)  or  Psi exp(-i dt H1),
 *     H1 = V + gdd s^2 Phi + g s^2 |Psi|^2 + q s^3 |Psi|^3
 *
 * for one grid row, float and double.  nonlin_row (dipolar_kernels.inc)
 * calls it only when q != 0, from the pass that applies the factor: one
 * more pointwise power, |Psi|^3 = d sqrt(d) with d = |Psi|^2, and no
 * further pass through memory.  A file of its own, compiled without errno
 * from sqrt so the loops vectorise, and so the stepping kernels without
 * the term are compiled exactly as before.
 */
#include <math.h>
#include <stddef.h>
#include "dipolar_internal.h"
#include "dipolar_vmath.h"

/* vrow holds V + gdd s^2 Phi; g and q the coefficients times s^2 and s^3. */
#define DIPOLAR_LHY(REAL, sfx, EXPR, SINCOSR, SQRTR)                                          \
    DIPOLAR_CLONES void dipolar_nonlin_lhy_##sfx(const struct nlse_dipolar *s, int mode,      \
                                                 size_t row, const REAL *vrow, REAL sc,        \
                                                 REAL dt, REAL g, REAL q)                      \
    {                                                                                          \
        const size_t n2 = s->n[2];                                                             \
        if (s->is_real) {                                                                      \
            REAL *p = (REAL *)s->psi + row * n2;                                               \
            for (size_t k = 0; k < n2; ++k) {                                                  \
                REAL d = p[k] * p[k];                                                          \
                REAL th = dt * ((vrow[k] + g * d) + q * (d * SQRTR(d)));                       \
                p[k] *= sc * EXPR(-th);                                                        \
            }                                                                                  \
        } else if (mode == NLSE_DIPOLAR_IMAG) {                                                \
            REAL *p = (REAL *)s->psi + 2 * row * n2;                                           \
            for (size_t k = 0; k < n2; ++k) {                                                  \
                REAL re = p[2 * k], im = p[2 * k + 1];                                         \
                REAL d = re * re + im * im;                                                    \
                REAL f = sc * EXPR(-dt * ((vrow[k] + g * d) + q * (d * SQRTR(d))));            \
                p[2 * k] = re * f;                                                             \
                p[2 * k + 1] = im * f;                                                         \
            }                                                                                  \
        } else {                                                                               \
            REAL *p = (REAL *)s->psi + 2 * row * n2;                                           \
            for (size_t k = 0; k < n2; ++k) {                                                  \
                REAL re = p[2 * k], im = p[2 * k + 1];                                         \
                REAL d = re * re + im * im;                                                    \
                REAL th = dt * ((vrow[k] + g * d) + q * (d * SQRTR(d)));                       \
                REAL c, sn;                                                                    \
                SINCOSR(th, &sn, &c);                                                          \
                p[2 * k] = re * c + im * sn;                                                   \
                p[2 * k + 1] = im * c - re * sn;                                               \
            }                                                                                  \
        }                                                                                      \
    }

DIPOLAR_LHY(float, f, vm_exp_f, vm_sincos_f, sqrtf)
DIPOLAR_LHY(double, d, vm_exp_d, vm_sincos_d, sqrt)
