"""Sphinx configuration of nlsepy's documentation.

Build with ``make docs`` (HTML in ``docs/_build/html``).  The API pages are
generated from the docstrings (numpydoc) of the *installed* package, so
the compiled extension must be importable: ``make docs`` builds and
installs the package first.  The notebooks are rendered as they are stored
(with the outputs ``make notebooks`` put in them) and are never executed
here.
"""

from __future__ import annotations

import nlsepy

project = "nlsepy"
author = "the nlsepy authors"
copyright = "nlsepy authors"
release = nlsepy.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",            # Markdown pages (myst-parser) and stored notebooks
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]

# --- notebooks: rendered as stored, never executed --------------------------
nb_execution_mode = "off"
nb_merge_streams = True

# --- Markdown (ARCHITECTURE.md, DBEC_FILES.md) ------------------------------
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# --- API pages -----------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "none"          # types are in the numpydoc sections
autodoc_default_options = {"members": True}
numpydoc_show_class_members = False  # autodoc lists the members once
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

# Every reference must resolve, except to types of Python, NumPy and the
# other packages whose inventories are not fetched (no network at build
# time): those are named here, one by one.
nitpicky = True
nitpick_ignore = [
    ("py:class", "matplotlib.figure.Figure"),
    ("py:mod", "scipy.constants"),
]

html_theme = "alabaster"
html_title = f"nlsepy {release}"
html_static_path: list = []
html_theme_options = {
    "description": "NLSE/GPE-type equations: C99/OpenMP and CUDA kernels behind a NumPy API",
    "fixed_sidebar": True,
}
