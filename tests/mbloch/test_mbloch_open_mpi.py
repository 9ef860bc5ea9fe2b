"""Open systems distributed over ranks: the rank-side tests of
tests/mbloch/ranks_mbloch_open.py on 2 and 3 ranks (15 atoms).  Skipped where
MPI, mpi4py or nlsepy's MPI layer is missing."""

import os

from _helpers import rank_tests  # noqa: E402

RANKS = os.path.join(os.path.dirname(__file__), "ranks_mbloch_open.py")

test_distributed_open_maxwell_bloch, test_distributed_open_maxwell_bloch_gpu = rank_tests(RANKS)
