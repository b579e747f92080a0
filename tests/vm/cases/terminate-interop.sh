#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=600
#
# Data-path Terminate between rsiw (VM a) and the C siw (VM b), each VM the
# responder in turn (tests/vm/py/term_access.py): an RDMA Read from a wrong
# STag and past the end of a buffer, an RDMA Write to a wrong STag (also
# after a good one) and to a buffer without remote write access. The responder terminates (rsiw
# generates the Terminate when it is the server, and acts on siw's when it is
# the client); the requester sees IBV_WC_REM_ACCESS_ERR for the Read (siw as
# requester flushes it instead: WR_FLUSH_ERR is accepted from siw only; the
# Write may complete before the Terminate arrives), both QPs go to ERROR, the
# server's posted receive is flushed (not checked on siw, which does not), and
# both sides get DISCONNECTED. Any splat or kmemleak report fails the run.
#
# The clients wait 0.2 s after ESTABLISHED before their first request
# (RSIW_ESTABLISHED_DELAY_MS, obeyed by cmutil.py; see rping-interop): a siw
# server sends its MPA Reply before it installs its receive callback, and
# bytes that arrive in between stay unread in its socket. Seen beside other
# cases on a 2-core host: write-late's first 16-byte Write from rsiw, 108
# bytes in the siw server's Recv-Q and both sides waiting until the timeout.
. /rsiw/tests/vm/lib.sh

load_driver
peer_link_up
port=7900
for srv in a b; do
	ip=$(fetch "$srv" ip)
	for check in read-stag read-oob write-stag write-ro write-late; do
		port=$((port + 1))
		serve_client "term-$check-$srv" "$srv" "$port" \
			"python3 /rsiw/tests/vm/py/term_access.py server $ip $port $check $RSIW_DRIVER" \
			"RSIW_ESTABLISHED_DELAY_MS=200 python3 /rsiw/tests/vm/py/term_access.py client $ip $port $check $RSIW_DRIVER" 90
	done
done
barrier done
pass
