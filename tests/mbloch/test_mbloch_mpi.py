"""nl.MaxwellBloch(..., comm=) under mpirun: the rank-side tests of
tests/mbloch/ranks_mbloch.py on 2 and 3 ranks (13 atoms, which neither
divides).  Skipped where MPI, mpi4py or nlsepy's MPI layer is missing."""

import os

from _helpers import rank_tests  # noqa: E402

RANKS = os.path.join(os.path.dirname(__file__), "ranks_mbloch.py")

test_distributed_maxwell_bloch, test_distributed_maxwell_bloch_gpu = rank_tests(RANKS)
