# gptkit: one entry point. make | make test | make check | make fuzz | make tsan | make valgrind | make demo | make bench | make bench-gpu | make install
# Sources are found by wildcard: common/**.c -> libgptcommon.a, kernels/**.c -> libgptkernels.a,
# <tool>/*.c -> bin/gpt-<tool>, tests/unit/test_*.c -> one test binary each.

PREFIX  ?= /usr/local
VERSION := 0.1.0
BUILD   ?= build
CC      ?= cc
SAN     ?=
PKGS    := libpcre2-8 libarchive jansson zlib openblas libcurl libcrypto libzstd snappy liblz4

# Plain `make` on a machine without the -dev packages names the missing ones (as Debian packages)
# instead of failing on a header; the targets that install them first (deps, test, check, demo,
# bench) are let through. DEBS pairs each pkg-config module with its Debian package.
DEBS    := libpcre2-8:libpcre2-dev libarchive:libarchive-dev jansson:libjansson-dev zlib:zlib1g-dev \
           openblas:libopenblas-dev libcurl:libcurl4-openssl-dev libcrypto:libssl-dev \
           libzstd:libzstd-dev snappy:libsnappy-dev liblz4:liblz4-dev
MISSING := $(shell for p in $(PKGS); do pkg-config --exists $$p 2>/dev/null || \
             echo "$(DEBS) $$p:$$p" | tr ' ' '\n' | grep -m1 "^$$p:" | cut -d: -f2; done)
# Gloo (libgloo-dev) has no pkg-config module: its header tells (in /usr/include or on CPATH).
MISSING += $(if $(wildcard $(addsuffix /gloo/config.h,/usr/include $(subst :, ,$(CPATH)))),,libgloo-dev)
ifneq ($(strip $(MISSING)),)
ifeq ($(filter deps test check fuzz tsan valgrind demo bench bench-gpu clean,$(MAKECMDGOALS)),)
$(error missing build dependencies: $(MISSING). Run 'make deps' (installs them with apt-get))
endif
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

OPT      ?= -O2
CFLAGS   ?= -g
GK_CFLAGS := $(OPT) -std=c11 -D_GNU_SOURCE -Wall -Wextra -fopenmp -fno-math-errno -I. $(PKG_CFLAGS) \
            -DGPTKIT_VERSION='"$(VERSION)"' -DGPTKIT_DATADIR='"$(PREFIX)/share/gptkit"'
# libgomp is linked statically so that kernels/cpu/cpu.c can bound its spin before it starts.
# kernels/comm/*.cc (the Gloo collectives) are C++: the tools link Gloo and the C++ runtime;
# -fopenmp-simd vectorizes their `omp simd` loops (bf16 sums) without OpenMP's runtime.
GK_CXXFLAGS := $(OPT) -std=c++17 -D_GNU_SOURCE -Wall -Wextra -fopenmp-simd -I.
LDLIBS   += $(PKG_LIBS) -lgloo -lstdc++ -lm -Wl,-Bstatic -lgomp -Wl,-Bdynamic -pthread
ifeq ($(SAN),1)
GK_CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
GK_CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif
# TSAN=1 (make tsan): ThreadSanitizer, for the code that runs threads of its own.
ifeq ($(TSAN),1)
GK_CFLAGS += -fsanitize=thread -fno-omit-frame-pointer
GK_CXXFLAGS += -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS  += -fsanitize=thread
# The CPU kernels are OpenMP (not checkable) and pick their code by ifunc resolvers, which run
# before TSan's runtime is up: they are left uninstrumented.
$(BUILD)/obj/kernels/cpu/%.o: GK_CFLAGS := $(filter-out -fsanitize=thread,$(GK_CFLAGS))
endif
# The CPU kernels: -fno-trapping-math lets GCC if-convert the clamps of gk_vexpf's callers (GELU,
# softmax, the attention backward) on the AVX2 clones: without AVX-512's masks, a compare that
# might raise an FP exception kept those loops scalar (GELU backward 11x slower on x86-64-v3).
# Nothing here reads the FP exception flags; the operations and their order do not change.
$(BUILD)/obj/kernels/cpu/%.o: GK_CFLAGS += -fno-trapping-math
# FUZZ=1 (make fuzz: clang, with SAN=1): coverage for libFuzzer; clang's OpenMP runtime
# instead of the static libgomp (`,` names a comma inside $(subst)).
, := ,
# The tools link Gloo's C++ (through the cpu and ref backends' collectives slot), whose UBSan
# checks (vptr) need the sanitizers' C++ runtime, which the C driver links only when asked.
ifeq ($(FUZZ),1)
GK_CFLAGS += -fsanitize=fuzzer-no-link
GK_CXXFLAGS += -fsanitize=fuzzer-no-link
LDFLAGS  += -fsanitize-link-c++-runtime
LDLIBS := $(subst -Wl$(,)-Bstatic -lgomp -Wl$(,)-Bdynamic,-fopenmp,$(LDLIBS))
endif

TOOLS        := tokenize train sample evalppl ckpt
BUILT_TOOLS  := $(foreach t,$(TOOLS),$(if $(wildcard $(t)/main.c),$(t)))
BINS         := $(BUILT_TOOLS:%=$(BUILD)/bin/gpt-%)

COMMON_SRC   := $(wildcard common/*.c common/*/*.c)
KERNELS_SRC  := $(wildcard kernels/*.c kernels/model/*.c kernels/infer/*.c kernels/ref/*.c kernels/cpu/*.c kernels/comm/*.c kernels/comm/*.cc)
COMMON_LIB   := $(BUILD)/libgptcommon.a
KERNELS_LIB  := $(BUILD)/libgptkernels.a
LIBS         := $(KERNELS_LIB) $(COMMON_LIB)
UNIT_SRC     := $(wildcard tests/unit/test_*.c)
UNIT_BINS    := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# tests/fuzz/fuzz_NAME.c: a libFuzzer target, built as BUILD/fuzz/fuzz_NAME by `make fuzz` and as
# the replay test BUILD/tests/test_fuzz_NAME (tests/fuzz/replay.c as its main) by `make test`.
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_TESTS   := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(BUILD)/tests/test_fuzz_%)
FUZZERS      := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(BUILD)/fuzz/fuzz_%)
FUZZ_SECONDS ?= 60

obj = $(patsubst %.cc,$(BUILD)/obj/%.o,$(patsubst %.c,$(BUILD)/obj/%.o,$(1)))

# ---- the CUDA backend: kernels/cuda/*.cu as two shared libraries the tools dlopen ----
# libgptkit-cuda.so: nvcc (when found: $(NVCC), else nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# one -gencode per CUDA_ARCH plus PTX of the last, linked with cuBLASLt and the CUDA runtime (NCCL
# is loaded at run time: see NCCL below).
# libgptkit-cuda-emu.so: the same sources by $(CXX) against kernels/emu (the CUDA emulator), built
# whenever a C++ compiler is present. Both export one symbol (-fvisibility=hidden) and carry the
# C objects they need (common/err.c, kernels/backend_err.c, kernels/backend_compose.c) compiled -fPIC.
ifeq ($(origin NVCC),undefined)
NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
endif
CUDA_ARCH  ?= 80 90
CUDA_HOME  ?= $(patsubst %/bin/,%,$(dir $(NVCC)))
# NCCL_HOME: NCCL's folder (include/, lib/) when it is not in CUDA_HOME (tests/bench/gpu_kit.sh).
NCCL_HOME  ?=
# NCCL=1 when nccl.h is found: libgptkit-cuda.so then loads libnccl.so.2 when a run of several
# CUDA ranks opens its communicator (one GPU needs no NCCL at all). NCCL=0 (or no nccl.h) builds
# it without: such a run is refused with a line saying so.
NCCL       ?= $(if $(wildcard $(NCCL_HOME)/include/nccl.h $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h),1,0)
CUDA_SRC   := $(wildcard kernels/cuda/*.cu)
# cuDNN's fused attention (kernels/cuda/attention_cudnn.cpp: host code on NVIDIA's header-only
# cudnn-frontend, built by $(CXX)) is built with cuDNN when cudnn_frontend.h (CUDNN_FRONTEND_INCLUDE:
# the include/ of the PyPI wheel nvidia-cudnn-frontend, which .ci/deps.sh copies to
# /usr/local/include) and cudnn.h are found; libcudnn.so.9 is loaded at run time (the frontend's
# dynamic loading), so that the library loads without it. CUDNN=0 (or no headers) builds it
# without: attention = auto then runs the own kernels, attention = cudnn is refused in one line.
CUDNN_FRONTEND_INCLUDE ?= $(patsubst %/cudnn_frontend.h,%,$(firstword $(wildcard \
              $(CUDA_HOME)/include/cudnn_frontend.h /usr/local/include/cudnn_frontend.h /usr/include/cudnn_frontend.h)))
CUDNN      ?= $(if $(and $(CUDNN_FRONTEND_INCLUDE),$(wildcard $(CUDA_HOME)/include/cudnn.h /usr/include/cudnn.h \
              /usr/include/x86_64-linux-gnu/cudnn.h $(CUDNN_FRONTEND_INCLUDE)/cudnn.h)),1,0)
CUDA_CXXSRC := kernels/cuda/attention_cudnn.cpp
CUDNN_CXXFLAGS := -std=c++17 -O2 -fPIC -fvisibility=hidden -Wall -Wextra -I. -isystem $(CUDA_HOME)/include -MMD -MP \
              $(if $(filter 1,$(CUDNN)),-DGK_HAVE_CUDNN -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING -isystem $(CUDNN_FRONTEND_INCLUDE))
CUDA_CSRC  := common/err.c kernels/backend_err.c kernels/backend_compose.c
CUDA_LIB   := $(BUILD)/lib/libgptkit-cuda.so
EMU_LIB    := $(BUILD)/lib/libgptkit-cuda-emu.so
HAVE_CXX   := $(shell command -v $(CXX) 2>/dev/null)
CUDA_LIBS  := $(if $(and $(NVCC),$(CUDA_SRC)),$(CUDA_LIB)) $(if $(and $(HAVE_CXX),$(CUDA_SRC)),$(EMU_LIB))
# CUDA_DEFS: -D knobs for the kernels, in both builds (attention_fa2_bwd.cu's, attention_flash.cu's,
# cuda_internal.h's CU_COL_CHUNKS; measured by tests/bench/gpu_session.sh's variants step).
CUDA_DEFS  ?=
NVCC_FLAGS := -std=c++17 -O3 $(CUDA_DEFS) $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
              -gencode arch=compute_$(lastword $(CUDA_ARCH)),code=compute_$(lastword $(CUDA_ARCH)) \
              -Xcompiler -fPIC,-Wall,-Wextra,-fvisibility=hidden -I. -MMD -MP \
              $(if $(NCCL_HOME),-I$(NCCL_HOME)/include) $(if $(filter 0,$(NCCL)),-DGK_NO_NCCL)
EMU_CXXFLAGS := $(OPT) -g -std=c++17 -D_GNU_SOURCE -DGK_CUDA_EMU -fPIC -fvisibility=hidden -Wall -Wextra -I. \
                $(shell pkg-config --cflags openblas 2>/dev/null) -MMD -MP
# The kernels' sources (.cu) under the emulator contract a * b + c into fused multiply-adds, as
# nvcc does by default, so that a test whose bound misses a GPU's contraction fails here too (an
# H100 found three such, 2026-11-27); on a build machine with FMA, which every x86-64 CPU since
# 2013 has (GK_EMU_CONTRACT=0: off; tests/unit/emu/test_emu_contract.cu fails then, and skips
# on a CPU without FMA).
CPU_FMA := $(shell grep -qw fma /proc/cpuinfo 2>/dev/null && echo y)
GK_EMU_CONTRACT ?= $(if $(CPU_FMA),1,0)
$(if $(or $(CPU_FMA),$(filter 1,$(GK_EMU_CONTRACT)),$(if $(HAVE_CXX),,n)),,$(warning this CPU has no FMA: \
  the CUDA emulator's kernels are built without fused multiply-adds, unlike on a GPU (GK_EMU_CONTRACT=0)))
# The race checker (kernels/emu/emu_race.cpp) sees the kernels' loads and stores through GCC's
# ThreadSanitizer instrumentation of the .cu sources, with the emulator as its runtime (no
# libtsan is linked); GCC only, and not with SAN=1, which ASan excludes. (-Wno-tsan: fences need
# nothing among coroutines.)
CXX_IS_GCC := $(shell $(CXX) --version 2>/dev/null | grep -q 'Free Software Foundation' && echo y)
EMU_RACE := $(if $(filter 1,$(SAN)),,$(if $(CXX_IS_GCC), \
              -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 -Wno-tsan))
# GCC forms fused multiply-adds only with -fexpensive-optimizations, which -O1 (make check, make
# tsan) leaves off: it is asked for, so that every build of the kernels contracts alike.
EMU_CONTRACT_FLAGS := -mfma -ffp-contract=fast $(if $(CXX_IS_GCC),-fexpensive-optimizations)
EMU_CUFLAGS := $(if $(filter 1,$(GK_EMU_CONTRACT)),$(EMU_CONTRACT_FLAGS)) $(CUDA_DEFS) $(EMU_RACE)
EMU_LDLIBS := $(shell pkg-config --libs openblas 2>/dev/null) -pthread -ldl -lm
EMU_LDFLAGS := -Wl,--no-undefined
EMU_SAN    :=
ifeq ($(SAN),1)
EMU_SAN    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
EMU_CXXFLAGS += $(EMU_SAN)
EMU_LDFLAGS := -fsanitize=address,undefined
endif
# EXTRA_LDFLAGS: for every program and library linked here (tests/bench/gpu_kit.sh: its RPATH).
LDFLAGS     += $(EXTRA_LDFLAGS)
EMU_LDFLAGS += $(EXTRA_LDFLAGS)
PIC_CFLAGS := $(OPT) -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -fPIC -fvisibility=hidden -I.
# WERROR=1 (CI): every warning of nvcc, the host compiler under it, g++ and cc is an error.
ifeq ($(WERROR),1)
NVCC_FLAGS   += -Werror all-warnings -Xcompiler -Werror
EMU_CXXFLAGS += -Werror
PIC_CFLAGS   += -Werror
GK_CFLAGS    += -Werror
GK_CXXFLAGS  += -Werror
CUDNN_CXXFLAGS += -Werror
endif

.PHONY: all deps test check fuzz tsan valgrind demo bench bench-gpu install clean lint
all: $(BINS) $(CUDA_LIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(GK_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(GK_CXXFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# Gloo's TCP headers (gloo_mesh.cc subclasses its pair) include gloo/common/memory.h, which
# Debian's libgloo-dev leaves out: a copy from the same Gloo commit, found after the system's.
$(BUILD)/obj/kernels/comm/gloo_mesh.o: GK_CXXFLAGS += -idirafter kernels/comm/gloo_compat

$(COMMON_LIB): $(call obj,$(COMMON_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(KERNELS_LIB): $(call obj,$(KERNELS_SRC))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

.SECONDARY:
.SECONDEXPANSION:
$(BUILD)/bin/gpt-%: $$(call obj,$$(wildcard $$*/*.c)) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The CPU backend's loops are compiled once per instruction-set path (GK_CLONES: x86-64-v4, -v3 and
# the baseline), and the loader picks the machine's best: test_ops_isa_v3 and test_ops_isa_v1 run
# test_ops on the CPU backend with kernels/cpu built for that one path (-DGK_NO_CLONES), so each
# path is checked against the reference on any machine that runs it (skipped, saying so, on one
# that cannot). test_ops itself covers the machine's own path.
CPU_SRC   := $(wildcard kernels/cpu/*.c)
ISA_TESTS := $(if $(filter x86_64,$(shell uname -m)),$(BUILD)/tests/test_ops_isa_v3 $(BUILD)/tests/test_ops_isa_v1)
define isa_path
$(BUILD)/isa/$(1)/kernels/cpu/%.o: kernels/cpu/%.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(GK_CFLAGS) -fno-trapping-math -march=$(2) -DGK_NO_CLONES $$(CFLAGS) -MMD -MP -c $$< -o $$@
$(BUILD)/isa/$(1)/test_ops.o: tests/unit/test_ops.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(GK_CFLAGS) -DOPS_ISA='"$(1)"' $$(CFLAGS) -MMD -MP -c $$< -o $$@
$(BUILD)/tests/test_ops_isa_$(1): $(BUILD)/isa/$(1)/test_ops.o $(CPU_SRC:%.c=$(BUILD)/isa/$(1)/%.o) $(LIBS)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS)
endef
$(eval $(call isa_path,v3,x86-64-v3))
$(eval $(call isa_path,v1,x86-64))

# test_TOOL and test_TOOL_WHAT also link TOOL's modules (all of TOOL/*.c but main.c), so they include their headers.
tool_objs = $(call obj,$(filter-out $(1)/main.c,$(wildcard $(1)/*.c)))
$(BUILD)/tests/test_%: $(BUILD)/obj/tests/unit/test_%.o $$(call tool_objs,$$(firstword $$(subst _, ,$$*))) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# A fuzz target named fuzz_TOOL_WHAT also links TOOL's modules, as the unit tests do.
$(BUILD)/tests/test_fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/replay.o \
    $(BUILD)/obj/tests/fuzz/util.o $$(call tool_objs,$$(firstword $$(subst _, ,$$*))) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/util.o \
    $$(call tool_objs,$$(firstword $$(subst _, ,$$*))) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

# ---- the CUDA backend's rules (its variables are above `all`) ----
$(BUILD)/cuda/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

$(BUILD)/cuda/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(PIC_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/cuda/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CUDNN_CXXFLAGS) -c $< -o $@

# Only the entry is exported: a version script also hides the C++ library's inline instantiations.
$(BUILD)/lib/gptkit-cuda.map:
	@mkdir -p $(dir $@)
	printf '{ global: gk_cuda_backend_entry; local: *; };\n' >$@

$(CUDA_LIB): $(CUDA_SRC:%.cu=$(BUILD)/cuda/%.o) $(CUDA_CXXSRC:%.cpp=$(BUILD)/cuda/%.o) $(CUDA_CSRC:%.c=$(BUILD)/cuda/%.o) $(BUILD)/lib/gptkit-cuda.map
	$(CXX) -shared $(EXTRA_LDFLAGS) -o $@ $(filter %.o,$^) -Wl,--version-script=$(BUILD)/lib/gptkit-cuda.map \
	  $(if $(NCCL_HOME),-L$(NCCL_HOME)/lib -Wl$(,)-rpath$(,)$(NCCL_HOME)/lib) \
	  -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -Wl,--no-undefined -lcublasLt -lcudart -ldl -lpthread -lm
	@$(if $(filter 0,$(NCCL)),echo "note: $@ has no NCCL (no nccl.h found): one GPU a run;" \
	  "install NCCL's development files (libnccl-dev) and rebuild for several")
	@$(if $(filter 0,$(CUDNN)),echo "note: $@ has no cuDNN attention (no cudnn_frontend.h found):" \
	  "the own kernels; .ci/deps.sh installs the headers (CUDNN_FRONTEND_INCLUDE=DIR to name them)")

# The .cu objects depend on their flags (contraction, CUDA_DEFS, the race checker): this file
# changes when they do.
$(BUILD)/emu/cuflags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(EMU_CUFLAGS)' | cmp -s - $@ || echo '$(EMU_CUFLAGS)' >$@
FORCE:
.PHONY: FORCE

$(BUILD)/emu/%.o: %.cu $(BUILD)/emu/cuflags
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) $(EMU_CUFLAGS) -x c++ -c $< -o $@

$(BUILD)/emu/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@

$(BUILD)/emu/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(PIC_CFLAGS) $(EMU_SAN) -MMD -MP -c $< -o $@

EMU_OBJS := $(CUDA_SRC:%.cu=$(BUILD)/emu/%.o) $(CUDA_CXXSRC:%.cpp=$(BUILD)/emu/%.o) \
            $(patsubst %.cpp,$(BUILD)/emu/%.o,$(wildcard kernels/emu/*.cpp)) \
            $(CUDA_CSRC:%.c=$(BUILD)/emu/%.o)
$(EMU_LIB): $(EMU_OBJS) $(BUILD)/lib/gptkit-cuda.map
	$(CXX) -shared $(EMU_LDFLAGS) -o $@ $(filter %.o,$^) -Wl,--version-script=$(BUILD)/lib/gptkit-cuda.map \
	  $(EMU_LDLIBS)

# The emulator's own tests (tests/unit/emu/test_emu_*.cu): g++ against kernels/emu alone, and
# with nvcc, when found, compiled for sm_90 too (the dialect must stay CUDA).
EMU_CORE_OBJS := $(patsubst %.cpp,$(BUILD)/emu/%.o,$(wildcard kernels/emu/*.cpp))
EMU_TEST_SRC  := $(wildcard tests/unit/emu/test_emu_*.cu)
EMU_TESTS     := $(if $(HAVE_CXX),$(EMU_TEST_SRC:tests/unit/emu/%.cu=$(BUILD)/tests/%))
EMU_NVCC      := $(if $(NVCC),$(EMU_TEST_SRC:tests/unit/emu/%.cu=$(BUILD)/nvcc/%.o))
$(BUILD)/tests/test_emu_%: $(BUILD)/emu/tests/unit/emu/test_emu_%.o $(EMU_CORE_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_LDFLAGS) -o $@ $^ $(EMU_LDLIBS)
$(BUILD)/nvcc/%.o: tests/unit/emu/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) -c -arch=sm_90 -std=c++17 -I. $< -o $@

cuda: $(CUDA_LIBS)
.PHONY: cuda

deps:
	@bash .ci/deps.sh

# The builds these targets start (make test's, check's, tsan's, fuzz's, valgrind's, demo's, bench's)
# use every core unless make itself was given -jN (then they share its jobs).
SUBMAKE = $(MAKE) --no-print-directory $(if $(findstring -j,$(MAKEFLAGS)),,-j$(shell nproc))

# The tests run in parallel (make's -jN, else one more than the cores: tests/run.sh), those over
# 60 s named (GPT_TEST_BUDGET): T=PATTERN runs those
# whose names hold PATTERN; GPT_TEST_CASE=NAME runs one case of a unit binary (test.h).
test: deps
	@$(SUBMAKE) all units
	@GPT_TEST_BUDGET=$${GPT_TEST_BUDGET:-60} bash tests/run.sh $(BUILD) $(T)

# test_ops and the CLI tests open the CUDA libraries from the binaries' ../lib ($(BUILD)/lib).
# A test binary whose source is gone (a renamed test) is removed, since tests/run.sh runs them all.
TEST_BINS := $(UNIT_BINS) $(ISA_TESTS) $(FUZZ_TESTS) $(EMU_TESTS)
units: $(TEST_BINS) $(CUDA_LIBS) $(EMU_NVCC)
	@for t in $(BUILD)/tests/test_*; do case " $(TEST_BINS) " in *" $$t "*|" $(BUILD)/tests/test_*") ;; \
	  *) [ ! -f "$$t" ] || { echo "removing $$t (no source)"; rm -f "$$t"; } ;; esac; done
.PHONY: units

# ThreadSanitizer on the code with threads of its own (not OpenMP's: libgomp is not
# instrumented): the checkpoint writer, the store server and Gloo, the checksum workers, the
# read-ahead of a bucket's shards, the tokenizer's pool (tests/sanitize/tsan.sh lists the tests).
# valgrind: memcheck on CLI tests.
TSAN_TOOLS := tokenize train ckpt evalppl
TSAN_TESTS := test_ckpt test_comm test_comm_groups test_outfile test_store test_tokenize_count test_train_ckpt test_train_launch test_train_readahead
tsan: deps
	@$(SUBMAKE) BUILD=build-tsan TSAN=1 OPT=-O1 $(TSAN_TOOLS:%=build-tsan/bin/gpt-%) \
	  $(TSAN_TESTS:%=build-tsan/tests/%)
	@bash tests/sanitize/tsan.sh build-tsan
valgrind: deps
	@$(SUBMAKE) all
	@bash tests/sanitize/valgrind.sh $(BUILD)
.PHONY: tsan valgrind

# Each fuzz target for FUZZ_SECONDS (default 60) under ASan + UBSan, built by clang in
# build-fuzz (FUZZ_TARGETS=PATTERN picks some); tests/fuzz/run.sh says what to do with a crash.
fuzz: deps
	@bash .ci/deps.sh fuzz
	@$(SUBMAKE) BUILD=build-fuzz CC=clang CXX=clang++ SAN=1 FUZZ=1 OPT=-O1 fuzzers
	@bash tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzzers: $(FUZZERS)
.PHONY: fuzz fuzzers

# make check: the same tests under ASan + UBSan, in parallel as make test runs them; without nvcc's
# library (no GPU runs it here: the tests that read it skip), the emulator's is checked instead,
# in its usual thread order (ASan sees the same accesses in any; the shuffled runs are make test's).
check: deps
	@$(SUBMAKE) BUILD=build-san SAN=1 OPT=-O1 NVCC= all units
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  GPT_EMU_ORDER=forward GPT_TEST_SLOWDOWN=3 bash tests/run.sh build-san $(T)

demo: deps
	@$(SUBMAKE) all
	@bash tests/demo.sh $(BUILD)

BENCH_BINS := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/*.c))

bench: deps
	@$(SUBMAKE) all $(BENCH_BINS)
	@bash tests/bench/run.sh $(BUILD)

# On a machine with a GPU (and often no network: no deps step): GPT-2 124M training steps and
# decoding on device = cuda beside PyTorch (tests/bench/run_gpu.sh; BENCH_DEVICE=cuda-emu with
# BENCH_CONFIG=S runs it anywhere).
bench-gpu:
	@$(SUBMAKE) all $(BENCH_BINS)
	@bash tests/bench/run_gpu.sh $(BUILD)

$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# lint: the man pages through mandoc, and tests/lint.sh: no comment in the C/C++/CUDA sources
# holds a measured time or rate beside a machine name or a date (those go in
# tests/bench/*-results.md), and no line of them is over 100 columns.
lint: all
	@for m in man/*.[0-9]; do mandoc -Tlint -W warning $$m || exit 1; done
	@bash tests/lint.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/gptkit/configs
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin
	$(if $(strip $(CUDA_LIBS)),install -d $(DESTDIR)$(PREFIX)/lib && install -m 755 $(CUDA_LIBS) $(DESTDIR)$(PREFIX)/lib)
	for m in man/*.[0-9]; do s=$${m##*.}; install -d $(DESTDIR)$(PREFIX)/share/man/man$$s; \
	  install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s; done
	if [ -d train/configs ]; then install -m 644 train/configs/*.conf $(DESTDIR)$(PREFIX)/share/gptkit/configs; fi

clean:
	rm -rf build build-san build-fuzz build-tsan build-vg

-include $(shell find $(BUILD)/obj $(BUILD)/isa $(BUILD)/cuda $(BUILD)/emu -name '*.d' 2>/dev/null)
