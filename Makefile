# The two commands a fresh machine needs: `make demo` and `make test`.
# Both install what is missing (apt), configure with CMake + Ninja, build,
# then run.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: demo test deps configure build sanitize format clean

demo: build
	./$(BUILD_DIR)/lazytrain train

test: build
	./scripts/setup-test-venv.sh
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE gpu

deps:
	./scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# ASan + UBSan build of the CPU tests.
sanitize:
	$(MAKE) test BUILD_DIR=build-sanitize BUILD_TYPE=sanitize CMAKE_ARGS="-DLT_CUDA=OFF"

format:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
