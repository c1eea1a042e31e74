# uroce: a userspace RoCEv2 stack behind a drop-in libibverbs.so.1
#
#   make            build everything into build/
#   make demo       two processes move data with WRITE, READ and SEND on loopback
#   make test       every test (unit, verbs semantics, real Debian clients)
#   make interop    uroce against the kernel's soft-RoCE (rdma_rxe) in a QEMU guest (root)
#   make bench      benchmarks (JSON + Markdown table under build/bench/)
#   make bench-incast  N senders into one receiver, with and without DCQCN (root)
#   make bench-mpi  MPI_Allreduce and ping-pong: Open MPI on uroce vs on TCP (build/bench/mpi-latest.md)
#   make bench-nccl NCCL over uroce vs NCCL's sockets on a GPU (build/bench/nccl-latest.md)
#   make SANITIZER=address   (or undefined, address,undefined, thread)
#
# Missing Debian packages are installed by scripts/deps.sh (as root), or the
# exact apt-get command is printed.

CC       ?= cc
ifeq ($(CC),cc)
CC       := gcc
endif
BUILD    ?= build
O        := $(BUILD)/obj
OPT      ?= -O2
CFLAGS_BASE := -std=gnu11 $(OPT) -g -Wall -Wextra -Werror -Wno-unused-parameter \
               -Wshadow -Wpointer-arith -Wstrict-prototypes -Wno-format-truncation -pthread -D_GNU_SOURCE \
               -Isrc -Isrc/common -Isrc/wire -Isrc/net -Isrc/mem -Isrc/engine -Isrc/obs -Isrc/verbs
ifneq ($(SANITIZER),)
CFLAGS_BASE += -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS_SAN := -fsanitize=$(SANITIZER)
endif
# Build configuration, probed after scripts/deps.sh has installed what it
# can: GNU make remakes an included makefile first and then reads itself
# again, so the very first build on a fresh machine already sees ISA-L.
# The probe runs again when the ISA-L header appears, and every object
# depends on its result.
CONFIG   := $(BUILD)/config.mk
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(CONFIG)
endif
HAVE_ISAL ?= $(shell test -e /usr/include/isa-l/crc.h && echo 1)
ifeq ($(HAVE_ISAL),1)
CFLAGS_BASE += -DHAVE_ISAL=1
ISAL_LIB := -lisal
endif
LIB_CFLAGS := $(CFLAGS_BASE) -fPIC -fvisibility=hidden
LIB_LIBS   := -lz $(ISAL_LIB) -ldl -lrt -pthread

LIB_SRCS  := $(sort $(filter-out src/rdmacm/%,$(wildcard src/*/*.c)))
LIB_OBJS  := $(patsubst src/%.c,$(O)/lib/%.o,$(LIB_SRCS))
LIB       := $(BUILD)/lib/libibverbs.so.1
ARCHIVE   := $(BUILD)/lib/liburoce-internal.a
MAP       := src/verbs/libibverbs.map

# One folder per command (tools/<command>/); tools/ itself holds the
# dispatcher (uroce.c) and what every command shares (cli.h, json.c).
# tools/topo/ is also the separate uroce-topo program (below); the CLI
# takes only its cmd_topo.c, which runs that program.
TOOL_SRCS := $(sort $(wildcard tools/*.c) $(filter-out tools/topo/%,$(wildcard tools/*/*.c)) tools/topo/cmd_topo.c)
TOOL_OBJS := $(patsubst tools/%.c,$(O)/tools/%.o,$(TOOL_SRCS))
CLI       := $(BUILD)/bin/uroce
# uroce run writes the library's sysfs table itself: those objects are
# linked in (hidden symbols, so the library's ABI stays rdma-core's).
CLI_LIB_OBJS := $(O)/lib/verbs/sysfs.o $(O)/lib/net/netdev.o
TOPO_SRCS := $(sort $(filter-out tools/topo/cmd_topo.c,$(wildcard tools/topo/*.c))) tools/json.c
TOPO_OBJS := $(patsubst tools/%.c,$(O)/tools/%.o,$(TOPO_SRCS))
TOPO      := $(BUILD)/libexec/uroce-topo

UNIT_SRCS  := $(sort $(wildcard tests/unit/*.c))
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))
VERBS_SRCS := $(sort $(wildcard tests/verbs/*.c))
VERBS_BINS := $(patsubst tests/verbs/%.c,$(BUILD)/tests/verbs/%,$(VERBS_SRCS))
TLIB_SRCS  := $(sort $(wildcard tests/lib/*.c))

.PHONY: fuzz bench-gpu bench-loss all deps test-deps demo test test-unit test-verbs test-clients bench clean lint check-abi
all: deps $(LIB) $(BUILD)/lib/libibverbs.so $(CLI) $(TOPO) $(UNIT_BINS) $(VERBS_BINS) $(BUILD)/bench/gpu_bw $(BUILD)/bench/loss_bw \
     $(BUILD)/bench/incast $(BUILD)/bench/udp_gso $(BUILD)/bench/pingpong $(BUILD)/bench/idle_qps \
     $(BUILD)/bench/crc_speed

deps:
	@scripts/deps.sh build

$(CONFIG): scripts/deps.sh $(wildcard /usr/include/isa-l/crc.h)
	@mkdir -p $(dir $@)
	@scripts/deps.sh build
	@echo "HAVE_ISAL := $$(test -e /usr/include/isa-l/crc.h && echo 1)" > $@

test-deps:
	@scripts/deps.sh test

$(O)/lib/%.o: src/%.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJS) $(MAP)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libibverbs.so.1 -Wl,--version-script=$(MAP) \
	  -Wl,-z,defs -Wl,-z,now $(LDFLAGS_SAN) -o $@ $(LIB_OBJS) $(LIB_LIBS)

$(BUILD)/lib/libibverbs.so: $(LIB)
	ln -sf libibverbs.so.1 $@

$(ARCHIVE): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(LIB_OBJS)

$(O)/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itools -Itools/topo -MMD -MP -c $< -o $@

$(CLI): $(TOOL_OBJS) $(CLI_LIB_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) -o $@ $(TOOL_OBJS) $(CLI_LIB_OBJS) -L$(BUILD)/lib -l:libibverbs.so.1 \
	  -Wl,-rpath,'$$ORIGIN/../lib' -Wl,--enable-new-dtags -lm -ldl -pthread

# uroce topo: a separate program so that only it needs libhwloc.
$(TOPO): $(TOPO_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_SAN) -o $@ $(TOPO_OBJS) -L$(BUILD)/lib -l:libibverbs.so.1 \
	  -Wl,-rpath,'$$ORIGIN/../lib' -Wl,--enable-new-dtags -lhwloc -lm -ldl -pthread

# Unit tests link the engine's objects directly (internal API).
$(BUILD)/tests/unit/%: tests/unit/%.c $(ARCHIVE) $(TLIB_SRCS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests/lib $(LDFLAGS_SAN) -o $@ $< $(TLIB_SRCS) $(ARCHIVE) $(LIB_LIBS) -lm

# Verbs tests use only the public verbs API, against our libibverbs.so.1.
$(BUILD)/tests/verbs/%: tests/verbs/%.c $(LIB) $(TLIB_SRCS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests/lib $(LDFLAGS_SAN) -o $@ $< $(TLIB_SRCS) -L$(BUILD)/lib \
	  -l:libibverbs.so.1 -Wl,-rpath,'$$ORIGIN/../../lib' -Wl,--enable-new-dtags -lm -pthread

# librdmacm (src/rdmacm, docs/rdmacm.md): a drop-in librdmacm.so.1 built only
# on the public verbs API of our libibverbs.so.1 (no internal include paths);
# its C tests are tests/rdmacm/ (suite "rdmacm" of tests/run.sh).
RDMACM_SRCS  := $(sort $(wildcard src/rdmacm/*.c))
RDMACM_OBJS  := $(patsubst src/%.c,$(O)/lib/%.o,$(RDMACM_SRCS))
RDMACM       := $(BUILD)/lib/librdmacm.so.1
RDMACM_MAP   := src/rdmacm/librdmacm.map
CM_TEST_BINS := $(patsubst tests/rdmacm/%.c,$(BUILD)/tests/rdmacm/%,$(sort $(wildcard tests/rdmacm/*.c)))
.PHONY: test-rdmacm
all: $(RDMACM) $(BUILD)/lib/librdmacm.so $(CM_TEST_BINS)

$(O)/lib/rdmacm/%.o: src/rdmacm/%.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -I%,$(LIB_CFLAGS)) -MMD -MP -c $< -o $@

$(RDMACM): $(RDMACM_OBJS) $(RDMACM_MAP) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,librdmacm.so.1 -Wl,--version-script=$(RDMACM_MAP) \
	  -Wl,-z,defs -Wl,-z,now $(LDFLAGS_SAN) -o $@ $(RDMACM_OBJS) -L$(BUILD)/lib \
	  -l:libibverbs.so.1 -Wl,-rpath,'$$ORIGIN' -Wl,--enable-new-dtags -pthread

$(BUILD)/lib/librdmacm.so: $(RDMACM)
	ln -sf librdmacm.so.1 $@

$(BUILD)/tests/rdmacm/%: tests/rdmacm/%.c $(RDMACM) $(TLIB_SRCS) tests/verbs/common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests/lib -Itests/verbs $(LDFLAGS_SAN) -o $@ $< $(TLIB_SRCS) \
	  -L$(BUILD)/lib -l:librdmacm.so.1 -l:libibverbs.so.1 -Wl,-rpath,'$$ORIGIN/../../lib' \
	  -Wl,--enable-new-dtags -lm -pthread

test-rdmacm: all
	@tests/run.sh rdmacm

demo: all
	$(CLI) demo

test: all test-deps
	@tests/run.sh

test-unit: all
	@tests/run.sh unit

test-verbs: all
	@tests/run.sh verbs

test-clients: all test-deps
	@tests/run.sh clients

# Interop with the Linux kernel's soft-RoCE (rdma_rxe) in a QEMU guest
# (tests/interop/run.sh; root). rc_ops is built against the system's
# libibverbs, not ours: the same binary runs in the guest on rxe and on the
# host under `uroce run`.
INTEROP_RC_OPS := $(BUILD)/interop/rc_ops
.PHONY: interop
interop: all $(INTEROP_RC_OPS)
	@tests/interop/run.sh

$(INTEROP_RC_OPS): tests/interop/rc_ops.c
	@mkdir -p $(dir $@)
	gcc -std=gnu11 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -o $@ $< -libverbs

bench: all
	@scripts/deps.sh bench
	@bench/run.sh
	@bench/loss.sh

# Goodput versus loss, go-back-N and selective repeat (also part of bench).
bench-loss: all
	@scripts/deps.sh bench
	@bench/loss.sh

# Incast: 2, 4 and 8 senders into one receiver across a veth pair between
# two network namespaces (root), with and without DCQCN: goodput, Jain
# fairness, drops, retransmissions, probe latency (build/bench/incast-latest.md).
.PHONY: bench-incast
bench-incast: all
	@scripts/deps.sh bench
	@BUILD=$(BUILD) bench/incast.sh

# MPI over uroce vs MPI over TCP, OSU style (bench/mpi/run.sh; root: two
# network namespaces): Open MPI on UCX/uroce, on UCX's tcp and on its own
# TCP BTL, side by side (build/bench/mpi-latest.md).
.PHONY: bench-mpi
bench-mpi: all
	@scripts/deps.sh bench
	@BUILD=$(BUILD) bench/mpi/run.sh

# NCCL over uroce vs NCCL's sockets, nccl-tests style (bench/nccl/driver.py;
# needs PyTorch with CUDA and a GPU at run time, skips otherwise; uses the
# build in $(BUILD) as it is, so that it runs where nothing can be built).
.PHONY: bench-nccl
bench-nccl:
	@BUILD=$(BUILD) $(or $(PYTHON),python3) bench/nccl/driver.py bench

# GPU bandwidth benchmark (needs an NVIDIA GPU at run time, not to build).
bench-gpu: $(BUILD)/bench/gpu_bw
	UROCE_NETDEV=lo $(BUILD)/bench/gpu_bw

$(BUILD)/bench/loss_bw: bench/loss_bw.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(LDFLAGS_SAN) -o $@ $< -L$(BUILD)/lib -l:libibverbs.so.1 \
	  -Wl,-rpath,'$$ORIGIN/../lib' -Wl,--enable-new-dtags

$(BUILD)/bench/incast: bench/incast.c $(LIB) src/obs/counters.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(LDFLAGS_SAN) -o $@ $< -L$(BUILD)/lib -l:libibverbs.so.1 \
	  -Wl,-rpath,'$$ORIGIN/../lib' -Wl,--enable-new-dtags

$(BUILD)/bench/udp_gso: bench/udp_gso.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(LDFLAGS_SAN) -o $@ $<

$(BUILD)/bench/crc_speed: bench/crc_speed.c $(ARCHIVE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Isrc/wire $(LDFLAGS_SAN) -o $@ $< $(ARCHIVE) $(LIB_LIBS)

$(BUILD)/bench/pingpong: bench/pingpong.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(LDFLAGS_SAN) -o $@ $<

$(BUILD)/bench/idle_qps: bench/idle_qps.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(LDFLAGS_SAN) -o $@ $< -L$(BUILD)/lib -l:libibverbs.so.1 \
	  -Wl,-rpath,'$$ORIGIN/../lib' -Wl,--enable-new-dtags

$(BUILD)/bench/gpu_bw: bench/gpu/gpu_bw.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Wno-pedantic $(LDFLAGS_SAN) -o $@ $< -L$(BUILD)/lib -l:libibverbs.so.1 \
	  -Wl,-rpath,'$$ORIGIN/../lib' -Wl,--enable-new-dtags -ldl

# libFuzzer on the packet decoder (clang): replays the corpus from real
# captures, then fuzzes for FUZZ_SECONDS (default 30) on a copy of it.
FUZZ_SECONDS ?= 30
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -Isrc/wire -Isrc/common
$(BUILD)/fuzz/fuzz_wire: tests/fuzz/fuzz_wire.c src/wire/wire.c src/wire/icrc.c src/wire/wire.h
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ tests/fuzz/fuzz_wire.c src/wire/wire.c src/wire/icrc.c -lz

# The verbs fuzzer links the library's sources compiled with the fuzzer.
$(BUILD)/fuzz/fuzz_verbs: tests/fuzz/fuzz_verbs.c $(LIB_SRCS) $(MAP)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -std=gnu11 -D_GNU_SOURCE -pthread -Isrc/net -Isrc/mem -Isrc/engine \
	  -Isrc/obs -Isrc/verbs $(if $(filter 1,$(HAVE_ISAL)),-DHAVE_ISAL=1) -o $@ \
	  tests/fuzz/fuzz_verbs.c $(LIB_SRCS) $(LIB_LIBS)

fuzz: $(BUILD)/fuzz/fuzz_wire $(BUILD)/fuzz/fuzz_verbs
	$(BUILD)/fuzz/fuzz_wire tests/fuzz/corpus/wire/*
	rm -rf $(BUILD)/fuzz/corpus && cp -r tests/fuzz/corpus/wire $(BUILD)/fuzz/corpus
	$(BUILD)/fuzz/fuzz_wire -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(BUILD)/fuzz/corpus
	rm -rf $(BUILD)/fuzz/vcorpus && mkdir -p $(BUILD)/fuzz/vcorpus
	UROCE_LOG=error $(BUILD)/fuzz/fuzz_verbs -max_total_time=$(FUZZ_SECONDS) -max_len=512 \
	  -print_final_stats=1 $(BUILD)/fuzz/vcorpus

check-abi: $(LIB)
	@tests/clients/check_abi.sh $(LIB)

clean:
	rm -rf $(BUILD)

-include $(shell find $(O) -name '*.d' 2>/dev/null)
