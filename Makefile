# Thin wrappers: each target sets up what it needs and is missing, then does its job.
#   make demo   build, run the default simulation, write frames/summary/plot to out/
#               (installs only the build's and the demo's needs: DEBS, DEMO_DEPS)
#   make test   build with the MPI layer, run the default suite (not the tests marked slow)
#   make test-all  the same, every test
#   make mpi    the MPI layer: MPI_DEBS, mpi4py, nlsepy rebuilt with its _mpi extension
#   make bench  build, run the benchmarks (bench/*.py)
#   make docs   build, then the HTML documentation (Sphinx, warnings as errors) in docs/_build/html
#   make notebooks  build, then execute notebooks/*.ipynb in place and store their outputs
#   make wheel  an sdist and a wheel in dist/ (python -m build)
#   make sanitize  the C core with AddressSanitizer + UBSan (no CUDA) in build/sanitize,
#               the CPU tests and the hostile-input battery against it
# Set-up: Debian packages (when root), a .venv with pip, the package built
# from this tree with scikit-build-core.  Each step says what it installs.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip -q --disable-pip-version-check
# what every target needs: a C toolchain, CMake and FFTW
DEBS   := build-essential pkg-config cmake libfftw3-dev
# the MPI layer (nlsepy._mpi) and its tests under mpirun: `make mpi`, `make test`
MPI_DEBS := libopenmpi-dev openmpi-bin
# `make demo`: the build, the run and its figure
DEMO_DEPS := numpy scikit-build-core matplotlib tqdm
# `make test`: the suite's own needs (HDF5 runs, SciPy oracles, the wheel test, and
# xarray for open_run's to_xarray(), an optional extra the tests cover both with and without)
TEST_DEPS := pytest hypothesis h5py scipy build xarray
# the `docs` extra of pyproject.toml (tests/test_docs.py checks they agree)
DOCS_DEPS := sphinx numpydoc myst-parser myst-nb
# the `notebooks` extra of pyproject.toml (tests/test_docs.py checks they agree)
NOTEBOOK_DEPS := nbclient nbformat ipykernel matplotlib scipy
OUT    ?= out
PYTEST_ARGS ?=
# the default suite leaves out the cases marked slow; `make test-all` runs them
PYTEST_SELECT ?= -m "not slow"

.PHONY: all sysdeps mpi-sysdeps venv test-venv mpi-venv build demo test test-all mpi bench docs \
	notebooks wheel sanitize clean

all: build

# Debian packages (installed when run as root; a warning otherwise)
define debs
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "== installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "warning: missing Debian packages:$$missing (run as root to install them)"; \
	  fi; \
	fi
endef

# Python packages into the .venv, only those whose import fails (-I: not from the
# current folder, where CMake's build/ would pass for the package `build`):
# $(call pydeps,what for,pip names)
define pydeps
	@need=""; for p in $(2); do m=$$(echo $$p | tr - _); \
	  $(PY) -I -c "import $$m" 2>/dev/null || need="$$need $$p"; done; \
	if [ -n "$$need" ]; then echo "== pip install ($(1)):$$need"; $(PIP) install $$need; fi
endef

sysdeps:
	$(call debs,$(DEBS))
	@$(PYTHON) -c "import venv, ensurepip" 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; \
	  else echo "error: $(PYTHON) lacks venv/ensurepip (Debian: apt-get install python3-venv)"; exit 1; fi; }

mpi-sysdeps:
	$(call debs,$(MPI_DEBS))

$(PY):
	$(MAKE) --no-print-directory sysdeps
	@echo "== creating $(VENV)"
	$(PYTHON) -m venv $(VENV)

venv: $(PY)
	$(call pydeps,build and demo,$(DEMO_DEPS))
	@cmake_ok=$$(cmake --version 2>/dev/null | awk 'NR==1{split($$3,v,"."); print (v[1]>3 || (v[1]==3 && v[2]>=24))}'); \
	if [ "$$cmake_ok" != 1 ]; then echo "== pip install cmake ninja (CMake >= 3.24)"; $(PIP) install "cmake>=3.24" ninja; fi

test-venv: venv
	$(call pydeps,tests,$(TEST_DEPS))

# mpi4py, built against the MPI of MPI_DEBS
mpi-venv: mpi-sysdeps venv
	@$(PY) -c "import mpi4py" 2>/dev/null || { command -v mpicc >/dev/null && \
	  { echo "== pip install (MPI layer): mpi4py"; $(PIP) install mpi4py; } || \
	  echo "note: no mpi4py (needs MPI: $(MPI_DEBS)); the MPI layer is not built"; }

# The package from this tree (scikit-build-core, incremental in build/); the
# MPI layer is built when mpi4py is in the .venv (`make mpi`).
BUILD = @echo "== building nlsepy (CMake; build/ keeps the objects for the next build)"; \
	$(PIP) install --no-build-isolation .

build: sysdeps venv
	$(BUILD)

# The demo builds the CUDA backend only where a GPU can run it: nvcc alone
# (a CI machine) would add minutes of compilation for nothing the demo uses.
# NLSEPY_CUDA in the environment overrides this.
DEMO_CUDA := $(shell nvidia-smi -L >/dev/null 2>&1 && echo AUTO || echo OFF)

demo: sysdeps venv
	@echo "== building nlsepy (CMake; CUDA backend: $${NLSEPY_CUDA:-$(DEMO_CUDA)})"
	NLSEPY_CUDA=$${NLSEPY_CUDA:-$(DEMO_CUDA)} $(PIP) install --no-build-isolation .
	@echo "== running the demo (writes $(OUT)/)"
	$(PY) -m nlsepy demo --out $(OUT)

# the MPI layer: the Debian MPI packages, mpi4py, and nlsepy rebuilt with it
mpi: sysdeps mpi-venv
	$(BUILD)
	@$(PY) -c "from nlsepy import _build_config as c; print('MPI layer built:', bool(getattr(c, 'mpi', False)))"

# The default suite (tests marked slow left out); it includes the MPI tests
# under mpirun, so the MPI layer is set up too.
test: sysdeps test-venv mpi-venv
	$(BUILD)
	$(PY) -m pytest -q $(PYTEST_SELECT) $(PYTEST_ARGS)

# every test, the slow ones included
test-all:
	$(MAKE) --no-print-directory test PYTEST_SELECT=

bench: build
	$(PY) bench/fd.py

# The API pages come from the docstrings of the installed package; the
# notebooks are rendered as stored (never executed here).
docs: build
	$(call pydeps,docs,$(DOCS_DEPS))
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

# Every notebook (or those named in NOTEBOOKS=...) run top to bottom in a fresh
# kernel and stored with its outputs, figures as PNG (notebooks/execute.py):
# nbclient, the kernel python3 of the .venv (installed there when missing),
# matplotlib inline, NumPy's seed fixed, one OpenMP thread, backend cpu and
# the quick variants, unless the environment sets OMP_NUM_THREADS,
# NLSEPY_BACKEND or NLSEPY_NOTEBOOK_FULL.  `make docs` then shows these outputs.
NOTEBOOKS ?=
notebooks: build
	$(call pydeps,notebooks,$(NOTEBOOK_DEPS))
	@test -f $(VENV)/share/jupyter/kernels/python3/kernel.json || \
	  $(PY) -m ipykernel install --sys-prefix --name python3
	$(PY) notebooks/execute.py $(NOTEBOOKS)

# sdist, then the wheel built from it (NLSEPY_CUDA / NLSEPY_MPI choose the parts)
wheel: sysdeps test-venv
	$(PY) -m build --no-isolation -o dist .

# The C core built with -fsanitize=address,undefined (UBSan fatal, no CUDA)
# and installed into $(SANITIZE_DIR)/site, which the tests import first; the
# interpreter is not instrumented, so the runtimes are preloaded.  Leak
# checks are off (the interpreter's own allocations).
SANITIZE_DIR   ?= build/sanitize
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SANITIZE_TESTS ?= tests -m "not slow and not cuda and not mpi"
CC ?= cc

sanitize: sysdeps test-venv
	$(PIP) install --no-deps --no-build-isolation --upgrade \
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
