# kforge — the two commands a fresh machine needs:
#   make serve   install what is missing, build, start the server on 127.0.0.1:8000
#   make test    install what is missing, build, run every test
# Other targets: make setup | build | build-server (what serve needs) | lint | format | bench | bench-mcp | gpu-check | clean |
#                adversarial | hostile (tests/hostile) | fuzz (libFuzzer targets, FUZZ_SECONDS each)

VENV     ?= $(HOME)/.cache/kforge/venv
PRESET   ?= release
BUILD    := build/$(PRESET)
KFORGE   := $(BUILD)/bin/kforge
PY       := $(VENV)/bin/python
PORT     ?= 8000
DATA_DIR ?= .kforge
JOBS     ?= $(shell nproc)
export KFORGE_VENV := $(VENV)

CXX_SOURCES = $(shell git ls-files -co --exclude-standard -- '*.cc' '*.h' 2>/dev/null)

FUZZ_SECONDS ?= 60
FUZZ_TARGETS := request_parser jsonrpc_dispatcher http_reader worker_protocol

.PHONY: setup build build-server serve test unit-test py-test hostile fuzz lint format bench bench-mcp gpu-check clean tidy adversarial

setup:
	@scripts/setup.sh

build: setup
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)
	@echo "built $(KFORGE)"

# What serving needs: the server and the two libraries it loads from next to it (the CUDA C ABI
# of torch_cuda/multi_kernel jobs, the jail's preload); no test targets.
SERVE_TARGETS := kforge kforge_cuda_abi kforge_sandbox_abi

build-server: setup
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS) --target $(SERVE_TARGETS)
	@echo "built $(KFORGE)"

serve: build-server
	$(KFORGE) serve --host 127.0.0.1 --port $(PORT) --data-dir $(DATA_DIR) --python $(PY)

unit-test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

py-test: build
	KFORGE_BIN=$(abspath $(KFORGE)) KFORGE_PYTHON=$(PY) $(PY) -m pytest -q tests/python tests/kernels tests/workbench tests/integration tests/adversarial

# The adversarial corpus (tests/adversarial/corpus.py) as a table; last line "caught X/Y ...".
adversarial: build
	KFORGE_BIN=$(abspath $(KFORGE)) KFORGE_PYTHON=$(PY) $(PY) tests/adversarial/run.py --device $${KFORGE_TEST_DEVICE:-cpu}

lint: setup
	$(PY) -m ruff check python tests bench clients kernels knowledge
	$(PY) -m ruff format --check python tests bench clients kernels knowledge
	@clang-format --dry-run --Werror $(CXX_SOURCES) && echo "clang-format: ok"
	@scripts/check-k8s.sh  # deploy/k8s against the Kubernetes schemas (kubeconform)

hostile: build
	KFORGE_BIN=$(abspath $(KFORGE)) KFORGE_PYTHON=$(PY) $(PY) -m pytest -q tests/hostile

# libFuzzer targets (tests/fuzz): a separate clang build, then each target for FUZZ_SECONDS.
fuzz: setup
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)
	scripts/fuzz.sh build/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

test: build lint unit-test py-test hostile fuzz

format: setup
	$(PY) -m ruff format python tests bench clients kernels
	$(PY) -m ruff check --fix python tests bench clients kernels
	clang-format -i $(CXX_SOURCES)

bench: build
	KFORGE_BIN=$(abspath $(KFORGE)) $(PY) bench/eval_latency.py

bench-mcp: build
	KFORGE_BIN=$(abspath $(KFORGE)) KFORGE_PYTHON=$(PY) $(PY) bench/mcp_overhead.py

gpu-check: build
	scripts/gpu-check.sh

clean:
	rm -rf build

# clang-tidy with the curated .clang-tidy, on a build dir without GCC's precompiled headers.
# The Beast TUs are left out: the analyzer reports false positives inside Asio's coroutines.
TIDY_SOURCES = $(filter-out %/http_session.cc %/http_server.cc,$(shell git ls-files -co --exclude-standard -- 'src/*.cc' 'apps/*.cc'))
tidy: setup
	@cmake -S . -B build/tidy -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON >/dev/null
	clang-tidy -p build/tidy --quiet $(TIDY_SOURCES)
