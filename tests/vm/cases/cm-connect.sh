#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=1500
#
# The connection manager against the C siw (VM b), without data transfer, in
# both directions (each VM is the server once):
#
# - ucmatose with zero messages connects QPs through rdma_cm (iw_connect, the
#   MPA exchange, iw_accept) and disconnects them: listeners on the wildcard
#   and on a specific address, two QPs at once, IPv4 and IPv6 link-local;
# - tests/vm/py/cm_pd.py: private data both ways on accept, and a reject with
#   private data (MPA-06);
# - rsiw reloaded as an MPA Rev 1 initiator, then asking for CRC (siw answers
#   both; siw itself offers Rev 2 without CRC and has no module parameters).
. /rsiw/tests/vm/lib.sh

PD=/rsiw/tests/vm/py/cm_pd.py
port=7300

ucm_rounds() { # TAG
	local srv ip ip6
	for srv in a b; do
		ip=$(fetch "$srv" ip)
		ip6=$(fetch "$srv" ip6)
		port=$((port + 1))
		serve_client "ucmatose-any-$1-$srv" "$srv" "$port" \
			"stdbuf -oL ucmatose -p $port -c 2 -C 0" \
			"stdbuf -oL ucmatose -s $ip -p $port -c 2 -C 0" 90
		port=$((port + 1))
		serve_client "ucmatose-ip6-$1-$srv" "$srv" "$port" \
			"stdbuf -oL ucmatose -b $ip6%eth0 -p $port -c 1 -C 0" \
			"stdbuf -oL ucmatose -s $ip6%eth0 -p $port -c 1 -C 0" 90
	done
}

pd_rounds() {
	local srv ip mode
	for srv in a b; do
		ip=$(fetch "$srv" ip)
		for mode in accept reject; do
			port=$((port + 1))
			serve_client "pdata-$mode-$srv" "$srv" "$port" \
				"python3 $PD server $ip $port $mode" \
				"python3 $PD client $ip $port $mode" 90
		done
	done
}

# reload_rsiw PARAMS...: VM a reloads rsiw with PARAMS; VM b waits for it.
reload_rsiw() {
	if [ "$RSIW_ROLE" = a ] && [ "$RSIW_DRIVER" = rsiw ]; then
		run rdma link delete "$DEV"
		run modprobe -r rsiw
		run modprobe rsiw "$@"
		rsiw_up eth0
	fi
	barrier "reload-$*"
}

load_driver
rsiw_up eth0
# Warm the page cache: a cold pyverbs import can outlast serve_client's 30 s
# wait for the listener on a loaded host.
python3 -c 'import pyverbs.cmid, pyverbs.qp' || die "pyverbs missing"
publish ip "$RSIW_IP"
publish ip6 "$RSIW_IP6"
barrier up
wait_peer 30

ucm_rounds default
pd_rounds

# rsiw as an MPA Rev 1 initiator (siw answers Rev 1), then with CRC.
for params in "mpa_version=1" "mpa_crc_required=1"; do
	reload_rsiw "$params"
	ip=$(fetch b ip)
	port=$((port + 1))
	serve_client "ucmatose-$params" b "$port" \
		"stdbuf -oL ucmatose -p $port -c 1 -C 0" \
		"stdbuf -oL ucmatose -s $ip -p $port -c 1 -C 0" 90
done
barrier done
pass
