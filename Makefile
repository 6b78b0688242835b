# Thin wrapper over CMake. Every target first installs missing Debian packages.
BUILD    ?= build
JOBS     ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps configure build demo test bench sanitize clean

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > /dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# the benchmarks compare against Open MPI, whose headers are in libopenmpi-dev
bench:
	@scripts/install-deps.sh libopenmpi-dev
	@$(MAKE) --no-print-directory build
	@scripts/bench.sh $(BUILD)

# One report on a device (docs/DEVICES.md, "make gpu-check"): DEVICE=cuda builds
# in build-gpu and needs a GPU for most checks; DEVICE=sim reuses $(BUILD) and
# runs anywhere (CI). No deps step: the GPU machine is offline (gpu-deps/).
DEVICE ?= cuda
.PHONY: gpu-check
gpu-check:
	@DEVICE=$(DEVICE) BUILD=$(BUILD) JOBS=$(JOBS) CMAKE_FLAGS="$(CMAKE_FLAGS)" scripts/gpu_check.sh

sanitize:
	@$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DDT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"

clean:
	rm -rf $(BUILD) build-asan
