# spk: build, test and set-up. `make help` lists the targets.
CUDA_HOME ?= /usr/local/cuda
LUA_INC   ?= /usr/include/lua5.4
LUA_LIB   ?= /usr/lib/x86_64-linux-gnu/liblua5.4.a
BUILD     ?= build

CC      ?= gcc
OPT     ?= -O2
CFLAGS  += -std=c11 $(OPT) -g -Wall -Wextra -fPIC -D_GNU_SOURCE -pthread \
           -Isrc -I$(CUDA_HOME)/include -I$(LUA_INC) \
           -DSPK_SOURCE_LUA_DIR='"$(CURDIR)/lua"' -DSPK_SOURCE_KERNEL_DIR='"$(CURDIR)/kernels"' $(SANITIZE)
# The CUDA runtime is linked statically: it loads the driver itself, so the
# program starts (and says "no CUDA device") on a machine without one.
CUDA_LIBS = -L$(CUDA_HOME)/lib64 -lcudart_static -lnvrtc -lcublas -lcudnn \
            -Wl,-rpath,$(CUDA_HOME)/lib64 -ldl -lrt
LDLIBS  += $(CUDA_LIBS) -lm -pthread

CORE_SRC = $(wildcard src/core/*.c)
CUDA_SRC = $(wildcard src/cuda/*.c)
LSTM_SRC = $(wildcard src/lstm/*.c)
LUA_SRC  = $(wildcard src/lua/*.c)
CLI_SRC  = $(wildcard src/cli/*.c)
LIB_SRC  = $(CORE_SRC) $(CUDA_SRC) $(LSTM_SRC)
CTEST_SRC = $(wildcard tests/c/test_*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIB_OBJ  = $(call obj,$(LIB_SRC))
LUA_OBJ  = $(call obj,$(LUA_SRC))
CLI_OBJ  = $(call obj,$(CLI_SRC))
CTESTS   = $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(CTEST_SRC))

.PHONY: all setup test test-c test-lua gpu-test check-asan fuzz check-fuzz clean help
all: $(BUILD)/spk $(BUILD)/spk.so $(CTESTS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libspk.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# -Wl,-E exports the Lua API from the program, so Lua C modules it loads
# (busted's helpers, for example) bind to the same interpreter.
$(BUILD)/spk: $(CLI_OBJ) $(LUA_OBJ) $(BUILD)/libspk.a
	$(CC) $(CFLAGS) -Wl,-E -o $@ $(CLI_OBJ) $(LUA_OBJ) $(BUILD)/libspk.a $(LUA_LIB) -lreadline $(LDLIBS)

$(BUILD)/spk.so: $(LUA_OBJ) $(BUILD)/libspk.a
	$(CC) $(CFLAGS) -shared -o $@ $(LUA_OBJ) $(BUILD)/libspk.a $(LDLIBS)

$(BUILD)/tests/%: tests/c/%.c tests/c/check.h $(BUILD)/libspk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/c -o $@ $< $(BUILD)/libspk.a $(LDLIBS)

setup:
	@scripts/setup.sh

test: all
	@BUILD=$(BUILD) scripts/test.sh

gpu-test: all
	@BUILD=$(BUILD) scripts/gpu-test.sh

# The C tests and the busted specs (run inside build-asan/spk) under ASan,
# LeakSanitizer and UBSan. protect_shadow_gap=0: the CUDA driver maps its
# unified address range at fixed low addresses that fall in ASan's shadow
# gap; with the gap protected, CUDA initialisation fails on a GPU machine.
# Options given in ASAN_OPTIONS / UBSAN_OPTIONS come last and win.
check-asan:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 \
	  SANITIZE='-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined' all
	@ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1:$${ASAN_OPTIONS:-}" \
	  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:$${UBSAN_OPTIONS:-}" \
	  BUILD=build-asan SPK_ASAN=1 scripts/test.sh

# ---- fuzzing: libFuzzer targets in tests/fuzz/ (clang, ASan + UBSan) ------
# Each target links only what it exercises: src/core (the .npy and
# .safetensors readers), plus the plain-C LSTM pieces the weight-folder loader
# relies on (layer validation, packing, the reference), and the kernel
# compiler's source, include and cache-entry readers (src/cuda/kernel_files.c,
# plain C). No CUDA.
# Inputs are at most 1 MiB; an allocation over 64 MiB is more than any such
# input can justify, so libFuzzer reports it as a failure (-malloc_limit_mb).
FUZZ_CC       ?= clang
FUZZ_BUILD    ?= build-fuzz
FUZZ_SECONDS  ?= 60
FUZZ_TARGETS   = npy safetensors weights_dir
FUZZ_TARGETS  += kernel_source cache_entry
FUZZ_CFLAGS    = -std=c11 -O1 -g -Wall -Wextra -D_GNU_SOURCE -pthread -Isrc -fno-omit-frame-pointer \
                 -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_OPTIONS   = -max_len=1048576 -malloc_limit_mb=64 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1
fuzz_obj       = $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(1))
FUZZ_CORE_OBJ  = $(call fuzz_obj,$(CORE_SRC))
FUZZ_LSTM_OBJ  = $(call fuzz_obj,src/lstm/layers.c src/lstm/pack.c src/lstm/reference.c)
FUZZ_KERNEL_OBJ = $(call fuzz_obj,src/cuda/kernel_files.c src/cuda/sha256.c)
FUZZ_BINS      = $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_TARGETS))

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/fuzz_npy: $(call fuzz_obj,tests/fuzz/fuzz_npy.c) $(FUZZ_CORE_OBJ)
$(FUZZ_BUILD)/fuzz_safetensors: $(call fuzz_obj,tests/fuzz/fuzz_safetensors.c) $(FUZZ_CORE_OBJ)
$(FUZZ_BUILD)/fuzz_weights_dir: $(call fuzz_obj,tests/fuzz/fuzz_weights_dir.c) $(FUZZ_CORE_OBJ) $(FUZZ_LSTM_OBJ)
$(FUZZ_BUILD)/fuzz_kernel_source: $(call fuzz_obj,tests/fuzz/fuzz_kernel_source.c) $(FUZZ_CORE_OBJ) $(FUZZ_KERNEL_OBJ)
$(FUZZ_BUILD)/fuzz_cache_entry: $(call fuzz_obj,tests/fuzz/fuzz_cache_entry.c) $(FUZZ_CORE_OBJ) $(FUZZ_KERNEL_OBJ)
$(FUZZ_BINS):
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ -lm

# make fuzz [FUZZ_SECONDS=60]: each target for FUZZ_SECONDS, starting from the
# committed seeds; what it finds new goes to $(FUZZ_BUILD)/corpus/<target>,
# a failing input to $(FUZZ_BUILD)/artifacts/.
fuzz: $(FUZZ_BINS)
	@mkdir -p $(FUZZ_BUILD)/artifacts
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_OPTIONS) -max_total_time=$(FUZZ_SECONDS) \
	    -dict=tests/fuzz/$$t.dict -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t- \
	    $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t; \
	done

# make check-fuzz: CI's short pass. Replays every committed seed, then fuzzes
# each target for 20 s into a scratch corpus.
check-fuzz: $(FUZZ_BINS)
	@mkdir -p $(FUZZ_BUILD)/artifacts
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "check-fuzz: $$t: replaying tests/fuzz/corpus/$$t"; \
	  $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_OPTIONS) -runs=0 tests/fuzz/corpus/$$t; \
	  scratch=$$(mktemp -d); \
	  echo "check-fuzz: $$t: 20 s"; \
	  $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_OPTIONS) -max_total_time=20 -dict=tests/fuzz/$$t.dict \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t- $$scratch tests/fuzz/corpus/$$t \
	    || { rm -rf "$$scratch"; exit 1; }; \
	  rm -rf "$$scratch"; \
	done

clean:
	rm -rf build build-asan $(FUZZ_BUILD)

help:
	@echo "make setup       install what this machine lacks (apt-get) and check CUDA"
	@echo "make             build build/spk, build/spk.so and the C tests"
	@echo "make test        run every suite (C, Lua specs, program); last line N passed, N failed"
	@echo "make gpu-test    the GPU suite and benchmark, on a machine with a GPU"
	@echo "make check-asan  the C and Lua suites under AddressSanitizer and UBSan"
	@echo "make fuzz        each libFuzzer target for FUZZ_SECONDS (default 60) (clang)"
	@echo "make check-fuzz  replay the fuzz seed corpus and fuzz each target for 20 s"

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)
