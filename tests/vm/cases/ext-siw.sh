#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=600 kernel_b=bench
#
# ATOM-17 against the C siw, which has no RFC 7306: rsiw (VM a, rfc7306=1)
# posts a FetchAdd from a kernel ULP (tests/kmod/rsiw_kext.ko, peer= mode)
# to a page a siw server registered (tests/vm/py/ext_siw.py on VM b). siw
# answers the unknown opcode with its Terminate: the work request completes
# with an error status (not flushed), rsiw's QP goes to ERROR and sees the
# disconnect, siw's QP goes to ERROR with the page unchanged, and nothing
# hangs or splats. siw runs on the bench kernel (kernel_b=bench), as in
# perftest-interop.
. /rsiw/tests/vm/lib.sh

port=7800
if [ "$RSIW_ROLE" = a ]; then
	run modprobe rsiw rfc7306=1
else
	load_driver
fi
peer_link_up

kext_vs_siw $port atom_17_peer_without_atomics
barrier done
pass
