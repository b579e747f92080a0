#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=900
#
# NVMe over Fabrics on rsiw, both ends in the kernel: VM a exports a
# memory-backed null_blk namespace through nvmet-rdma (configfs), VM b
# connects with nvme-rdma (nvme-cli) and runs fio with CRC32C verification
# of every block written (4 KiB and 64 KiB blocks, 8 in flight), then
# disconnects. nvme-rdma registers its data buffers with fast-registration
# MRs (ib_alloc_mr, ib_map_mr_sg, IB_WR_REG_MR, IB_WR_LOCAL_INV), and the
# target moves data with RDMA Read and Write.
. /rsiw/tests/vm/lib.sh

NQN=nqn.2026-11.org.rsiw:test
PORT=4420

target() {
	local cfg=/sys/kernel/config/nvmet sub
	run modprobe null_blk nr_devices=1 memory_backed=1 gb=1
	run modprobe nvmet-rdma
	mountpoint -q /sys/kernel/config || run mount -t configfs none /sys/kernel/config
	sub=$cfg/subsystems/$NQN
	mkdir "$sub"
	echo 1 >"$sub/attr_allow_any_host"
	mkdir "$sub/namespaces/1"
	echo /dev/nullb0 >"$sub/namespaces/1/device_path"
	echo 1 >"$sub/namespaces/1/enable"
	mkdir "$cfg/ports/1"
	echo rdma >"$cfg/ports/1/addr_trtype"
	echo ipv4 >"$cfg/ports/1/addr_adrfam"
	echo "$RSIW_IP" >"$cfg/ports/1/addr_traddr"
	echo $PORT >"$cfg/ports/1/addr_trsvcid"
	ln -s "$sub" "$cfg/ports/1/subsystems/$NQN"
	wait_listen $PORT 30
	log "target listening on $RSIW_IP:$PORT"
}

target_down() {
	local cfg=/sys/kernel/config/nvmet
	rm -f "$cfg/ports/1/subsystems/$NQN"
	rmdir "$cfg/ports/1"
	echo 0 >"$cfg/subsystems/$NQN/namespaces/1/enable"
	rmdir "$cfg/subsystems/$NQN/namespaces/1"
	rmdir "$cfg/subsystems/$NQN"
	run modprobe -r nvmet-rdma
}

host() {
	local ip=$1 dev
	run modprobe nvme-rdma
	run nvme connect -t rdma -a "$ip" -s $PORT -n "$NQN"
	wait_for 30 eval "ls /dev/nvme*n1" || die "no NVMe namespace appeared"
	dev=$(ls /dev/nvme*n1 | head -n 1)
	run nvme list
	run fio --name=verify --filename="$dev" --rw=randwrite --bsrange=4k-64k \
		--size=4M --ioengine=libaio --iodepth=8 --direct=1 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --output-format=terse \
		--terse-version=3 >"$RSIW_OUT/fio.txt"
	cat "$RSIW_OUT/fio.txt"
	run nvme disconnect -n "$NQN"
}

load_driver
rsiw_up eth0
publish ip "$RSIW_IP"
barrier up
wait_peer 30
if [ "$RSIW_ROLE" = a ]; then
	target
	publish target-up 1
	fetch b host-done 600 >/dev/null
	target_down
else
	fetch a target-up 120 >/dev/null
	host "$(fetch a ip)"
	publish host-done 1
fi
barrier done
pass
