"""nl.DecGPE(..., comm=) under mpirun: the rank-side tests of
tests/dec/ranks_dec.py on 2 and 3 ranks (7 layers of blocks along z, which
neither divides).  Skipped where MPI, mpi4py or nlsepy's MPI layer is
missing."""

import os

from _helpers import rank_tests  # noqa: E402

RANKS = os.path.join(os.path.dirname(__file__), "ranks_dec.py")

test_distributed_dec_gpe, test_distributed_dec_gpe_gpu = rank_tests(RANKS)
