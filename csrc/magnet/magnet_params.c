/*
 * magnet_params.c -- what every backend of the magnet-design Laplace
 * solver shares: parameter checks with named errors, the grid (magnet edges
 * on grid lines), the rows of Table 2.1 of Madhubhashini's thesis as row
 * descriptors (eq. 2.38 scaling, z up, cap condition dPhi/dz = -B/mu0 of
 * Table 1.1), and the omega estimate of eqs. 2.44 and A.1.
 */
#include <math.h>
#include "magnet_internal.h"

static int whole(double len, double h, const char *name, int *n)
{
    double q = len / h;
    long k = lround(q);
    if (k < 1 || fabs(q - (double)k) > 1e-9 * (q > 1 ? q : 1))
        return nlse_fail(NLSE_ERR_VALUE,
                         "%s = %g must be a whole number of mesh spacings (%g): the magnet's "
                         "edges and the outer faces lie on grid lines", name, len, h);
    if (k > (1L << 24))
        return nlse_fail(NLSE_ERR_VALUE, "%s / spacing = %ld nodes is too many", name, k);
    *n = (int)k;
    return NLSE_OK;
}

int nlse_magnet_check_params(const nlse_magnet_params *p)
{
    const double v[6] = {p->r0, p->z0, p->r1, p->z1, p->dr, p->dz};
    const char *nm[6] = {"r0", "z0", "r1", "z1", "dr", "dz"};
    for (int q = 0; q < 6; ++q)
        if (!(v[q] > 0) || !isfinite(v[q]))
            return nlse_fail(NLSE_ERR_VALUE, "%s must be a finite number > 0, got %g", nm[q], v[q]);
    if (!isfinite(p->B))
        return nlse_fail(NLSE_ERR_VALUE, "B must be finite, got %g", p->B);
    if (!(p->r0 < p->r1))
        return nlse_fail(NLSE_ERR_VALUE, "r0 = %g must be smaller than r1 = %g", p->r0, p->r1);
    if (!(p->z0 < p->z1))
        return nlse_fail(NLSE_ERR_VALUE, "z0 = %g must be smaller than z1 = %g", p->z0, p->z1);
    if (p->dtype != NLSE_COMPLEX64 && p->dtype != NLSE_COMPLEX128)
        return nlse_fail(NLSE_ERR_TYPE, "dtype must be 0 (float) or 1 (double), got %d", p->dtype);
    magnet_geom g;
    return magnet_make_geom(p, &g);
}

int magnet_check_create(const nlse_magnet_params *p, nlse_magnet **out)
{
    if (!p || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_create: NULL argument");
    *out = NULL;
    return nlse_magnet_check_params(p);
}

int magnet_make_geom(const nlse_magnet_params *p, magnet_geom *g)
{
    int st;
    if ((st = whole(p->r0, p->dr, "r0", &g->i0)) || (st = whole(p->r1, p->dr, "r1", &g->i1)) ||
        (st = whole(p->z0, p->dz, "z0", &g->j0)) || (st = whole(p->z1, p->dz, "z1", &g->j1)))
        return st;
    g->nr = (size_t)g->i1 + 1;
    g->nz = (size_t)g->j1 + 1;
    g->gamma = (p->dr / p->dz) * (p->dr / p->dz);
    g->cap = -2.0 * g->gamma * p->B * p->dz / MAGNET_MU0;
    /* f is nonzero on the cap rows only: corner C, the cap, corner D */
    g->fnorm = fabs(g->cap) * sqrt((double)g->i0 + 1.0);
    return NLSE_OK;
}

void magnet_make_rows(const magnet_geom *g, magnet_row *rows)
{
    const double gm = g->gamma;
    for (int i = 0; i <= g->i1; ++i) {
        magnet_row *R = &rows[i];
        double a, b;
        if (i == 0) {               /* boundary 3, corners A and C (eq. 2.28) */
            a = 4.0;
            b = 0.0;
        } else if (i == g->i1) {    /* boundary 2, corner B (eq. 2.23) */
            a = 0.0;
            b = 2.0;
        } else {                    /* eq. 2.18, alpha = 1 / (2i) */
            a = 1.0 + 0.5 / i;
            b = 1.0 - 0.5 / i;
        }
        R->a1 = R->a2 = a;
        R->b1 = R->b2 = b;
        R->e = i == 0 ? -2.0 * (2.0 + gm) : -2.0 * (1.0 + gm);
        R->js = i < g->i0 ? g->j0 : 1;
        R->je = g->j1;
        R->jcap = i <= g->i0 ? g->j0 : -1;
        R->split = R->js;
        if (i == g->i0) {           /* boundary 5 and corner D: ghost mirrors outwards (eq. 2.32) */
            R->a1 = 2.0;
            R->b1 = 0.0;
            R->split = g->j0 + 1;
        }
    }
}

void magnet_make_rows_dirichlet(const magnet_geom *g, magnet_row *rows)
{
    magnet_make_rows(g, rows);
    for (int i = 0; i <= g->i1; ++i) {
        magnet_row *R = &rows[i];
        if (i <= g->i0)
            R->js = g->j0 + 1;                  /* cap, side, corners C and D fixed */
        R->je = i == g->i1 ? R->js - 1 : g->j1 - 1; /* outer cylinder and top fixed */
        R->jcap = -1;
        R->split = R->js;
        if (i == g->i0) {
            R->a1 = R->a2;
            R->b1 = R->b2;
        }
    }
}

double nlse_magnet_omega_estimate(const nlse_magnet_params *p)
{
    const double g = (p->dr / p->dz) * (p->dr / p->dz);
    const double J = p->r1 / p->dr, L = p->z1 / p->dz;
    const double pi = 3.14159265358979323846;
    const double rho = (cos(pi / (3.0 * J)) + g * cos(pi / (3.0 * L))) / (1.0 + g);
    return 2.0 / (1.0 + sqrt(1.0 - rho * rho));
}
