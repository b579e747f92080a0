#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=1500
#
# RTRS and rnbd over rsiw, rsiw to rsiw, with RFC 7306 immediate data on
# (rfc7306=1; RTRS needs it, which is why blktests runs rnbd on rxe only):
# VM a exports a memory-backed null_blk through rnbd-server, VM b maps it
# with rnbd-client, runs fio with CRC32C verification, unmaps it and unloads
# both modules. Twice: with rtrs-server always_invalidate=Y (the default: the
# server answers with IB_WR_SEND_WITH_IMM carrying a message, which the
# client takes as one IB_WC_RECV with IB_WC_WITH_IMM: rsiw's Send with
# Immediate in one receive) and with always_invalidate=N (zero-length RDMA
# Writes with Immediate into receives with no SGE, and Sends with
# Invalidate). The console must stay clean.
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "RTRS needs immediate data, which siw does not have"
run modprobe rsiw rfc7306=1
peer_link_up

for inv in Y N; do
	if [ "$RSIW_ROLE" = a ]; then
		[ "$inv" = Y ] && run modprobe null_blk nr_devices=1 memory_backed=1 gb=1
		run modprobe rtrs-server always_invalidate=$inv
		run modprobe rnbd-server
		wait_listen 1234 30
		publish "ready-$inv" 1
		fetch b "done-$inv" 900 >/dev/null
		run modprobe -r rnbd-server
		run modprobe -r rtrs-server
	else
		ip=$(fetch a ip)
		fetch a "ready-$inv" 300 >/dev/null
		t0=$(date +%s)
		run modprobe rnbd-client
		echo "sessname=rsiw$inv path=ip:$ip device_path=/dev/nullb0" \
			>/sys/class/rnbd-client/ctl/map_device || die "map_device failed"
		wait_for 30 eval "test -b /dev/rnbd0" || die "no /dev/rnbd0"
		log "always_invalidate=$inv: fio, 4 MiB random writes, 4-64 KiB blocks, CRC32C verify"
		fio --name=verify --filename=/dev/rnbd0 --rw=randwrite --bsrange=4k-64k \
			--size=4M --ioengine=libaio --iodepth=8 --direct=1 \
			--verify=crc32c --verify_fatal=1 --do_verify=1 --output-format=terse \
			--terse-version=3 >"$RSIW_OUT/fio-$inv.txt"
		cat "$RSIW_OUT/fio-$inv.txt"
		# Terse v3: field 5 is the error, 6 the KiB read (verified), 47 the KiB written.
		assert_eq "$(awk -F';' '{ print $5, $6, $47 }' "$RSIW_OUT/fio-$inv.txt")" \
			"0 4096 4096" "fio error, KiB verified, KiB written"
		echo normal >/sys/block/rnbd0/rnbd/unmap_device || die "unmap_device failed"
		wait_for 30 eval "! test -b /dev/rnbd0" || die "/dev/rnbd0 still there"
		run modprobe -r rnbd-client
		run modprobe -r rtrs-client
		log "always_invalidate=$inv: map, 4 MiB verified, unmap in $(($(date +%s) - t0)) s"
		publish "done-$inv" 1
	fi
done
barrier done
pass
