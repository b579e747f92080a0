#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=600 kernel=debug
#
# A TCP socket that another owner took must be refused cleanly (issue 38,
# item 1). tests/vm/py/sk_owner.py loads a sockops program that puts every
# passively established socket into a sockhash, whose psock takes the
# socket's sk_user_data before rsiw's listener accepts it, and an sk_skb
# verdict program that makes the psock wrap the socket's callbacks (the
# trampolines it inherited from rsiw's listener). An rdma_cm connect to a
# listener on rsiw must fail, with no KASAN report, oops or recursion (the
# runner checks the console); with the programs detached, the listener must
# accept the next connect.
#
# Needs BPF and cgroup BPF, which only the debug kernel has
# (kernel/configs/rsiw-kasan.config).
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0
rsiw_up veth0
mountpoint -q /sys/fs/cgroup || run mount -t cgroup2 none /sys/fs/cgroup
run python3 /rsiw/tests/vm/py/sk_owner.py 10.77.0.1 7410 /sys/fs/cgroup
pass
