# The two commands of the README: `make demo` and `make test`. Both install what they need
# (tools/bootstrap.sh: Debian packages, only those missing) and share one build directory.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
CTEST_JOBS ?= 2

CMAKE_FLAGS = -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

.PHONY: all deps configure build test demo bench asan tsan clean

all: build

deps:
	@bash tools/bootstrap.sh

configure: deps
	@mkdir -p $(BUILD) && cmake -S . -B $(BUILD) $(CMAKE_FLAGS) > $(BUILD)/configure.log 2>&1 || { cat $(BUILD)/configure.log; exit 1; }

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) -j $(CTEST_JOBS) --output-on-failure --timeout 900

demo: build
	@bash tools/demo.sh $(BUILD)

# Benchmarks (not tests): each figure is a ratio against a baseline run in the same invocation.
bench: build
	bash bench/checkpoint_bench.sh $(BUILD)

# Sanitizer builds, each in its own directory.
asan:
	$(MAKE) test BUILD=build-asan BUILD_TYPE=Asan
tsan:
	$(MAKE) test BUILD=build-tsan BUILD_TYPE=Tsan

clean:
	rm -rf $(BUILD) build-asan build-tsan runs
