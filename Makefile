# ember's two user commands (`make train`, `make test`) plus helpers. Each installs the Debian
# packages it needs first when run as root on a fresh machine, then configures and builds.

BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
DEBIAN_PACKAGES := cmake make g++ catch2 libcli11-dev libopenblas-dev zlib1g-dev nlohmann-json3-dev \
                   dataset-fashion-mnist fortunes openmpi-bin libopenmpi-dev python3 \
                   pybind11-dev python3-dev python3-pytest libdlpack-dev python3-numpy python3-torch
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CMAKE_FLAGS ?=
ifneq ($(NVCC),)
  CMAKE_FLAGS += -DCMAKE_CUDA_COMPILER=$(NVCC)
endif
TRAIN_ARGS ?=

.PHONY: all deps configure build test test-sanitize test-emulated fuzz-deps fuzz fuzz-smoke mutants train demo \
        compare-deps compare-torch gpu-stage gpu-check clean

all: build

# $(call install_missing,PACKAGES): installs the missing Debian packages (as root), or says which to install.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "ember: installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "ember: missing Debian packages:$$missing (run 'sudo make $@' or apt-get install them)"; exit 1; \
	  fi; \
	fi
endef

deps:
	$(call install_missing,$(DEBIAN_PACKAGES))

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The CPU code and tests under AddressSanitizer + UndefinedBehaviorSanitizer (CI's second stage). Without MPI:
# OpenMPI's own allocations would read as leaks, and this build then proves the path of an ember without MPI.
test-sanitize: deps
	@cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE=ON -DEMBER_CUDA=OFF -DEMBER_MPI=OFF >/dev/null
	@cmake --build build-sanitize -j $(JOBS)
	cd build-sanitize && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# Every CUDA test on ember's emulated CUDA device (docs/emulation.md): the .cu sources built by g++ and run on CPU
# fibers, under AddressSanitizer + UndefinedBehaviorSanitizer; no GPU, driver or nvcc needed (CI's second stage).
# The Python module's pytest entry (python:pytest) is labelled cuda there, so its .to("cuda") cases run too.
EMULATED_PACKAGES := libboost-context-dev
test-emulated: deps
	$(call install_missing,$(EMULATED_PACKAGES))
	@cmake -S . -B build-emulated -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_CUDA=EMULATED -DEMBER_SANITIZE=ON >/dev/null
	@cmake --build build-emulated -j $(JOBS) --target ember ember_cuda_tests ember_emu_tests \
	  $$(cmake --build build-emulated --target help | grep -o 'ember_python$$')
	cd build-emulated && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest -L cuda --output-on-failure -j $(JOBS)
	@cd build-emulated && echo "ember: $$(ctest -N -R '^cuda:' | tail -1 | sed 's/Total Tests: //') CUDA test cases and" \
	  "$$(ctest -N -R '^emu:' | tail -1 | sed 's/Total Tests: //') emulator tests ran on the emulated CUDA device"

# libFuzzer on the IDX and safetensors readers (clang, ASan + UBSan), FUZZ_SECONDS each, one after the
# other; scripts/fuzz --help for the rest (--smoke is CI's 30-second run). Findings land in build-fuzz/artifacts.
FUZZ_SECONDS ?= 600
FUZZ_PACKAGES := clang libclang-rt-14-dev
fuzz-deps:
	$(call install_missing,$(FUZZ_PACKAGES))

fuzz: fuzz-deps
	scripts/fuzz --seconds $(FUZZ_SECONDS)

# CI's third stage: the committed seeds and regressions replayed, then 30 seconds of each fuzzer at once.
fuzz-smoke: fuzz-deps
	scripts/fuzz --regress
	scripts/fuzz --smoke --parallel

# Mutation testing (not in CI): plants each bug of scripts/mutants.d/cpu.list in a scratch copy of the tree, one at a
# time, and reports which the tests catch; about half an hour on 2 cores. MUTANTS_ARGS="--only NAME" runs one,
# "--cuda" the CUDA list against the emulated device; scripts/mutants --help for the rest.
MUTANTS_ARGS ?=
mutants: deps
	scripts/mutants $(MUTANTS_ARGS)

# Trains on Fashion-MNIST on the best device (extra flags: make train TRAIN_ARGS="--epochs 5").
train: build
	./$(BUILD)/apps/ember train $(TRAIN_ARGS)

demo: build
	./$(BUILD)/apps/ember demo

# ember train against PyTorch on the CPU, interleaved rounds (scripts/compare-torch --help; docs/benchmarks.md).
# The peer needs Debian's PyTorch on OpenBLAS: without libopenblas0-pthread it runs on reference BLAS.
PEER_PACKAGES := python3 python3-numpy python3-torch libopenblas0-pthread fortunes
COMPARE_ARGS ?=
compare-deps:
	$(call install_missing,$(PEER_PACKAGES))

compare-torch: build compare-deps
	scripts/compare-torch --ember $(BUILD)/apps/ember $(COMPARE_ARGS)

gpu-stage:
	scripts/gpu-stage

gpu-check:
	scripts/gpu-check out/gpu-check

clean:
	rm -rf $(BUILD)
