#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=720
#
# NVMe over Fabrics between rsiw (VM a) and the C siw (VM b), each side the
# target in turn: first siw's target serves rsiw's nvme-rdma host, then rsiw's
# nvmet-rdma serves siw's host. Each round writes and verifies 4 MiB with fio
# (CRC32C) and disconnects (tests/vm/nvmeof.sh).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/nvmeof.sh

nvmeof_setup
# The rsiw target goes last: its teardown can trip a known nvmet-rdma lockdep
# report (KNOWN_LOCKDEP in tests/vm/py/known_lockdep.py), after which lockdep is off in
# that VM, and the rsiw host round should run with lockdep on.
nvmeof_round b siw-target
nvmeof_round a rsiw-target
pass
