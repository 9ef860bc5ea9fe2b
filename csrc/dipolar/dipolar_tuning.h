/*
 * dipolar_tuning.h -- the tuning switches of the distributed dipolar GPE
 * (the CPU ranks of dipolar_slab.c and the GPU slabs of
 * cuda/dipolar/dipolar_dist.cu): the path of the x solve across the slabs
 * and the path of the GPU slabs' transposes.  They are read from the
 * environment once, by dipolar_tuning_read when a distributed solver is
 * created, and kept in the solver.  Every value other than the named ones
 * leaves the default.  The declared table of the switches, with their
 * values and meaning, is python/nlsepy/common/tuning.py.
 */
#ifndef NLSEPY_DIPOLAR_TUNING_H
#define NLSEPY_DIPOLAR_TUNING_H

#ifdef __cplusplus
extern "C" {
#endif

/* NLSEPY_DIPOLAR_COPY: how a GPU slab's transposes move their blocks. */
enum dipolar_copy_choice {
    DIPOLAR_COPY_AUTO = 0,    /* unset or any other value: the SMs for the
                                 blocks of ranks sharing this GPU, else the
                                 copy engines                                */
    DIPOLAR_COPY_ENGINES = 1, /* "engines": the copy engines for every rank  */
    DIPOLAR_COPY_KERNEL = 2   /* "kernel": the SMs (k_copy2d) for every rank  */
};

typedef struct dipolar_tuning {
    int xsolve; /* NLSEPY_DIPOLAR_XSOLVE: this process's choice of the x
                   solve, NLSE_DIPOLAR_XSOLVE_TRANSPOSE for "transpose", else
                   NLSE_DIPOLAR_XSOLVE_SUBSTRUCTURE (the ranks take the
                   highest choice of any rank)                              */
    int copy;   /* enum dipolar_copy_choice                                 */
} dipolar_tuning;

/* Fill *t from the environment (the defaults where a switch is unset). */
void dipolar_tuning_read(dipolar_tuning *t);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_DIPOLAR_TUNING_H */
