#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# Zero-copy TX and buffer reuse (checks ZC-01 and ZC-02; no spec-map entry,
# they check a property of rsiw's own zero-copy TX, not of the iWARP
# specifications). rsiw is loaded with zerocopy_min=4096: FPDU batches that
# carry at least 4 KiB of a registered user buffer go to TCP by page
# reference, and their work request may complete only once TCP released
# those pages (the peer ACKed the bytes). A driver that completes it when
# sendmsg() returned lets the user rewrite the buffer while TCP still has to
# transmit part of it: those bytes go out changed.
#
# A pyverbs client on rsiw (veth0, 10.77.0.1) sends a 1 MiB Send (ZC-01),
# then eight 128 KiB RDMA Writes (ZC-02), to a raw TCP MPA peer (no CRC: zero
# copy needs it off) on veth1 in a network namespace (10.77.0.2), so that the
# stream crosses the veth pair rather than lo. The peer's receive buffer is
# small and it reads nothing for 1.5 s after the first byte of each check,
# and the initial TCP send buffer is raised to 16 MiB (tcp_wmem) so that the
# whole message is in rsiw's write queue at once, not in its send queue: at
# the end of its sendmsg() calls almost all of it is still to be transmitted
# (a batch sent by reference costs several times its payload in write
# memory: 1 MiB took 7.8 MB of it, more than the 4 MiB that siw_sndbuf sets).
# The client overwrites its buffers with 0xEE as soon as a request completed;
# the peer must read the original patterns byte for byte. tx_zc_batches must
# have grown during each check, or the check proved nothing, and a request
# must not complete before the peer read again: with zero-copy its last
# batch can only be ACKed then (tests/vm/py/zc_reuse.py).
. /rsiw/tests/vm/lib.sh

port=7850
ns=zcpeer
py=/rsiw/tests/vm/py/zc_reuse.py
plog=$RSIW_OUT/zc_reuse_peer.log

modinfo -p rsiw | grep -q '^zerocopy_min:' || die "rsiw has no zerocopy_min parameter"
load_driver rsiw zerocopy_min=4096
run sysctl -q -w net.ipv4.tcp_wmem="4096 16777216 16777216"
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0
run ip netns add $ns
run ip link set veth1 netns $ns
run ip -n $ns addr add 10.77.0.2/24 dev veth1
run ip -n $ns link set veth1 up
rsiw_up veth0
[ -n "$(hw_counter tx_zc_batches)" ] || die "$DEV has no hw counter tx_zc_batches"

ip netns exec $ns timeout 120 python3 "$py" server 10.77.0.2 $port >"$plog" 2>&1 &
peer=$!
wait_for 30 grep -q 'listening' "$plog" || { cat "$plog"; die "the raw peer does not listen"; }
rc=0
run timeout 120 python3 "$py" client 10.77.0.2 $port || rc=$?
prc=0
wait "$peer" || prc=$?
cat "$plog"
log "tx_zc_batches $(hw_counter tx_zc_batches), tx_zc_copied $(hw_counter tx_zc_copied)"
# Either side's failure fails the other (a close, a flush): name both.
[ "$rc" = 0 ] && [ "$prc" = 0 ] || die "zc_reuse failed (client $rc, raw peer $prc)"
run rdma link delete "$DEV"
run modprobe -r rsiw
run ip netns del $ns
pass
