# SPDX-License-Identifier: GPL-2.0
#
# rsiw: software iWARP RDMA in Rust. Top-level developer targets; see
# README.md. Every target installs what it needs (Debian 12 host).
#
# The kernel build itself is Kbuild's: the repository is overlaid onto a
# pristine 7.3.4 tree with the patch series in patches/ applied, and built
# out of tree in $(RSIW_CACHE) (default ~/.cache/rsiw).

SHELL := /bin/bash
S := scripts/rsiw
T ?=
ARGS ?=

.PHONY: help setup kernel kernel-light kernel-bench kernel-pmem kernel-pmem-kasan rootfs demo check check-long \
	check-host check-vm check-pmem check-blktests check-series shell bench series series-prefixes fuzz

help:
	@echo "make demo        build, boot, attach rsiw to a netdev, show it working"
	@echo "make check       all tests: host (cargo), kernel build, VM tests + KUnit"
	@echo "make check-long  make check plus the long tests (perftest at all sizes ...)"
	@echo "make check-host  host tests of the wire core only"
	@echo "make check-series  the upstream series: git am, tree, checkpatch (seconds)"
	@echo "make check-vm    VM tests; T='filter' selects cases (RSIW_LONG=1: with the long ones)"
	@echo "make check-pmem  the pmem kernel and its short cases (NVDIMM, a blktests subset)"
	@echo "make check-blktests  blktests nvme/, srp/, rnbd/ on rsiw and siw (hours; pmem kernels)"
	@echo "make shell       a shell in a VM running the debug kernel (ARGS='--peer siw')"
	@echo "make bench       rsiw against siw in identical VMs: a table and a plot"
	@echo "make fuzz        fuzz the wire core (FUZZ_SECONDS, FUZZ_RUNS, FUZZ_TARGETS; not in CI)"
	@echo "make kernel      build the debug kernel (kernel-light: without KASAN; kernel-bench)"
	@echo "make rootfs      build the Debian 13 guest root"
	@echo "make series      the upstream patch series in out/series (patches/upstream.txt)"
	@echo "make series-prefixes  build every prefix of the series (slow, not in make check)"

setup:
	$(S)/setup.sh

kernel: setup
	$(S)/kernel.sh build debug

kernel-light: setup
	$(S)/kernel.sh build light

kernel-bench: setup
	$(S)/kernel.sh build bench

# Light plus persistent memory and what blktests needs (kernel=pmem cases).
kernel-pmem: setup
	$(S)/kernel.sh build pmem

# The pmem kernel with KASAN, for the blktests that require it (nvme/069;
# kernel=pmem-kasan cases, all long).
kernel-pmem-kasan: setup
	$(S)/kernel.sh build pmem-kasan

rootfs: setup
	$(S)/mkroot.sh

demo: kernel rootfs
	$(S)/demo.sh

check:
	$(S)/check.sh

# Everything make check runs, plus the cases marked long=1 and the long parts
# of those marked long=part (tests/vm/run, rsiw-testing.rst).
check-long:
	RSIW_LONG=1 $(S)/check.sh

check-host:
	tests/wire/check.sh

# The series stage of make check alone.
check-series: setup
	$(S)/series.sh check

check-vm: kernel-light kernel kernel-bench kernel-pmem $(if $(filter 1,$(RSIW_LONG)),kernel-pmem-kasan) rootfs
	tests/vm/run $(T)

# The cases on the pmem kernel that are short (an emulated NVDIMM, the memory
# controller, a subset of blktests' nvme/): make check runs the blktests
# subset, make check-long all of them.
PMEM_CASES ?= pmem-devdax commit-pmem cq-memcg blktests-nvme-short
check-pmem: kernel-pmem rootfs
	tests/vm/run --long $(PMEM_CASES)

# blktests' groups on rsiw and siw, test by test (tests/vm/blktests.sh).
check-blktests: kernel-pmem kernel-pmem-kasan rootfs
	tests/vm/run --long 'blktests-*'

shell: kernel rootfs
	$(S)/vm.py shell $(ARGS)

bench: setup
	$(S)/bench.sh

series: setup
	$(S)/series.sh

# Every prefix of the series builds: the kernel crate and the C directories the
# series changes, once per patch (about 5-15 min each). Needs the light kernel.
series-prefixes: kernel-light
	$(S)/series.sh prefixes $(ARGS)

# A fuzzing campaign on the wire core, for as long as asked (not in make
# check): FUZZ_SECONDS or FUZZ_RUNS per target, FUZZ_TARGETS, FUZZ_MINIMIZE=1
# (scripts/rsiw/fuzz.sh).
fuzz:
	$(S)/fuzz.sh
