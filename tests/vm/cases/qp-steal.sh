#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# A connect or accept binds only a QP its caller may use (issue 38, item 2):
# a process that calls rdma_connect() or rdma_accept() with another
# process's QP number gets EINVAL, and that QP keeps its state and its
# posted receive, which the owner then uses on a connection of its own
# (tests/vm/py/qp_steal.py). The C siw binds the other process's QP
# (tests/vm/run --driver siw qp-steal fails).
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0
rsiw_up veth0
run python3 /rsiw/tests/vm/py/qp_steal.py 10.77.0.1 7420 "$DEV"
pass
