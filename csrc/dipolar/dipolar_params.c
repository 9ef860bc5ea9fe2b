/*
 * dipolar_params.c -- what every backend of the split-step dipolar GPE solver
 * shares (Loncar, thesis, chapter 2): parameter checks with named errors,
 * the internal layout, the Crank-Nicolson coefficients (eqs. 2.29-2.34,
 * 2.42), the dipolar kernels (3D with a spherical cutoff; h2D eq. 2.13,
 * j2D eq. 2.15, j1D eq. 2.18, h1D eq. 2.20) and the obstacle of eq. 9.1.
 */
#include <math.h>
#include <string.h>
#include "dipolar_params.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static const char *geom_name[] = {"3d", "2d-xy", "2d-xz", "1d-x", "1d-z"};

const char *dipolar_geometry_name(int geometry)
{
    return geometry >= 0 && geometry <= 4 ? geom_name[geometry] : "?";
}

int nlse_dipolar_ndim(int geometry)
{
    switch (geometry) {
    case NLSE_DIPOLAR_3D: return 3;
    case NLSE_DIPOLAR_2D_XY:
    case NLSE_DIPOLAR_2D_XZ: return 2;
    case NLSE_DIPOLAR_1D_X:
    case NLSE_DIPOLAR_1D_Z: return 1;
    default: return 0;
    }
}

void dipolar_make_layout(const nlse_dipolar_params *p, dipolar_layout *L)
{
    L->ndim = nlse_dipolar_ndim(p->geometry);
    L->off = 3 - L->ndim;
    L->N = 1;
    for (int q = 0; q < 3; ++q) {
        int a = q - L->off;
        L->n[q] = a >= 0 ? p->shape[a] : 1;
        L->h[q] = a >= 0 ? p->spacing[a] : 1.0;
        L->N *= L->n[q];
    }
    const int plane = p->geometry == NLSE_DIPOLAR_3D || p->geometry == NLSE_DIPOLAR_2D_XY;
    L->rq[0] = plane ? L->off : -1;
    L->rq[1] = plane ? L->off + 1 : -1;
}

double dipolar_coord(size_t i, size_t n, double h)
{
    return ((double)i - (double)(n / 2)) * h;
}

double dipolar_simpson(size_t i, size_t n, double h)
{
    double c = (i == 0 || i == n - 1) ? 1.0 : (i % 2 ? 4.0 : 2.0);
    return c * h / 3.0;
}

/* ------------------------------------------------------------------ */
/* special functions of the reduced dipolar kernels                   */
/* ------------------------------------------------------------------ */

/* 1 + 3 cos(x)/x^2 - 3 sin(x)/x^3, the spherical-cutoff factor; its series
 * 3 sum_{m>=2} (-1)^m 2m x^(2m-2) / (2m+1)! near 0. */
static double cutoff_factor(double x)
{
    if (x < 0.5) {
        double x2 = x * x, term = 1.0, sum = 0.0, fact = 120.0; /* (2m+1)! at m = 2 */
        for (int m = 2; m < 12; ++m) {
            double sgn = (m % 2) ? -1.0 : 1.0;
            sum += sgn * 2.0 * m * term / fact;
            term *= x2;
            fact *= (2.0 * m + 2.0) * (2.0 * m + 3.0);
        }
        return 3.0 * x2 * sum;
    }
    return 1.0 + 3.0 * cos(x) / (x * x) - 3.0 * sin(x) / (x * x * x);
}

/* F(xi) = sqrt(pi) xi exp(xi^2) erfc(xi); the asymptotic series beyond 26
 * (where exp(xi^2) erfc(xi) underflows). */
static double F_erfcx(double xi)
{
    if (xi <= 0)
        return 0.0;
    if (xi < 26.0)
        return sqrt(M_PI) * xi * exp(xi * xi) * erfc(xi);
    double u = 1.0 / (2.0 * xi * xi), t = 1.0, sum = 1.0;
    for (int m = 1; m < 8; ++m) {
        t *= -(2.0 * m - 1.0) * u;
        sum += t;
    }
    return sum;
}

/* G(u) = u exp(u) E1(u): series for u <= 1, continued fraction beyond. */
static double G_e1(double u)
{
    if (u <= 0)
        return 0.0;
    if (u <= 1.0) {
        const double euler = 0.57721566490153286061;
        double sum = 0.0, term = 1.0;
        for (int m = 1; m < 40; ++m) {
            term *= -u / m;
            sum += term / m; /* (-u)^m / (m m!) */
        }
        return u * exp(u) * (-euler - log(u) - sum);
    }
    /* modified Lentz on E1(u) e^u = 1/(u+1- 1/(u+3- 4/(u+5- ...))) */
    double b = u + 1.0, c = 1.0 / 1e-300, d = 1.0 / b, h = d;
    for (int m = 1; m < 200; ++m) {
        double an = -(double)m * m;
        b += 2.0;
        d = 1.0 / (an * d + b);
        c = b + an / c;
        double del = c * d;
        h *= del;
        if (fabs(del - 1.0) < 1e-16)
            break;
    }
    return u * h;
}

static double freq(size_t i, size_t n, double h)
{
    double dk = 2.0 * M_PI / ((double)n * h);
    return (i < n / 2 ? (double)i : (double)i - (double)n) * dk;
}

/* Kernel value at the r2c frequency (i, j, k) of the internal grid. */
double dipolar_kernel_value(const nlse_dipolar_params *p, const dipolar_layout *L, size_t i, size_t j, size_t k)
{
    double kv[3] = {freq(i, L->n[0], L->h[0]), freq(j, L->n[1], L->h[1]),
                    freq(k, L->n[2], L->h[2])};
    for (int q = 0; q < L->off; ++q)
        kv[q] = 0;
    double k2 = kv[0] * kv[0] + kv[1] * kv[1] + kv[2] * kv[2];
    double kk = sqrt(k2);
    switch (p->geometry) {
    case NLSE_DIPOLAR_3D: {
        if (k2 == 0)
            return 0.0;
        double v = 4.0 * M_PI / 3.0 * (3.0 * kv[2] * kv[2] / k2 - 1.0);
        return p->cutoff > 0 ? v * cutoff_factor(kk * p->cutoff) : v;
    }
    case NLSE_DIPOLAR_2D_XY: /* h2D(k / sqrt(2 lambda)), eq. 2.13 */
        return 2.0 - 3.0 * F_erfcx(kk / p->kscale);
    case NLSE_DIPOLAR_2D_XZ: /* j2D(k / sqrt(2 nu), k_z), eq. 2.15, k_z = last axis */
        if (k2 == 0)
            return -1.0;
        return -1.0 + 3.0 * (kv[2] * kv[2] / k2) * F_erfcx(kk / p->kscale);
    case NLSE_DIPOLAR_1D_X: { /* j1D, eq. 2.18 in closed form */
        double xi = kk / p->kscale;
        return 0.5 - 1.5 * G_e1(xi * xi);
    }
    case NLSE_DIPOLAR_1D_Z: { /* h1D, eq. 2.20 in closed form */
        double xi = kk / p->kscale;
        return 3.0 * G_e1(xi * xi) - 1.0;
    }
    }
    return 0.0;
}

int dipolar_check_params(const nlse_dipolar_params *p)
{
    int nd = nlse_dipolar_ndim(p->geometry);
    if (!nd)
        return nlse_fail(NLSE_ERR_VALUE, "geometry must be 0-4 (3d, 2d-xy, 2d-xz, 1d-x, 1d-z), got %d",
                         p->geometry);
    if (p->dtype != NLSE_COMPLEX64 && p->dtype != NLSE_COMPLEX128)
        return nlse_fail(NLSE_ERR_TYPE, "dtype must be COMPLEX64 or COMPLEX128, got %d", p->dtype);
    for (int a = 0; a < nd; ++a) {
        if (p->shape[a] < 4)
            return nlse_fail(NLSE_ERR_VALUE, "shape[%d] must be >= 4 points, got %zu", a,
                             p->shape[a]);
        if (p->shape[a] > (size_t)1 << 30)
            return nlse_fail(NLSE_ERR_VALUE, "shape[%d] = %zu is too large", a, p->shape[a]);
        if (!(p->spacing[a] > 0) || !isfinite(p->spacing[a]))
            return nlse_fail(NLSE_ERR_VALUE, "spacing[%d] must be finite and > 0, got %g", a,
                             p->spacing[a]);
        if (!isfinite(p->trap[a]) || p->trap[a] < 0)
            return nlse_fail(NLSE_ERR_VALUE, "trap[%d] must be finite and >= 0, got %g", a,
                             p->trap[a]);
    }
    if (!(p->dt > 0) || !isfinite(p->dt))
        return nlse_fail(NLSE_ERR_VALUE, "dt must be finite and > 0, got %g", p->dt);
    if (!(p->kin > 0) || !isfinite(p->kin))
        return nlse_fail(NLSE_ERR_VALUE, "kin must be finite and > 0, got %g", p->kin);
    if (!isfinite(p->g))
        return nlse_fail(NLSE_ERR_VALUE, "g must be finite, got %g", p->g);
    if (!isfinite(p->gdd))
        return nlse_fail(NLSE_ERR_VALUE, "gdd must be finite, got %g", p->gdd);
    if (!isfinite(p->cutoff))
        return nlse_fail(NLSE_ERR_VALUE, "cutoff must be finite, got %g", p->cutoff);
    if (!p->dipolar && p->gdd != 0)
        return nlse_fail(NLSE_ERR_VALUE, "gdd = %g needs the dipolar step (dipolar = 1)", p->gdd);
    if (p->fft_effort < 0 || p->fft_effort > 2)
        return nlse_fail(NLSE_ERR_VALUE, "fft_effort must be 0, 1 or 2, got %d", p->fft_effort);
    return NLSE_OK;
}


int dipolar_check_dipolar(const nlse_dipolar_params *p)
{
    int nd = nlse_dipolar_ndim(p->geometry);
    for (int a = 0; a < nd; ++a)
        if (p->shape[a] % 2)
            return nlse_fail(NLSE_ERR_VALUE,
                             "shape[%d] = %zu must be even with the dipolar term (the FFT grid "
                             "puts x = 0 at index n/2 of a symmetric box)", a, p->shape[a]);
    if (p->geometry != NLSE_DIPOLAR_3D && (!(p->kscale > 0) || !isfinite(p->kscale)))
        return nlse_fail(NLSE_ERR_VALUE,
                         "kscale (sqrt(2 x confining frequency)) must be finite and > 0 for the "
                         "dipolar term in the %s geometry, got %g", geom_name[p->geometry],
                         p->kscale);
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* Crank-Nicolson recursion coefficients                              */
/* ------------------------------------------------------------------ */

void dipolar_cn_coefficients(double r, size_t n, double *alpha_r, double *gamma_r, double *alpha_c,
                        double *gamma_c, dipolar_cn_scalars *sc)
{
    if (n < 3)
        return;
    /* imaginary time: A = -r/2, A0 = 1 + r, A0r = 1 - r (eq. 2.42) */
    {
        double A = -0.5 * r, A0 = 1.0 + r, g = -1.0 / A0, al = 0.0;
        sc->A_r = A;
        sc->A0r_r = 1.0 - r;
        alpha_r[n - 2] = 0.0;
        gamma_r[n - 2] = g;
        alpha_r[n - 1] = gamma_r[n - 1] = 0.0;
        for (size_t i = n - 2; i > 0; --i) {
            al = A * g;
            g = -1.0 / (A0 + A * al);
            alpha_r[i - 1] = al;
            gamma_r[i - 1] = g;
        }
    }
    /* real time: A = -i r/2, A0 = 1 + i r, A0r = 1 - i r (eqs. 2.29-2.31): a
     * rotating sweep's line without drift (the same operations) */
    double ap[2];
    dipolar_rot_line(r, 0.0, 1, n, sc->A_c, ap, alpha_c, gamma_c);
    sc->A0r_c[0] = 1.0;
    sc->A0r_c[1] = -r;
}

/* One line of a rotating sweep (the x or y solve with the first-derivative
 * term of -w L_z, the scheme of BEC-GP-ROT-OMP): H_line = -kin d^2 + i c d
 * with the line's drift c (x sweep: -w y, y sweep: w x); r = dt kin / h^2,
 * sd = dt c / (4 h).  The left-hand side's off-diagonals am (below), ap
 * (above), its diagonal A0 and the recursions alpha_{i-1} = am gamma_i,
 * gamma_{i-1} = -1 / (A0 + ap alpha_{i-1}) (eqs. 2.32-2.34 with am != ap);
 * imaginary time: A0 = 1 + r, real time: A0 = 1 + i r.  All complex,
 * interleaved; alpha and gamma hold n values. */
void dipolar_rot_line(double r, double sd, int real_time, size_t n, double *am, double *ap,
                      double *alpha, double *gamma)
{
    /* A = -tau kin / h^2 and q = tau i c / (2 h), tau = dt/2 or i dt/2 */
    const double Ar = real_time ? 0.0 : -0.5 * r, Ai = real_time ? -0.5 * r : 0.0;
    const double qr = real_time ? -sd : 0.0, qi = real_time ? 0.0 : sd;
    const double d0r = real_time ? 1.0 : 1.0 + r, d0i = real_time ? r : 0.0; /* A0 */
    am[0] = Ar - qr;
    am[1] = Ai - qi;
    ap[0] = Ar + qr;
    ap[1] = Ai + qi;
    if (n < 3)
        return;
    const double dd = d0r * d0r + d0i * d0i;
    double gr = -d0r / dd, gi = d0i / dd; /* -1 / A0 */
    alpha[2 * (n - 2)] = alpha[2 * (n - 2) + 1] = 0.0;
    gamma[2 * (n - 2)] = gr;
    gamma[2 * (n - 2) + 1] = gi;
    alpha[2 * (n - 1)] = alpha[2 * (n - 1) + 1] = 0.0;
    gamma[2 * (n - 1)] = gamma[2 * (n - 1) + 1] = 0.0;
    for (size_t i = n - 2; i > 0; --i) {
        double alr = am[0] * gr - am[1] * gi, ali = am[0] * gi + am[1] * gr;
        double er = d0r + (ap[0] * alr - ap[1] * ali), ei = d0i + (ap[0] * ali + ap[1] * alr);
        double ee = er * er + ei * ei;
        gr = -er / ee;
        gi = ei / ee;
        alpha[2 * (i - 1)] = alr;
        alpha[2 * (i - 1) + 1] = ali;
        gamma[2 * (i - 1)] = gr;
        gamma[2 * (i - 1) + 1] = gi;
    }
}

int dipolar_check_rotation(const nlse_dipolar_params *p, double w)
{
    if (!isfinite(w))
        return nlse_fail(NLSE_ERR_VALUE, "omega must be finite, got %g", w);
    if (w != 0 && p->geometry != NLSE_DIPOLAR_3D && p->geometry != NLSE_DIPOLAR_2D_XY)
        return nlse_fail(NLSE_ERR_VALUE,
                         "rotation about z needs the x-y plane: geometry \"3d\" or \"2d-xy\", "
                         "not \"%s\"", dipolar_geometry_name(p->geometry));
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* obstacle, steps, couplings                                         */
/* ------------------------------------------------------------------ */

int dipolar_check_obstacle(const nlse_dipolar_obstacle *o, int ndim)
{
    const double v[6] = {o->V0, o->sigma, o->velocity, o->start, o->t_move, o->t_off};
    const char *nm[6] = {"V0", "sigma", "velocity", "start", "t_move", "t_off"};
    for (int q = 0; q < 6; ++q)
        if (isnan(v[q]) || (q < 4 && !isfinite(v[q])))
            return nlse_fail(NLSE_ERR_VALUE, "obstacle %s must be %s, got %g", nm[q],
                             q < 4 ? "finite" : "a number", v[q]);
    if (!(o->sigma > 0))
        return nlse_fail(NLSE_ERR_VALUE, "obstacle sigma must be > 0, got %g", o->sigma);
    if (o->t_move < 0 || o->t_off < 0)
        return nlse_fail(NLSE_ERR_VALUE, "obstacle t_move and t_off must be >= 0, got %g and %g",
                         o->t_move, o->t_off);
    if (o->move_axis < 0 || o->move_axis >= ndim)
        return nlse_fail(NLSE_ERR_VALUE, "obstacle move_axis must be 0..%d, got %d", ndim - 1,
                         o->move_axis);
    if (o->beam_axis < -1 || o->beam_axis >= ndim || o->beam_axis == o->move_axis)
        return nlse_fail(NLSE_ERR_VALUE,
                         "obstacle beam_axis must be -1 or a solver axis other than move_axis, got %d",
                         o->beam_axis);
    return NLSE_OK;
}

double dipolar_obst_centre(const nlse_dipolar_obstacle *o, double t)
{
    double tm = t < o->t_move ? t : o->t_move;
    if (tm < 0)
        tm = 0;
    return o->start + o->velocity * tm;
}

double dipolar_obst_amp(const nlse_dipolar_obstacle *o, double t)
{
    if (t <= o->t_move)
        return o->V0;
    if (o->t_off <= 0 || t >= o->t_move + o->t_off)
        return 0.0;
    return o->V0 * (1.0 - (t - o->t_move) / o->t_off);
}

int dipolar_check_step(int mode, long n, double t0, double dg, double dgdd)
{
    if (mode != NLSE_DIPOLAR_IMAG && mode != NLSE_DIPOLAR_REAL)
        return nlse_fail(NLSE_ERR_VALUE, "mode must be 0 (imaginary) or 1 (real time), got %d", mode);
    if (n < 0)
        return nlse_fail(NLSE_ERR_VALUE, "steps must be >= 0, got %ld", n);
    if (!isfinite(t0) || !isfinite(dg) || !isfinite(dgdd))
        return nlse_fail(NLSE_ERR_VALUE, "t0, dg and dgdd must be finite");
    return NLSE_OK;
}

int dipolar_check_record(const nlse_dipolar_record *rec, long n)
{
    if (!rec)
        return NLSE_OK;
    if (rec->every < 1)
        return nlse_fail(NLSE_ERR_VALUE, "record.every must be >= 1, got %ld", rec->every);
    if (rec->phase < 0 || rec->phase >= rec->every)
        return nlse_fail(NLSE_ERR_VALUE, "record.phase must be 0..%ld (below every), got %ld",
                         rec->every - 1, rec->phase);
    if (!rec->out && nlse_dipolar_record_rows(rec, n) > 0)
        return nlse_fail(NLSE_ERR_VALUE, "record.out is NULL for %ld rows",
                         nlse_dipolar_record_rows(rec, n));
    return NLSE_OK;
}

void dipolar_record_row(double *row, double nrm, const double *T, int off, int imag)
{
    row[0] = imag ? nrm / nrm : nrm;
    for (int a = 0; a < 3; ++a) {
        const int q = a + off;
        row[1 + a] = q < 3 ? (imag ? T[q] / nrm : T[q]) : 0.0;
    }
}

int dipolar_check_couplings(double g, double gdd)
{
    if (!isfinite(g))
        return nlse_fail(NLSE_ERR_VALUE, "g must be finite, got %g", g);
    if (!isfinite(gdd))
        return nlse_fail(NLSE_ERR_VALUE, "gdd must be finite, got %g", gdd);
    return NLSE_OK;
}

void dipolar_obs_energies(double kin, double pot, double cont, double dd, double qf, double lz,
                          double w, nlse_dipolar_obs *o)
{
    double mu = kin + pot + cont + dd, e = kin + pot + 0.5 * (cont + dd);
    if (qf != 0) { /* mu counts q |Psi|^5 once, the energy (2/5) of it */
        mu += qf;
        e += 0.4 * qf;
    }
    o->kinetic = kin;
    o->lz = lz;
    o->mu = mu - w * lz; /* the rotating frame's */
    o->energy = e - w * lz;
    o->potential = pot;
    o->contact = 0.5 * cont;
    o->dipolar = 0.5 * dd;
    o->lhy = 0.4 * qf;
}

int dipolar_check_lhy(double q)
{
    if (!isfinite(q) || q < 0)
        return nlse_fail(NLSE_ERR_VALUE, "gqf (the Lee-Huang-Yang coefficient) must be finite "
                         "and >= 0, got %g", q);
    return NLSE_OK;
}

int dipolar_check_dt(double dt)
{
    if (!(dt > 0) || !isfinite(dt))
        return nlse_fail(NLSE_ERR_VALUE, "dt must be finite and > 0, got %g", dt);
    return NLSE_OK;
}

int dipolar_check_finite(const void *a, size_t count, int dtype, int per_point, const char *name)
{
    for (size_t q = 0; q < count; ++q) {
        double v = dtype == NLSE_COMPLEX64 ? ((const float *)a)[q] : ((const double *)a)[q];
        if (!isfinite(v))
            return nlse_fail(NLSE_ERR_VALUE, "%s contains a non-finite value at flat index %zu",
                             name, q / (size_t)per_point);
    }
    return NLSE_OK;
}

/* A slab's layout (dipolar_params.h). */
int dipolar_check_slab(const nlse_dipolar_params *p, int rank, int size, const size_t *xcount,
                       const size_t *ycount)
{
    if (p->geometry != NLSE_DIPOLAR_3D)
        return nlse_fail(NLSE_ERR_VALUE, "a distributed run is of the 3d geometry, got %s",
                         dipolar_geometry_name(p->geometry));
    if (size < 1 || rank < 0 || rank >= size)
        return nlse_fail(NLSE_ERR_VALUE, "rank must be 0..%d, got %d", size - 1, rank);
    size_t sx = 0, sy = 0;
    for (int r = 0; r < size; ++r) {
        if (xcount[r] < 2)
            return nlse_fail(NLSE_ERR_VALUE, "every rank needs 2 x rows or more (the five-point "
                             "derivative of the observables), rank %d has %zu of the %zu: use "
                             "at most %zu ranks", r, xcount[r], p->shape[0], p->shape[0] / 2);
        sx += xcount[r];
        sy += ycount[r];
    }
    if (sx != p->shape[0] || sy != p->shape[1])
        return nlse_fail(NLSE_ERR_VALUE, "the ranks' rows must tile the grid: %zu x rows and "
                         "%zu y rows for a grid of %zu x %zu", sx, sy, p->shape[0], p->shape[1]);
    return NLSE_OK;
}

void dipolar_slab_layout(size_t *t, int size, const size_t *xcount, const size_t *ycount)
{
    const size_t P = (size_t)size;
    size_t *xc = t, *xs = t + P, *yc = t + 2 * P, *ys = t + 3 * P;
    for (size_t r = 0; r < P; ++r) {
        xc[r] = xcount[r];
        yc[r] = ycount[r];
        xs[r] = r ? xs[r - 1] + xc[r - 1] : 0;
        ys[r] = r ? ys[r - 1] + yc[r - 1] : 0;
    }
}
