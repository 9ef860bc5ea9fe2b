/*
 * dec_tuning.h -- the tuning switches of the DEC GPE's CUDA backend
 * (cuda/dec/dec.cu): the kernel form and the launch and tile shapes that
 * the backend otherwise chooses from the grid and the device.  They are
 * read from the environment once, by dec_tuning_read when a solver is
 * created, and kept in the solver; the kernels and launchers read the
 * struct.  A value that is unset, empty or outside the accepted range
 * leaves the backend's own choice, but for NLSEPY_DEC_KERNEL, whose every
 * integer (as atoi reads it) is taken: one that names no form in launch_n
 * takes its last case, the plain loop.  The declared table of the
 * switches, with their values and meaning, is
 * python/nlsepy/common/tuning.py.
 */
#ifndef NLSEPY_DEC_TUNING_H
#define NLSEPY_DEC_TUNING_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dec_tuning {
    int kernel;             /* NLSEPY_DEC_KERNEL: the kernel form of every
                               launch (launch_n), < 0: by the grid          */
    double tile_mib;        /* NLSEPY_DEC_TILE_MIB: MiB of psi(n) a y tile of
                               the row forms holds (> 0; 8)                 */
    unsigned tile_rows;     /* NLSEPY_DEC_TILE_ROWS: rows of a y tile of the
                               row forms, 0: from tile_mib                  */
    unsigned blocks_per_sm; /* NLSEPY_DEC_BLOCKS_PER_SM: thread blocks an SM
                               of the row forms, 0: as many as fit          */
    unsigned march_ring;    /* NLSEPY_DEC_MARCH_RING: plane slots of
                               k_march's ring (4, 5 or 6), 0: chosen        */
    unsigned march_tx;      /* NLSEPY_DEC_MARCH_TILE=TXxTY: k_march's tile  */
    unsigned march_ty;      /* in blocks, 0 x 0: chosen                     */
    unsigned march_chunks;  /* NLSEPY_DEC_MARCH_CHUNKS: chunks of layers of
                               k_march, 0: chosen                           */
    unsigned march_band;    /* NLSEPY_DEC_MARCH_BAND: tile columns of a band
                               of k_march's order, 0: chosen                */
} dec_tuning;

/* Fill *t from the environment (the defaults where a switch is unset). */
void dec_tuning_read(dec_tuning *t);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_DEC_TUNING_H */
