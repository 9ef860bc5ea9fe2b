/*
 * mbloch_tuning.h -- the tuning switches of the Maxwell-Bloch solver's
 * CUDA backend (cuda/mbloch/mbloch.cu): the atom kernel, the atoms a
 * thread block of the plain kernel takes and the z slices a launch of the
 * tensor-core kernel holds.  They are read from the environment once, by
 * mbloch_tuning_read when a solver is created, and kept in the solver.
 * Every value that is unset, empty or not accepted leaves the backend's
 * own choice.  The declared table of the switches, with their values and
 * meaning, is python/nlsepy/common/tuning.py.
 *
 * Two more switches of the float kernel's stage barrier are build-time
 * macros, not read here (NLSEPY_MBLOCH_SYNCTHREADS, NLSEPY_MBLOCH_ARRIVE_ALL;
 * cuda/mbloch/mbloch_tcf.cuh, the CMake cache entry NLSEPY_MBLOCH_CUDA_DEFS).
 */
#ifndef NLSEPY_MBLOCH_TUNING_H
#define NLSEPY_MBLOCH_TUNING_H

#ifdef __cplusplus
extern "C" {
#endif

/* NLSEPY_MBLOCH_KERNEL: the atom kernel. */
enum mbloch_kernel_choice {
    MBLOCH_KERNEL_AUTO = 0, /* unset, "tc" or any other value: by the device */
    MBLOCH_KERNEL_SIMT = 1, /* "simt": the plain kernel                      */
    MBLOCH_KERNEL_TC64 = 2, /* "tc64": the FP64 tensor-core kernel for float too */
    MBLOCH_KERNEL_TCF = 3   /* "tcf": the mma.sync float kernel, not the warpgroup one */
};

typedef struct mbloch_tuning {
    int kernel;          /* enum mbloch_kernel_choice                        */
    int atoms_per_block; /* NLSEPY_MBLOCH_ATOMS_PER_BLOCK: atoms a block of the
                            plain kernel (1, 2, 4, 8, 16 or 32), 0: chosen  */
    int pipe;            /* NLSEPY_MBLOCH_PIPE: most z slices a launch of the
                            tensor-core kernel (>= 1), 0: no cap            */
} mbloch_tuning;

/* Fill *t from the environment (the defaults where a switch is unset). */
void mbloch_tuning_read(mbloch_tuning *t);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_MBLOCH_TUNING_H */
