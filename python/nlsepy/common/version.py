"""The package's version, in one place (the package, run files and checkpoints read it)."""

__version__ = "0.1.0"
