/*
 * dipolar_vmath.h -- exp and sincos for the non-derivative step of the split-step
 * solver (eqs. 2.24 and 2.41 of Loncar's thesis), written without branches
 * or calls so that the loops over a grid row vectorise (libm calls do not).
 * Cody-Waite reduction (by ln 2, or by pi/2 in three parts) and Taylor
 * polynomials on the reduced interval: within 1-2 ulp of libm over the
 * arguments a step meets (|x| < 1e3 checked in tests/dipolar/test_dipolar.py via
 * the reference solver).  exp clamps its argument to +-708 (float: +-87):
 * beyond that the state overflows or underflows on the next step anyway.
 */
#ifndef NLSEPY_DIPOLAR_VMATH_H
#define NLSEPY_DIPOLAR_VMATH_H

#include <math.h>
#include <string.h>

/* The per-plane and per-row stepping functions are also compiled for
 * x86-64-v3 (AVX2) and chosen at load time.  GCC 12 contracts a * b + c
 * into FMA instructions in the AVX2 versions (ISO C mode notwithstanding),
 * so the two versions can differ in the last bit; the machine picks one
 * and keeps it, so its results repeat bit for bit. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    __GNUC__ >= 12
#define DIPOLAR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DIPOLAR_CLONES
#endif

static inline double vm_exp_d(double x)
{
    /* exp(x) = 2^n exp(r): n = round(x / ln 2) by the 1.5 2^52 shifter,
     * r = x - n ln 2 in two parts, exp(r) by Taylor to r^13 (|r| < 0.35) */
    x = fabs(x) > 708.0 ? copysign(708.0, x) : x; /* beyond: inf/0 next step */
    double kd = x * 1.44269504088896340736 + 6755399441055744.0;
    unsigned long long vu, eu;
    double scale;
    memcpy(&vu, &kd, sizeof vu);
    double n = kd - 6755399441055744.0;
    double r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    eu = (vu + 1023u) << 52;
    memcpy(&scale, &eu, sizeof scale);
    return p * scale;
}
static inline void vm_sincos_d(double x, double *s, double *c)
{
    double t = x * 0.63661977236758134308;
    int n = (int)(t + (t >= 0 ? 0.5 : -0.5));
    double r = ((x - n * 1.57079632673412561417e+00) - n * 6.07710050650619224932e-11)
               - n * 2.02226624871116645580e-21;
    double r2 = r * r;
    double ps = -1.0 / 1307674368000.0;
    ps = ps * r2 + 1.0 / 6227020800.0;
    ps = ps * r2 - 1.0 / 39916800.0;
    ps = ps * r2 + 1.0 / 362880.0;
    ps = ps * r2 - 1.0 / 5040.0;
    ps = ps * r2 + 1.0 / 120.0;
    ps = ps * r2 - 1.0 / 6.0;
    double sr = r + r * r2 * ps;
    double pc = 1.0 / 20922789888000.0;
    pc = pc * r2 - 1.0 / 87178291200.0;
    pc = pc * r2 + 1.0 / 479001600.0;
    pc = pc * r2 - 1.0 / 3628800.0;
    pc = pc * r2 + 1.0 / 40320.0;
    pc = pc * r2 - 1.0 / 720.0;
    pc = pc * r2 + 1.0 / 24.0;
    pc = pc * r2 - 0.5;
    double cr = 1.0 + r2 * pc;
    int sw = n & 1;
    double a = sw ? cr : sr, b = sw ? sr : cr;
    *s = (n & 2) ? -a : a;
    *c = ((n + 1) & 2) ? -b : b;
}
static inline float vm_exp_f(float x)
{
    x = fabsf(x) > 87.0f ? copysignf(87.0f, x) : x;
    float kd = x * 1.44269504f + 12582912.0f; /* 1.5 2^23 */
    unsigned int vu, eu;
    float scale;
    memcpy(&vu, &kd, sizeof vu);
    float n = kd - 12582912.0f;
    float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    eu = (vu + 127u) << 23;
    memcpy(&scale, &eu, sizeof scale);
    return p * scale;
}
static inline void vm_sincos_f(float x, float *s, float *c)
{
    float t = x * 0.636619772f;
    int n = (int)(t + (t >= 0 ? 0.5f : -0.5f));
    float r = ((x - n * 1.5703125f) - n * 4.83751297e-4f) - n * 7.54978995e-8f;
    float r2 = r * r;
    float ps = -1.0f / 39916800.0f;
    ps = ps * r2 + 1.0f / 362880.0f;
    ps = ps * r2 - 1.0f / 5040.0f;
    ps = ps * r2 + 1.0f / 120.0f;
    ps = ps * r2 - 1.0f / 6.0f;
    float sr = r + r * r2 * ps;
    float pc = 1.0f / 479001600.0f;
    pc = pc * r2 - 1.0f / 3628800.0f;
    pc = pc * r2 + 1.0f / 40320.0f;
    pc = pc * r2 - 1.0f / 720.0f;
    pc = pc * r2 + 1.0f / 24.0f;
    pc = pc * r2 - 0.5f;
    float cr = 1.0f + r2 * pc;
    int sw = n & 1;
    float a = sw ? cr : sr, b = sw ? sr : cr;
    *s = (n & 2) ? -a : a;
    *c = ((n + 1) & 2) ? -b : b;
}

#endif /* NLSEPY_DIPOLAR_VMATH_H */
