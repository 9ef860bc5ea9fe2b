# Thin wrappers: each target sets up what is missing, then does its job.
#   make demo   build, run the default simulation, write frames/summary/plot to out/
#   make test   build, run the whole pytest suite
#   make bench  build, run the benchmarks (bench/*.py)
#   make docs   build, then the HTML documentation (Sphinx, warnings as errors) in docs/_build/html
#   make notebooks  build, then execute notebooks/*.ipynb in place and store their outputs
#   make wheel  an sdist and a wheel in dist/ (python -m build)
#   make sanitize  the C core with AddressSanitizer + UBSan (no CUDA) in build/sanitize,
#               the CPU tests and the hostile-input battery against it
# Set-up: Debian packages (when root), a .venv with pip, the package built
# from this tree with scikit-build-core.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
DEBS   := build-essential pkg-config cmake libfftw3-dev
# optional: the MPI layer (nlsepy._mpi) and its tests under mpirun
MPI_DEBS := libopenmpi-dev openmpi-bin libfftw3-mpi-dev
# the `docs` extra of pyproject.toml (tests/test_docs.py checks they agree)
DOCS_DEPS := sphinx numpydoc myst-parser myst-nb
# the `notebooks` extra of pyproject.toml (tests/test_docs.py checks they agree)
NOTEBOOK_DEPS := nbclient nbformat ipykernel matplotlib scipy
PYDEPS := numpy scikit-build-core pytest tqdm hypothesis build h5py $(DOCS_DEPS) $(NOTEBOOK_DEPS)
OUT    ?= out
PYTEST_ARGS ?=

.PHONY: all sysdeps venv build demo test bench docs notebooks wheel sanitize clean

all: build

sysdeps:
	@missing=""; for p in $(DEBS) $(MPI_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "warning: missing Debian packages:$$missing (run as root to install them)"; \
	  fi; \
	fi
	@$(PYTHON) -c "import venv, ensurepip" 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; \
	  else echo "error: $(PYTHON) lacks venv/ensurepip (Debian: apt-get install python3-venv)"; exit 1; fi; }

$(PY):
	$(MAKE) sysdeps
	$(PYTHON) -m venv $(VENV)

venv: $(PY)
	@$(PY) -c "import numpy, scikit_build_core, pytest, matplotlib, tqdm, scipy, hypothesis, build, h5py, \
	  sphinx, numpydoc, myst_parser, myst_nb, nbclient, nbformat, ipykernel" 2>/dev/null || \
	  $(PIP) install -q --disable-pip-version-check $(PYDEPS)
	@$(PY) -c "import mpi4py" 2>/dev/null || { command -v mpicc >/dev/null && \
	  $(PIP) install -q --disable-pip-version-check mpi4py || \
	  echo "note: no mpi4py (needs MPI: $(MPI_DEBS)); the MPI layer is not built"; }
	@cmake_ok=$$(cmake --version 2>/dev/null | awk 'NR==1{split($$3,v,"."); print (v[1]>3 || (v[1]==3 && v[2]>=24))}'); \
	if [ "$$cmake_ok" != 1 ]; then $(PIP) install -q "cmake>=3.24" ninja; fi

build: sysdeps venv
	$(PIP) install -q --disable-pip-version-check --no-build-isolation .

demo: build
	$(PY) -m nlsepy demo --out $(OUT)

test: build
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: build
	$(PY) bench/fd.py

# The API pages come from the docstrings of the installed package; the
# notebooks are rendered as stored (never executed here).
docs: build
	@$(PY) -c "import sphinx, numpydoc, myst_parser, myst_nb" 2>/dev/null || \
	  $(PIP) install -q --disable-pip-version-check $(DOCS_DEPS)
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

# Every notebook (or those named in NOTEBOOKS=...) run top to bottom in a fresh
# kernel and stored with its outputs, figures as PNG (notebooks/execute.py):
# nbclient, the kernel python3 of the .venv (installed there when missing),
# matplotlib inline, NumPy's seed fixed, one OpenMP thread, backend cpu and
# the quick variants, unless the environment sets OMP_NUM_THREADS,
# NLSEPY_BACKEND or NLSEPY_NOTEBOOK_FULL.  `make docs` then shows these outputs.
NOTEBOOKS ?=
notebooks: build
	@$(PY) -c "import nbclient, nbformat, ipykernel, matplotlib, scipy" 2>/dev/null || \
	  $(PIP) install -q --disable-pip-version-check $(NOTEBOOK_DEPS)
	@test -f $(VENV)/share/jupyter/kernels/python3/kernel.json || \
	  $(PY) -m ipykernel install --sys-prefix --name python3
	$(PY) notebooks/execute.py $(NOTEBOOKS)

# sdist, then the wheel built from it (NLSEPY_CUDA / NLSEPY_MPI choose the parts)
wheel: sysdeps venv
	$(PY) -m build --no-isolation -o dist .

# The C core built with -fsanitize=address,undefined (UBSan fatal, no CUDA)
# and installed into $(SANITIZE_DIR)/site, which the tests import first; the
# interpreter is not instrumented, so the runtimes are preloaded.  Leak
# checks are off (the interpreter's own allocations).
SANITIZE_DIR   ?= build/sanitize
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SANITIZE_TESTS ?= tests -m "not slow and not cuda and not mpi"
CC ?= cc

sanitize: sysdeps venv
	$(PIP) install -q --disable-pip-version-check --no-deps --no-build-isolation --upgrade \
	  --target $(SANITIZE_DIR)/site -Cbuild-dir=$(SANITIZE_DIR)/cmake \
	  -Ccmake.define.NLSEPY_CUDA=OFF -Ccmake.build-type=RelWithDebInfo \
	  "-Ccmake.define.CMAKE_C_FLAGS=$(SANITIZE_FLAGS)" \
	  "-Ccmake.define.CMAKE_SHARED_LINKER_FLAGS=$(SANITIZE_FLAGS)" .
	PYTHONPATH=$(SANITIZE_DIR)/site \
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(PY) -m pytest -q -p no:cacheprovider $(SANITIZE_TESTS)

clean:
	rm -rf build $(OUT) .pytest_cache docs/_build
