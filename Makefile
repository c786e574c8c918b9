# spk: build, test, install and set-up. `make help` lists the targets.
CUDA_HOME ?= /usr/local/cuda
LUA_INC   ?= /usr/include/lua5.4
LUA_LIB   ?= /usr/lib/x86_64-linux-gnu/liblua5.4.a
BUILD     ?= build

CC      ?= gcc
OPT     ?= -O2
CFLAGS  += -std=c11 -ffp-contract=off $(OPT) -g -Wall -Wextra -fPIC -D_GNU_SOURCE -pthread \
           -Isrc -Ikernels -I$(CUDA_HOME)/include -I$(LUA_INC) $(SANITIZE)
# The CUDA runtime is linked statically: it loads the driver itself, so the
# program starts (and says "no CUDA device") on a machine without one.
CUDA_LIBS = -L$(CUDA_HOME)/lib64 -lcudart_static -lnvrtc -lcublas -lcudnn \
            -Wl,-rpath,$(CUDA_HOME)/lib64 -ldl -lrt
# ONNX models are read and written with protobuf-c, over the onnx.proto that
# Debian's libonnx-dev installs; protoc-c generates the C code into
# $(BUILD)/gen at build time. libprotobuf-c is linked statically (the GPU
# machine has no protobuf-c), its symbols kept out of spk.so's exports so that
# its non-PIC objects link into the shared module.
ONNX_PROTO     ?= /usr/include/onnx/onnx.proto
PROTOC_C       ?= protoc-c
PROTOBUF_C_LIB ?= /usr/lib/x86_64-linux-gnu/libprotobuf-c.a
GEN             = $(BUILD)/gen
CFLAGS  += -I$(GEN)
LDLIBS  += $(PROTOBUF_C_LIB) -Wl,--exclude-libs,libprotobuf-c.a $(CUDA_LIBS) -lm -pthread

# One short line per file made; `make V=1` prints the commands instead.
V ?= 0
ifeq ($(V),1)
say =
else
say = @printf '  %-7s %s\n' '$(1)' '$(2)';
endif

# Sources, per layer. A new source folder (generated code included: its
# object lands in $(BUILD)/obj/<its path>.o) joins LIB_SRC.
CORE_SRC = $(wildcard src/core/*.c)
CUDA_SRC = $(wildcard src/cuda/*.c)
LSTM_SRC = $(wildcard src/lstm/*.c)
LUA_SRC  = $(wildcard src/lua/*.c)
CLI_SRC  = $(wildcard src/cli/*.c)
GEN_SRC  = $(GEN)/onnx.pb-c.c
LIB_SRC  = $(CORE_SRC) $(CUDA_SRC) $(LSTM_SRC) $(GEN_SRC)
CTEST_SRC = $(wildcard tests/c/test_*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIB_OBJ  = $(call obj,$(LIB_SRC))
LUA_OBJ  = $(call obj,$(LUA_SRC))
CLI_OBJ  = $(call obj,$(CLI_SRC))
CTESTS   = $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(CTEST_SRC))
# A stand-in for a profiler's NVTX injection library: the tests see through
# it the ranges spk emits (tests/c/nvtx_tool.c).
NVTX_TOOL = $(BUILD)/tests/nvtx_tool.so

# Where spk finds its files at run time is decided in src/core/paths.c alone.
# A build also knows the source tree it was compiled from; the copies that
# make install installs ($(BUILD)/install/) are linked without it.
PATHS_OBJ = $(call obj,src/core/paths.c)
$(PATHS_OBJ): CFLAGS += -DSPK_SOURCE_DIR='"$(CURDIR)"'
INSTALL_LIB_OBJ = $(filter-out $(PATHS_OBJ),$(LIB_OBJ)) $(BUILD)/install/obj/paths.o

.PHONY: all setup test gpu-test check-asan fuzz check-fuzz install install-build uninstall clean help
all: $(BUILD)/spk $(BUILD)/spk.so $(CTESTS) $(NVTX_TOOL)

# The commit a build is made from, and whether tracked files differ from it
# (spk.version, spk --version, every results file's provenance), asked of git
# at every make (scripts/build_info.sh; a tarball without .git: see there).
# The header changes only when they do, so only then do its users recompile.
BUILD_INFO = $(GEN)/build_info.h
$(BUILD_INFO): FORCE
	@scripts/build_info.sh $@
$(call obj,src/lua/system.c src/cli/main.c): $(BUILD_INFO)
FORCE:

# (a pattern rule: one run makes both files, for build/, build-asan/ and build-fuzz/)
%/gen/onnx.pb-c.c %/gen/onnx.pb-c.h: $(ONNX_PROTO)
	@mkdir -p $(@D)
	$(call say,GEN,$@)$(PROTOC_C) --proto_path=$(dir $(ONNX_PROTO)) --c_out=$(@D) $(notdir $(ONNX_PROTO))
.PRECIOUS: %/gen/onnx.pb-c.c %/gen/onnx.pb-c.h

# Every object may include the generated header: it exists before any compiles.
$(BUILD)/obj/%.o: %.c | $(GEN)/onnx.pb-c.h
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/install/obj/paths.o: src/core/paths.c
	@mkdir -p $(dir $@)
	$(call say,CC,$< (for make install))$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libspk.a: $(LIB_OBJ)
$(BUILD)/install/libspk.a: $(INSTALL_LIB_OBJ)
$(BUILD)/libspk.a $(BUILD)/install/libspk.a:
	@mkdir -p $(dir $@)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

# -Wl,-E exports the Lua API from the program, so Lua C modules it loads
# (busted's helpers, for example) bind to the same interpreter.
$(BUILD)/spk $(BUILD)/spk.so: $(BUILD)/libspk.a
$(BUILD)/install/spk $(BUILD)/install/spk.so: $(BUILD)/install/libspk.a
$(BUILD)/spk $(BUILD)/install/spk: $(CLI_OBJ) $(LUA_OBJ)
	$(call say,LD,$@)$(CC) $(CFLAGS) -Wl,-E -o $@ $(CLI_OBJ) $(LUA_OBJ) $(filter %.a,$^) $(LUA_LIB) -lreadline $(LDLIBS)

$(BUILD)/spk.so $(BUILD)/install/spk.so: $(LUA_OBJ)
	$(call say,LD,$@)$(CC) $(CFLAGS) -shared -o $@ $(LUA_OBJ) $(filter %.a,$^) $(LDLIBS)

$(BUILD)/tests/%: tests/c/%.c tests/c/check.h $(BUILD)/libspk.a | $(GEN)/onnx.pb-c.h
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(CFLAGS) -Itests/c -o $@ $< $(BUILD)/libspk.a $(LDLIBS)

$(NVTX_TOOL): tests/c/nvtx_tool.c
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(CFLAGS) -shared -o $@ $<

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
ASAN_MAKE = $(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 \
	  SANITIZE='-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined'
ASAN_ENV  = ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1:$${ASAN_OPTIONS:-}" \
	  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:$${UBSAN_OPTIONS:-}"
check-asan:
	@$(ASAN_MAKE) all
	@$(ASAN_ENV) BUILD=build-asan SPK_ASAN=1 scripts/test.sh

# ---- fuzzing: libFuzzer targets in tests/fuzz/ (clang, ASan + UBSan) ------
# Each target links only what it exercises: src/core (the .npy and
# .safetensors readers), plus the plain-C LSTM pieces the weight-folder loader
# relies on (layer validation, packing, the reference); the ONNX target adds
# the ONNX reader, the LSTM-stack finder and protobuf-c (not instrumented:
# Debian's library, whose allocations still count against the limits); the
# kernel compiler's source, include and cache-entry readers
# (src/cuda/kernel_files.c, plain C). No CUDA.
# Inputs are at most 1 MiB; an allocation over 64 MiB is more than any such
# input can justify, so libFuzzer reports it as a failure (-malloc_limit_mb).
# The leak checker is on for every input (-detect_leaks=1, and LeakSanitizer
# forced on whatever ASAN_OPTIONS says): an error path that forgets to free
# is a failure. The seed corpora hold inputs that fail at each stage of
# each reader, so every replay walks those paths.
FUZZ_CC       ?= clang
FUZZ_BUILD    ?= build-fuzz
FUZZ_SECONDS  ?= 60
FUZZ_TARGETS   = npy safetensors weights_dir onnx
FUZZ_TARGETS  += kernel_source cache_entry
FUZZ_CFLAGS    = -std=c11 -ffp-contract=off -O1 -g -Wall -Wextra -D_GNU_SOURCE -pthread -Isrc -I$(FUZZ_BUILD)/gen -fno-omit-frame-pointer \
                 -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_OPTIONS   = -max_len=1048576 -malloc_limit_mb=64 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 -detect_leaks=1
FUZZ_ENV       = ASAN_OPTIONS="$${ASAN_OPTIONS:-}:detect_leaks=1"
fuzz_obj       = $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(1))
FUZZ_CORE_OBJ  = $(call fuzz_obj,$(filter-out src/core/onnx.c,$(CORE_SRC)))
FUZZ_LSTM_OBJ  = $(call fuzz_obj,src/lstm/layers.c src/lstm/pack.c src/lstm/reference.c)
FUZZ_ONNX_OBJ  = $(call fuzz_obj,src/core/onnx.c $(wildcard src/lstm/onnx_*.c) $(FUZZ_BUILD)/gen/onnx.pb-c.c)
FUZZ_KERNEL_OBJ = $(call fuzz_obj,src/cuda/kernel_files.c src/cuda/sha256.c)
FUZZ_BINS      = $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_TARGETS))
# The tuning-record reader is Lua: its target (tests/fuzz/fuzz_tuning_record.lua,
# which says why it is no libFuzzer binary) runs inside the sanitizer build of
# the spk program, a failing input going to $(FUZZ_BUILD)/artifacts/ too.
LUA_FUZZ       = $(ASAN_ENV) build-asan/spk run tests/fuzz/fuzz_tuning_record.lua \
                 --artifacts $(FUZZ_BUILD)/artifacts

$(FUZZ_BUILD)/obj/%.o: %.c | $(FUZZ_BUILD)/gen/onnx.pb-c.h
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/fuzz_npy: $(call fuzz_obj,tests/fuzz/fuzz_npy.c) $(FUZZ_CORE_OBJ)
$(FUZZ_BUILD)/fuzz_safetensors: $(call fuzz_obj,tests/fuzz/fuzz_safetensors.c) $(FUZZ_CORE_OBJ)
$(FUZZ_BUILD)/fuzz_weights_dir: $(call fuzz_obj,tests/fuzz/fuzz_weights_dir.c) $(FUZZ_CORE_OBJ) $(FUZZ_LSTM_OBJ)
$(FUZZ_BUILD)/fuzz_onnx: $(call fuzz_obj,tests/fuzz/fuzz_onnx.c) $(FUZZ_CORE_OBJ) $(FUZZ_LSTM_OBJ) $(FUZZ_ONNX_OBJ)
$(FUZZ_BUILD)/fuzz_onnx: FUZZ_LIBS = $(PROTOBUF_C_LIB)
$(FUZZ_BUILD)/fuzz_kernel_source: $(call fuzz_obj,tests/fuzz/fuzz_kernel_source.c) $(FUZZ_CORE_OBJ) $(FUZZ_KERNEL_OBJ)
$(FUZZ_BUILD)/fuzz_cache_entry: $(call fuzz_obj,tests/fuzz/fuzz_cache_entry.c) $(FUZZ_CORE_OBJ) $(FUZZ_KERNEL_OBJ)
$(FUZZ_BINS):
	$(call say,LD,$@)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS) -lm

# make fuzz [FUZZ_SECONDS=60]: each target for FUZZ_SECONDS, starting from the
# committed seeds; what it finds new goes to $(FUZZ_BUILD)/corpus/<target>,
# a failing input to $(FUZZ_BUILD)/artifacts/.
fuzz: $(FUZZ_BINS)
	@mkdir -p $(FUZZ_BUILD)/artifacts
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_ENV) $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_OPTIONS) -max_total_time=$(FUZZ_SECONDS) \
	    -dict=tests/fuzz/$$t.dict -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t- \
	    $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t; \
	done
	@$(ASAN_MAKE) build-asan/spk
	@mkdir -p $(FUZZ_BUILD)/corpus/tuning_record
	@echo "fuzz: tuning_record for $(FUZZ_SECONDS) s"
	@$(LUA_FUZZ) --seconds $(FUZZ_SECONDS) --corpus-out $(FUZZ_BUILD)/corpus/tuning_record \
	  tests/fuzz/corpus/tuning_record $(FUZZ_BUILD)/corpus/tuning_record

# make check-fuzz: CI's short pass. Replays every committed seed, then fuzzes
# each target for 20 s into a scratch corpus (the tuning-record target too).
# Each target is a goal of its own (check-fuzz-<target>), so make -j runs them
# side by side: a target's output goes to $(FUZZ_BUILD)/logs/<target>.log,
# shown in full when it fails, and one line says how many inputs it ran.
FUZZ_CHECKS    = $(patsubst %,check-fuzz-%,$(FUZZ_TARGETS)) check-fuzz-tuning_record
fuzz_inputs    = $$(sed -n 's/.*stat::number_of_executed_units: *\([0-9]*\).*/\1/p' $(1) | tail -n 1)
.PHONY: $(FUZZ_CHECKS)
check-fuzz: $(FUZZ_CHECKS)
$(filter-out check-fuzz-tuning_record,$(FUZZ_CHECKS)): check-fuzz-%: $(FUZZ_BUILD)/fuzz_%
	@mkdir -p $(FUZZ_BUILD)/artifacts $(FUZZ_BUILD)/logs
	@log=$(FUZZ_BUILD)/logs/$*.log; scratch=$$(mktemp -d); \
	echo "check-fuzz: $*: replaying tests/fuzz/corpus/$*, then 20 s"; \
	if $(FUZZ_ENV) $(FUZZ_BUILD)/fuzz_$* $(FUZZ_OPTIONS) -runs=0 tests/fuzz/corpus/$* >$$log 2>&1 && \
	   $(FUZZ_ENV) $(FUZZ_BUILD)/fuzz_$* $(FUZZ_OPTIONS) -max_total_time=20 -dict=tests/fuzz/$*.dict \
	     -artifact_prefix=$(FUZZ_BUILD)/artifacts/$*- $$scratch tests/fuzz/corpus/$* >>$$log 2>&1; then \
	  rm -rf "$$scratch"; echo "check-fuzz: $*: no failure in $(call fuzz_inputs,$$log) inputs ($$log)"; \
	else \
	  rm -rf "$$scratch"; cat "$$log"; echo "check-fuzz: $*: FAILED (input in $(FUZZ_BUILD)/artifacts/, log $$log)"; exit 1; \
	fi
check-fuzz-tuning_record:
	@$(ASAN_MAKE) build-asan/spk
	@mkdir -p $(FUZZ_BUILD)/artifacts $(FUZZ_BUILD)/logs
	@log=$(FUZZ_BUILD)/logs/tuning_record.log; \
	echo "check-fuzz: tuning_record: replaying tests/fuzz/corpus/tuning_record, then 20 s"; \
	if $(LUA_FUZZ) --seconds 0 tests/fuzz/corpus/tuning_record >$$log 2>&1 && \
	   $(LUA_FUZZ) --seconds 20 tests/fuzz/corpus/tuning_record >>$$log 2>&1; then \
	  echo "check-fuzz: tuning_record: no failure ($$(tail -n 1 $$log))"; \
	else \
	  cat "$$log"; echo "check-fuzz: tuning_record: FAILED (log $$log)"; exit 1; \
	fi

# ---- install: make install [PREFIX=/usr/local] [DESTDIR=staging] ----------
# The layout spk finds its files in, relative to the program and the module
# (src/core/paths.h), so an installed tree may be moved as a whole:
#   $(BINDIR)/spk, $(LIBDIR)/spk.so (where lua5.4 looks for C modules),
#   $(LUADIR)/spk/ (the Lua files), $(DATADIR)/kernels, experiments, tools
#   (its spk scripts), $(DOCDIR) (README.md and docs/), $(MANDIR)/man1/spk.1
#   (man/spk.1: tools/man_page.lua writes it from the help texts).
# The rockspec sets BINDIR, LIBDIR, LUADIR and DATADIR for a LuaRocks tree.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib/lua/5.4
LUADIR  ?= $(PREFIX)/share/lua/5.4
DATADIR ?= $(PREFIX)/share/spk
DOCDIR  ?= $(PREFIX)/share/doc/spk
MANDIR  ?= $(PREFIX)/share/man

# What is installed below each folder, as paths relative to the folder the
# files come from (the first argument of install_files).
LUA_FILES        = $(patsubst lua/%,%,$(sort $(shell find lua/spk -type f -name '*.lua')))
KERNEL_FILES     = $(sort $(wildcard kernels/*.cu kernels/*.cuh))
EXPERIMENT_FILES = $(sort $(wildcard experiments/*.lua experiments/kernels/*.lua experiments/kernels/*.cu))
# tools/onnx_ort_check.py is what spk bench's CPU section runs ONNX Runtime with.
TOOL_FILES       = $(sort $(wildcard tools/*.lua) tools/onnx_ort_check.py)
DOC_FILES        = README.md $(sort $(shell find docs -type f))

# $(call install_files,FROM,FILES,TO): FROM/f to $(DESTDIR)TO/f for each f,
# executable where it is executable in the tree.
install_files = $(call say,INSTALL,$(DESTDIR)$(3)/ ($(words $(2)) files))cd $(1) && for f in $(2); do \
  if [ -x "$$f" ]; then mode=755; else mode=644; fi; \
  install -D -m $$mode "$$f" "$(DESTDIR)$(3)/$$f" || exit 1; done
# $(call uninstall_files,FILES,FROM): removes them, then the folders they leave empty.
uninstall_files = $(call say,RM,$(DESTDIR)$(2)/ ($(words $(1)) files))if cd "$(DESTDIR)$(2)" 2>/dev/null; then \
  rm -f $(1); for d in $(sort $(filter-out ./,$(dir $(1)))); do \
  if [ -d "$$d" ]; then rmdir -p --ignore-fail-on-non-empty "$$d" || exit 1; fi; done; fi

install-build: $(BUILD)/install/spk $(BUILD)/install/spk.so

install: install-build
	$(call say,INSTALL,$(DESTDIR)$(BINDIR)/spk)install -D -m 755 $(BUILD)/install/spk "$(DESTDIR)$(BINDIR)/spk"
	$(call say,INSTALL,$(DESTDIR)$(LIBDIR)/spk.so)install -D -m 755 $(BUILD)/install/spk.so "$(DESTDIR)$(LIBDIR)/spk.so"
	$(call install_files,lua,$(LUA_FILES),$(LUADIR))
	$(call install_files,.,$(KERNEL_FILES) $(EXPERIMENT_FILES) $(TOOL_FILES),$(DATADIR))
	$(call install_files,.,$(DOC_FILES),$(DOCDIR))
	$(call install_files,man,spk.1,$(MANDIR)/man1)

uninstall:
	$(call say,RM,$(DESTDIR)$(BINDIR)/spk)rm -f "$(DESTDIR)$(BINDIR)/spk"
	$(call say,RM,$(DESTDIR)$(LIBDIR)/spk.so)rm -f "$(DESTDIR)$(LIBDIR)/spk.so"
	$(call uninstall_files,$(LUA_FILES),$(LUADIR))
	$(call uninstall_files,$(KERNEL_FILES) $(EXPERIMENT_FILES) $(TOOL_FILES),$(DATADIR))
	$(call uninstall_files,$(DOC_FILES),$(DOCDIR))
	$(call uninstall_files,spk.1,$(MANDIR)/man1)
	@rmdir "$(DESTDIR)$(DATADIR)" "$(DESTDIR)$(DOCDIR)" "$(DESTDIR)$(MANDIR)/man1" 2>/dev/null || true

clean:
	rm -rf build build-asan $(FUZZ_BUILD)

help:
	@echo "make setup       install what this machine lacks (apt-get) and check CUDA"
	@echo "make             build build/spk, build/spk.so and the C tests (V=1: print the commands)"
	@echo "make test        run every suite (C, Lua specs, program); last line N passed, N failed"
	@echo "                 (SPK_VERBOSE=1: the kernel compile tests' register tables too)"
	@echo "make gpu-test    the GPU suite and benchmark, on a machine with a GPU"
	@echo "make check-asan  the C and Lua suites under AddressSanitizer and UBSan"
	@echo "make fuzz        each libFuzzer target for FUZZ_SECONDS (default 60) (clang)"
	@echo "make check-fuzz  replay the fuzz seed corpus and fuzz each target for 20 s"
	@echo "make install     bin/spk, lib/lua/5.4/spk.so, share/lua/5.4/spk/, share/spk/, share/doc/spk/,"
	@echo "                 share/man/man1/spk.1"
	@echo "                 under PREFIX (default /usr/local), staged below DESTDIR if given"
	@echo "make install-build  only build what make install copies ($(BUILD)/install/: no source paths)"
	@echo "make uninstall   remove what make install installed (same PREFIX and DESTDIR)"
	@echo "make clean       remove the build folders"
	@echo "make help        this list"

-include $(shell find $(BUILD)/obj $(BUILD)/install/obj -name '*.d' 2>/dev/null)
-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)
