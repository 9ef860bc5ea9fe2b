/*
 * mbloch_open.h -- the CPU density-matrix atoms of an open Maxwell-Bloch
 * solver (mbloch_open.c), called by mbloch.c.
 */
#ifndef NLSEPY_MBLOCH_OPEN_H
#define NLSEPY_MBLOCH_OPEN_H

#include "nlsepy/mbloch.h"

typedef struct mbloch_ocpu mbloch_ocpu;

/* Check the open system op against p and copy what the march needs. */
int mbloch_ocpu_create(const nlse_mbloch_params *p, const double *F, const double *det, const double *weights,
                       const nlse_mbloch_open *op, mbloch_ocpu **out);
void mbloch_ocpu_destroy(mbloch_ocpu *o);

/* Every atom at `fields`: P = scale * sum_D w_D sum F rho_{b a} (2 n_t N_F),
 * rho (when not NULL) = sum_D w_D rho_D (2 n_t n_lev^2), *dev = max(*dev,
 * |Tr rho - 1|). */
int mbloch_ocpu_atoms(mbloch_ocpu *o, const double *fields, double scale, double *P, double *rho, double *dev);

#endif /* NLSEPY_MBLOCH_OPEN_H */
