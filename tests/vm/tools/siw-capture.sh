#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest side of scripts/rsiw/capture-siw.sh: capture C siw <-> C siw iWARP
# traffic as pcap fixtures for the wire core's parser test
# (tests/wire/tests/siw_fixtures.rs). A tool, not a test case: it is not run
# by `make check`.
#
# Runs in both VMs of a two-VM run, both with driver siw. VM b
# (169.254.0.2) runs the servers, VM a (169.254.0.1) the clients and, for
# each workload, a tcpdump of all TCP on eth0 into /rsiw/out/<name>.pcap.
#
#   siw-capture.sh [WORKLOAD...]   default: rping write_bw read_bw send_bw
#                                  terminate
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = siw ] || die "run with --driver siw --driver-b siw"
server=169.254.0.2
workloads=${*:-rping write_bw read_bw send_bw terminate}
tools=$(dirname "$0")

# The command lines, shared by server (without -a/address) and client.
server_cmd() {
	case $1 in
	rping) echo "rping -s -a $server -v -C 3 -S 100" ;;
	write_bw) echo "ib_write_bw -R -F -d siw0 -s 8192 -n 20" ;;
	read_bw) echo "ib_read_bw -R -F -d siw0 -s 8192 -n 20" ;;
	send_bw) echo "ib_send_bw -R -F -d siw0 -s 2048 -n 5" ;;
	terminate) echo "python3 $tools/siw-terminate.py server $server 7471" ;;
	*) die "unknown workload $1" ;;
	esac
}
client_cmd() {
	case $1 in
	rping) echo "rping -c -a $server -v -V -C 3 -S 100" ;;
	terminate) echo "python3 $tools/siw-terminate.py client $server 7471" ;;
	*) echo "$(server_cmd "$1") $server" ;;
	esac
}
port_of() { case $1 in rping) echo 7174 ;; terminate) echo 7471 ;; *) echo 18515 ;; esac; }

load_driver siw
rsiw_up eth0
# A quiet link: no offload surprises in the capture beyond what siw does.
run ethtool -K eth0 tso off gso off gro off 2>/dev/null || true
wait_peer 60
barrier up

for w in $workloads; do
	if [ "$RSIW_ROLE" = b ]; then
		# shellcheck disable=SC2046
		$(server_cmd "$w") >"$RSIW_OUT/$w.server.log" 2>&1 &
		srv=$!
		wait_for 20 eval "ss -Htln 'sport = :$(port_of "$w")' | grep -q ." ||
			log "$w: no listener visible in ss; going on"
		sleep 1
		barrier "$w-listen"
		barrier "$w-capturing"
		wait "$srv" || die "$w server failed: $(tail -5 "$RSIW_OUT/$w.server.log")"
		log "$w server done"
		barrier "$w-done"
	else
		tcpdump -i eth0 -s 0 -U -w "$RSIW_OUT/$w.pcap" tcp 2>"$RSIW_OUT/$w.tcpdump.log" &
		td=$!
		wait_for 20 grep -q "listening on" "$RSIW_OUT/$w.tcpdump.log" ||
			die "tcpdump did not start"
		barrier "$w-listen"
		barrier "$w-capturing"
		echo "+ $(client_cmd "$w")"
		# shellcheck disable=SC2046
		$(client_cmd "$w") >"$RSIW_OUT/$w.client.log" 2>&1 ||
			die "$w client failed: $(tail -5 "$RSIW_OUT/$w.client.log")"
		barrier "$w-done"
		sleep 1
		kill -INT "$td"
		wait "$td" || true
		cat "$RSIW_OUT/$w.tcpdump.log"
		ls -l "$RSIW_OUT/$w.pcap"
	fi
done
barrier finished
pass
