"""The shared layer every model builds on; it imports no model.

=================  ==========================================================
``backend``        backend names, and the one door to the compiled extensions
``checks``         argument checks (exceptions that name the argument and
                   value)
``params``         the parameter table every model declares (``Param``), and
                   the bases ``Parametrised``, ``Replaceable``, ``Sealed``
``errors``         ``BlowUpError``, ``BackendError``
``guard``          Ctrl-C between short C calls, memory checks before
                   allocation
``files``          files written whole or not at all; the checkpoint format
``outputs``        output folders staged and committed together
``framegrid``      where a run's values lie, for the plots' axes
``plot``           figure helpers, and the figures of a run's frames
``dist``           the distribution layer: communicator, slab layout, agree,
                   halo exchange, gather and scatter, checkpoints in parts
``hdf5``           HDF5 run files (serial and collective), ``open_run``,
                   ``save`` as HDF5
``results``        ``plot()`` and ``save()`` of the models whose work returns
                   a result
``runner``         the chunked run protocol, ``Frames``
``stepper``        ``TimeStepper``, the base of the time-stepping models
``tuning``         the kernels' tuning switches: their table, a context
                   manager that sets them, a reader
``version``        the package's version
=================  ==========================================================
"""
