# freight — `make help` lists the targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.deps-installed
BUILD_STAMP := $(VENV)/.build-deps-installed

.PHONY: help
help:  ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# The build and test dependencies are pyproject.toml's: maturin, freight's own and the `test` extra
# (tools/requirements.py expands the extras it composes). The list is rewritten only when it
# changes, so editing pyproject.toml or this file for anything else installs nothing.
REQUIREMENTS := $(VENV)/requirements-test.txt

$(REQUIREMENTS): $(PY) FORCE
	@$(PY) tools/requirements.py --build test > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

$(STAMP): $(REQUIREMENTS) $(BUILD_STAMP) | openmpi
	$(PIP) install -q -r $(REQUIREMENTS)
	touch $(STAMP)

# What building the extension needs (maturin, freight's own dependencies) and what `make demo`
# runs with (the `pandas` extra: numpy and pandas). A handful of packages, so that `make demo` on a
# fresh clone does not wait for the test dependencies (torch, TensorFlow, Ray, Dask, Open MPI, ...),
# and `make test` can install those while the extension compiles.
BUILD_REQUIREMENTS := $(VENV)/requirements-build.txt

$(BUILD_REQUIREMENTS): $(PY) FORCE
	@$(PY) tools/requirements.py --build pandas > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

$(BUILD_STAMP): $(BUILD_REQUIREMENTS)
	$(PIP) install -q -r $(BUILD_REQUIREMENTS)
	touch $(BUILD_STAMP)

.PHONY: FORCE
FORCE:

.PHONY: install
install: $(STAMP)  ## Create the virtualenv and install build and test dependencies

# The extension is rebuilt only when its Rust sources or build settings change (Python sources
# are used in place: the install is editable). pip's "Ignoring <pkg>: markers ..." lines about
# extras are dropped from maturin's output.
EXT_STAMP := $(VENV)/.extension-built
EXT_SOURCES := $(shell find crates -path '*/fuzz' -prune -o \( -name '*.rs' -o -name Cargo.toml \) -print 2>/dev/null) Cargo.toml Cargo.lock pyproject.toml .cargo/config.toml
ifeq ($(wildcard python/freight/_freight*.so),)
.PHONY: $(EXT_STAMP)
endif

$(EXT_STAMP): $(BUILD_STAMP) $(EXT_SOURCES)
	set -o pipefail; $(VENV)/bin/maturin develop --release -q -F testing 2>&1 | { grep -vE '^(Ignoring|Requirement already satisfied):? ' || true; }
	touch $(EXT_STAMP)

.PHONY: build
build: $(EXT_STAMP)  ## Build the extension in release mode into the virtualenv (with the test hooks), when its sources changed

.PHONY: build-dev
build-dev: install  ## Build the extension in debug mode (faster to compile, slow to run)
	set -o pipefail; $(VENV)/bin/maturin develop -q -F testing 2>&1 | { grep -vE '^(Ignoring|Requirement already satisfied):? ' || true; }
	rm -f $(EXT_STAMP)

# Release wheels into dist/: manylinux2014 (glibc 2.17 and newer), because maturin links with zig
# (ziglang, from PyPI) against glibc 2.17's symbols instead of this machine's newer ones; without
# the test hooks. One wheel per interpreter of WHEEL_PYTHONS (the virtualenv's by default; e.g.
# WHEEL_PYTHONS="python3.10 python3.12"); no abi3 wheel: see docs/ARCHITECTURE.md, "Packaging".
# The build has its own cargo target folder, or `make build` would compile everything again after it.
WHEEL_PYTHONS ?= $(PY)
WHEEL_DEPS := ziglang==0.17.1
WHEEL_STAMP := $(VENV)/.wheel-deps-installed

$(WHEEL_STAMP): $(STAMP)
	$(PIP) install -q $(WHEEL_DEPS)
	touch $(WHEEL_STAMP)

.PHONY: wheel
wheel: $(WHEEL_STAMP)  ## Build release wheels into dist/ (manylinux2014, linked by zig)
	rm -rf dist
	PATH="$(abspath $(VENV))/bin:$$PATH" CARGO_TARGET_DIR=target/wheel \
		$(VENV)/bin/maturin build --release --zig --compatibility manylinux2014 --out dist -i $(WHEEL_PYTHONS)

.PHONY: wheel-check
wheel-check: build wheel  ## Install the wheel into fresh virtualenvs: import time, builtins, a missing extra's error, each extra's imports
	$(PY) tools/wheel_check.py

.PHONY: demo
demo: build  ## Run the demo: a mixed workload through freight, stored in a local folder
	$(PY) -m freight demo

.PHONY: test-rust
test-rust:  ## cargo tests (format, property tests)
	cargo test -p freight-core -p freight-store --release -q

# Debian packages the tests need, installed when missing (as root, else through sudo). One apt-get
# at a time (flock): `make test` installs its set-up side by side, and dpkg takes one client.
APT_INSTALL = flock /tmp/freight-apt.lock $$(test "$$(id -u)" -eq 0 || echo sudo) sh -c \
	'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$$@"' apt-install

# s3s-fs: a small S3-compatible server (one folder per bucket) that the tests in tests/storage start
# on loopback. Installed once into .tools/ (git ignores it; about 2.5 minutes to build); newer
# versions need a newer Rust than ours.
S3S_FS_VERSION := 0.14.1
S3S_FS := .tools/bin/s3s-fs

$(S3S_FS):
	cargo install s3s-fs --version $(S3S_FS_VERSION) --locked --features binary --root .tools

.PHONY: test-server
test-server: $(S3S_FS)  ## Install the S3-compatible test server (s3s-fs) into .tools/bin

# redis-server (the Debian package) for the ProxyStore tests: a fixture starts it on a free
# loopback port.
.PHONY: redis
redis:  ## Install redis-server (Debian package) for the ProxyStore tests, when missing
	@command -v redis-server >/dev/null || test -x /usr/bin/redis-server || { \
		$(APT_INSTALL) redis-server; }

# Open MPI (the Debian packages) for the mpi4py tests, which run programs under mpiexec; mpi4py's
# build needs mpicc, so `make install` must come after it.
.PHONY: openmpi
openmpi:  ## Install Open MPI (Debian packages openmpi-bin, libopenmpi-dev) for the mpi4py tests, when missing
	@command -v mpiexec >/dev/null && command -v mpicc >/dev/null || { \
		$(APT_INSTALL) openmpi-bin libopenmpi-dev; }

# Chromium and its chromedriver (the Debian packages) for tests/docs/test_site_browser.py, which
# opens the built documentation site headless.
.PHONY: chromium
chromium:  ## Install Chromium and chromedriver (Debian packages) for the docs site's browser test, when missing
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
		$(APT_INSTALL) chromium chromium-driver; }

# The old-versions environment for tests/golden/test_versions_crossing.py: numpy 1, pandas 2.2,
# pyarrow 17 and polars 1 (what freight promises to exchange payloads with, both ways; see
# docs/ARCHITECTURE.md, "Version crossings"). It runs freight's Python package from python/ with
# the extension `make build` put there (same CPython 3.11 ABI), so nothing is built in it.
# Installed once (about 20 s), cached by its stamp; checked again when the Makefile changes.
OLD_VENV := .venv-old
OLD_STAMP := $(OLD_VENV)/.deps-installed
OLD_DEPS := numpy==1.26.4 pandas==2.2.3 pyarrow==17.0.0 polars==1.44.2 cloudpickle pytest hypothesis

$(OLD_STAMP): Makefile
	test -x $(OLD_VENV)/bin/python || python3 -m venv $(OLD_VENV)
	$(OLD_VENV)/bin/pip install -q $(OLD_DEPS)
	touch $(OLD_STAMP)

.PHONY: old-versions
old-versions: $(OLD_STAMP)  ## Create .venv-old (numpy 1.26, pandas 2.2, pyarrow 17, polars 1) for the version-crossing tests

.PHONY: test-python
test-python: $(OLD_STAMP)
test-python: build $(S3S_FS) redis openmpi chromium  ## pytest over tests/ (one folder per feature, see tests/README.md; the engines end to end)
	$(PY) -m pytest -q -p no:cacheprovider

.PHONY: test
# `make test`'s set-up runs side by side (make -j): the downloads and installs (pip, apt) overlap
# the Rust builds (the extension, s3s-fs, cargo test's binaries), which keep both cores busy; pip
# installs the test dependencies while the extension compiles. --output-sync keeps each step's
# output together. The tests themselves then run one suite at a time.
.PHONY: test-setup
test-setup: build install $(S3S_FS) redis openmpi chromium $(OLD_STAMP) test-rust-build

.PHONY: test-rust-build
test-rust-build:
	cargo test -p freight-core -p freight-store --release -q --no-run

test:  ## Everything: cargo test and pytest (the set-up first, side by side)
	$(MAKE) --no-print-directory -j4 --output-sync=target test-setup
	$(MAKE) --no-print-directory test-rust test-python

# The documentation site (mkdocs.yml): docs/, plus README.md, CHANGELOG.md, CONTRIBUTING.md and the
# committed benchmark results, brought in at build time by tools/docs_hooks.py. mkdocs and its
# plugins come with the test dependencies (pyproject's `docs` extra); the API reference is read from
# the sources and stubs, so no build of the extension is needed. --strict: a broken link or anchor,
# a missing reference or a page outside the navigation fails the build (tests/docs checks it too).
# NO_MKDOCS_2_WARNING: mkdocs-material's notice about its successor (see docs/ARCHITECTURE.md).
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs
DOCS_ADDRESS ?= 127.0.0.1:8000

.PHONY: docs
docs: $(STAMP)  ## Build the documentation site into site/ (mkdocs build --strict)
	$(MKDOCS) build --strict

.PHONY: docs-serve
docs-serve: $(STAMP)  ## Serve the documentation site on DOCS_ADDRESS (127.0.0.1:8000), rebuilt on every change
	$(MKDOCS) serve --strict -a $(DOCS_ADDRESS)

# The peers freight bench compares with (none of them is a freight dependency; distributed comes
# with the test dependencies' dask[distributed]); its plots and progress bar come with the `bench`
# extra (matplotlib, tqdm), which is also how a user of the wheel runs it (`pip install
# "freight[bench]"`, then `freight bench`: docs/benchmarks.md).
BENCH_DEPS := $(patsubst %,'%',$(shell python3 tools/requirements.py bench)) lz4 zstandard safetensors proxystore pyfory msgspec dill blosc2
BENCH_OUT := benchmarks/results

.PHONY: bench
bench: build $(S3S_FS)  ## freight bench (every workload and peer, over sizes; engines; values read in part: reports + plots in benchmarks/results), then the target scripts
	$(PIP) install -q $(BENCH_DEPS)
	$(PY) -m freight bench --out $(BENCH_OUT)
	$(PY) -m freight bench --engines --out $(BENCH_OUT)
	$(PY) -m freight bench --storage --out $(BENCH_OUT)
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_compression.py
	$(PY) benchmarks/bench_libraries.py
	$(PY) benchmarks/bench_storage.py

# Fuzzing: cargo-fuzz (libFuzzer, AddressSanitizer) on freight-core's targets, then the
# Python-level mutation campaign over every serializer's payloads with glibc's heap checks, then
# the same campaign against an AddressSanitizer build of the extension (fuzz-asan).
# RUSTC_BOOTSTRAP=1 lets the stable toolchain use the sanitizer flags cargo-fuzz passes.
FUZZ_S ?= 180
# Examples per fidelity property in `make fuzz` (`make test` runs 40).
FIDELITY_EXAMPLES ?= 5000
FUZZ_TARGETS := payload_open payload_split tree_walk decompress checksum signature digests sparse_indices string_offsets
CARGO_FUZZ := .tools/bin/cargo-fuzz
# Corpus seeds: the golden payloads of formats 1.0 and 1.2 (every set: checksummed, compressed,
# signed) and the old signatures (v1.1-signed), named by content (the sets share file names);
# not the 1 MiB case (digested_frames): libFuzzer sizes its inputs by the largest seed.
FUZZ_SEEDS := $(filter-out %/digested_frames.frt,$(wildcard tests/golden/v1/*.frt tests/golden/v1.2/*.frt tests/golden/v1.2/*/*.frt tests/golden/v1.1-signed/*.frt))

$(CARGO_FUZZ):
	cargo install cargo-fuzz --locked --root .tools

.PHONY: fuzz
fuzz: build $(CARGO_FUZZ)  ## Fuzz for FUZZ_S seconds per target (Rust targets, then Python loads over every serializer, also under ASan)
	cd crates/freight-core && for t in $(FUZZ_TARGETS); do \
		mkdir -p fuzz/corpus/$$t; for f in $(FUZZ_SEEDS); do cp ../../$$f fuzz/corpus/$$t/seed-$$(sha1sum < ../../$$f | cut -c1-16); done; \
		RUSTC_BOOTSTRAP=1 ../../$(CARGO_FUZZ) run -O $$t -- -max_total_time=$(FUZZ_S) -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 2>&1 \
			| grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY|Done)" | sed "s/^/$$t: /" ; \
		test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done
	PYTHONMALLOC=malloc MALLOC_CHECK_=3 $(PY) fuzz/loads_mutations.py --seconds $(FUZZ_S)
	FREIGHT_FIDELITY_EXAMPLES=$(FIDELITY_EXAMPLES) $(PY) -m pytest -q -p no:cacheprovider tests/fidelity/test_fidelity_properties.py tests/fidelity/test_fidelity_pandas_properties.py
	$(MAKE) --no-print-directory fuzz-asan

# The AddressSanitizer build of the extension lives apart from the release one in the virtualenv:
# its own cargo target folder, and a copy of the Python package under .tools/asan-pkg that the
# campaign puts first on PYTHONPATH (every child checks it loaded that extension). --target keeps
# build scripts and proc-macros uninstrumented; fat LTO is off to build in a few minutes. Rust
# does not link the ASan runtime into a cdylib: gcc's libasan is preloaded into the interpreter
# (with libstdc++, or ASan's __cxa_throw interceptor finds no real one and TensorFlow's first C++
# exception aborts the process), and PYTHONMALLOC=malloc sends Python's allocations through it.
ASAN_TARGET := .tools/asan-target
ASAN_PKG := .tools/asan-pkg
ASAN_LIB := $(ASAN_TARGET)/x86_64-unknown-linux-gnu/release/lib_freight.so
ASAN_OPTIONS_FUZZ := detect_leaks=0:allocator_may_return_null=1:handle_abort=1:detect_odr_violation=0
FUZZ_JOBS ?= 1

$(ASAN_LIB): $(STAMP) $(EXT_SOURCES)
	CARGO_TARGET_DIR=$(ASAN_TARGET) RUSTC_BOOTSTRAP=1 PYO3_PYTHON=$(abspath $(PY)) \
	RUSTFLAGS="--cfg pyo3_disable_reference_pool -Zsanitizer=address" \
	CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
	CARGO_PROFILE_RELEASE_DEBUG=1 CARGO_PROFILE_RELEASE_STRIP=none \
		cargo build -q -p freight-py --release --lib --features testing,pyo3/extension-module \
		--target x86_64-unknown-linux-gnu

.PHONY: fuzz-asan
fuzz-asan: $(ASAN_LIB)  ## The Python campaign (FUZZ_S seconds) against an AddressSanitizer build of the extension
	rm -rf $(ASAN_PKG) && mkdir -p $(ASAN_PKG) && cp -r python/freight $(ASAN_PKG)/
	find $(ASAN_PKG) \( -name '_freight*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
	cp $(ASAN_LIB) $(ASAN_PKG)/freight/_freight$$($(PY) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so.6)" \
	ASAN_OPTIONS=$(ASAN_OPTIONS_FUZZ) PYTHONMALLOC=malloc \
	PYTHONPATH=$(ASAN_PKG) $(PY) fuzz/loads_mutations.py --seconds $(FUZZ_S) --jobs $(FUZZ_JOBS) --extension $(ASAN_PKG)

LINT_DEPS := ruff mypy import-linter
LINT_STAMP := $(VENV)/.lint-deps-installed
PY_SRC := python tests benchmarks fuzz tools

$(LINT_STAMP): $(PY) Makefile
	$(PIP) install -q $(LINT_DEPS)
	touch $(LINT_STAMP)

.PHONY: lint
lint: build $(LINT_STAMP)  ## cargo fmt --check, clippy, ruff check and format --check, import layers and circles, Rust's names in Python, stubtest, the docs site
	cargo fmt --all -- --check
	cargo clippy --workspace --release -- -D warnings
	$(VENV)/bin/ruff check $(PY_SRC)
	$(VENV)/bin/ruff format --check $(PY_SRC)
	@# The package's layers and no import circles: the contracts in pyproject.toml, [tool.importlinter].
	$(VENV)/bin/lint-imports --no-cache
	@# What the extension's Rust reaches in Python by name (private attributes, run-time imports),
	@# which import-linter cannot see: listed in tools/rust_seams.toml, checked against the contracts.
	$(PY) tools/check_rust_seams.py
	@# The codec's options against their one declaration (python/freight/_options.py).
	$(PY) tools/check_options.py
	@# --ignore-unused-allowlist: some entries apply to some Python versions only (see the file).
	$(PY) -m mypy.stubtest freight._freight --allowlist tools/stubtest-allowlist.txt --ignore-unused-allowlist
	$(MKDOCS) build --strict --quiet

.PHONY: format
format: $(LINT_STAMP)  ## cargo fmt, ruff check --fix, ruff format
	cargo fmt --all
	$(VENV)/bin/ruff check --fix $(PY_SRC)
	$(VENV)/bin/ruff format $(PY_SRC)

.PHONY: clean
clean:  ## Remove build outputs and the virtualenv
	cargo clean
	rm -rf $(VENV) .pytest_cache .hypothesis freight-demo-store site
