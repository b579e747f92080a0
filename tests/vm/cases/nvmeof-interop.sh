#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=720
#
# NVMe over Fabrics between rsiw (VM a) and the C siw (VM b), each side the
# target in turn: first rsiw's nvmet-rdma serves siw's nvme-rdma, then siw's
# target serves rsiw's host. Each round writes and verifies 4 MiB with fio
# (CRC32C) and disconnects (tests/vm/nvmeof.sh).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/nvmeof.sh

nvmeof_setup
nvmeof_round a rsiw-target
nvmeof_round b siw-target
pass
