#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# The Terminate reaches the peer (issue 38, item 7; TERM-04): a raw TCP peer
# sends a Write to a bad STag with 32 KB of FPDUs behind it in one burst, and
# more while the server closes, to an rdma_cm server on rsiw
# (tests/vm/py/term_burst.py). It must read one whole Terminate 1/1/00, then
# EOF, not a reset: the responder sends its FIN right after the Terminate and
# discards what it did not read.
. /rsiw/tests/vm/lib.sh

port=7430
load_driver
veth_server /rsiw/tests/vm/py/term_burst.py $port "$RSIW_OUT/term_burst.log"
rc=0
run python3 /rsiw/tests/vm/py/term_burst.py client 10.77.0.1 $port || rc=$?
[ "$rc" = 0 ] || kill "$srv" 2>/dev/null
wait "$srv" || rc=$?
cat "$RSIW_OUT/term_burst.log"
[ "$rc" = 0 ] || die "term_burst failed"
pass
