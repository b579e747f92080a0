#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw kernel=pmem smp=2 mem=2048 nvme=1G karg=nvme_core.multipath=N timeout=3600 long=1 prepare=tests/vm/blktests-prepare.sh
#
# The device tests of blktests' nvme/ group (test_device(): they need a test
# device, TEST_DEVS) on rsiw (VM a) and on C siw (VM b), each VM with an
# emulated 1 GiB NVMe drive (QEMU's nvme device) as /dev/nvme0n1: nvme/033
# to 037 export it through an nvmet passthrough controller over the
# soft-RDMA device (NVMET_TRTYPES=rdma); the others exercise the PCI NVMe
# driver and run the same on both. The group's other tests run in
# blktests-nvme, without the drive. The VMs boot with
# nvme_core.multipath=N: with multipath on, the drive's namespace is a
# multipath head (/sys/block/nvme0n1/device is the nvme-subsystem), and
# blktests' _require_test_dev_is_not_nvme_multipath leaves the passthru
# tests (033-037) and 039 "not run"; no device test needs multipath.
# udevd runs (BT_UDEV=1): the passthru tests give nvmet the drive's
# controller as /dev/char/MAJOR:MINOR (_test_dev_nvme_ctrl), a link udev
# makes; without it their target has no namespace ("Failed to find passthru
# target namespace", 2026-11-30 17:47, on both drivers).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/blktests.sh

BT_UDEV=1
blktests_case dev:nvme
