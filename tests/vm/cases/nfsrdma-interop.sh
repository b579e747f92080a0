#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=800
#
# NFS over RDMA between rsiw (VM a) and the C siw (VM b), each side the
# server in turn: first rsiw's nfsd serves siw's client, then siw's server
# serves rsiw's client. Each round mounts with proto=rdma, writes and
# verifies 4 MiB with fio, copies a file there and reads it back, and unmounts
# (tests/vm/nfsrdma.sh).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/nfsrdma.sh

nfsrdma_setup
nfsrdma_round a rsiw-server
nfsrdma_round b siw-server
pass
