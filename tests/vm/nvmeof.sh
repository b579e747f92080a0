# SPDX-License-Identifier: GPL-2.0
#
# NVMe over Fabrics helpers for the nvmeof-* VM cases (source after lib.sh).
#
# nvmeof_round TARGET_ROLE TAG: the VM of role TARGET_ROLE exports a
# memory-backed null_blk namespace through nvmet-rdma (configfs), the other
# VM connects with nvme-rdma (nvme-cli), runs fio with CRC32C verification of
# every block written (4 KiB to 64 KiB blocks, 8 in flight, 4 MiB), and
# disconnects; then the target is torn down and its modules unloaded. TAG
# names the round's rendezvous keys, so one boot can run several rounds.
#
# nvme-rdma registers its data buffers with fast-registration MRs (ib_alloc_mr,
# ib_map_mr_sg, IB_WR_REG_MR, Send with Invalidate); nvmet-rdma moves data
# with rdma_rw (RDMA Read with Local Invalidate on iWARP, RDMA Write) and
# posts its receives and commands in the DMA MR of its kernel PD.

NVMEOF_NQN=nqn.2026-11.org.rsiw:test
NVMEOF_PORT=4420
NVMEOF_CFG=/sys/kernel/config/nvmet

nvmeof_target_up() {
	local sub=$NVMEOF_CFG/subsystems/$NVMEOF_NQN
	run modprobe null_blk nr_devices=1 memory_backed=1 gb=1
	run modprobe nvmet-rdma
	mountpoint -q /sys/kernel/config || run mount -t configfs none /sys/kernel/config
	mkdir "$sub"
	echo 1 >"$sub/attr_allow_any_host"
	mkdir "$sub/namespaces/1"
	echo /dev/nullb0 >"$sub/namespaces/1/device_path"
	echo 1 >"$sub/namespaces/1/enable"
	mkdir "$NVMEOF_CFG/ports/1"
	echo rdma >"$NVMEOF_CFG/ports/1/addr_trtype"
	echo ipv4 >"$NVMEOF_CFG/ports/1/addr_adrfam"
	echo "$RSIW_IP" >"$NVMEOF_CFG/ports/1/addr_traddr"
	echo $NVMEOF_PORT >"$NVMEOF_CFG/ports/1/addr_trsvcid"
	ln -s "$sub" "$NVMEOF_CFG/ports/1/subsystems/$NVMEOF_NQN"
	wait_listen $NVMEOF_PORT 30
	log "target listening on $RSIW_IP:$NVMEOF_PORT"
}

nvmeof_target_down() {
	local sub=$NVMEOF_CFG/subsystems/$NVMEOF_NQN
	rm -f "$NVMEOF_CFG/ports/1/subsystems/$NVMEOF_NQN"
	rmdir "$NVMEOF_CFG/ports/1"
	echo 0 >"$sub/namespaces/1/enable"
	rmdir "$sub/namespaces/1"
	rmdir "$sub"
	run modprobe -r nvmet-rdma
	run modprobe -r null_blk
}

# nvmeof_host TARGET_IP TAG
nvmeof_host() {
	local ip=$1 tag=$2 dev t0
	run modprobe nvme-rdma
	t0=$(date +%s)
	run nvme connect -t rdma -a "$ip" -s $NVMEOF_PORT -n "$NVMEOF_NQN"
	wait_for 30 eval "ls /dev/nvme*n1" || die "no NVMe namespace appeared"
	dev=$(ls /dev/nvme*n1 | head -n 1)
	run nvme list
	log "fio: 4 MiB random writes, 4-64 KiB blocks, CRC32C verify"
	fio --name=verify --filename="$dev" --rw=randwrite --bsrange=4k-64k \
		--size=4M --ioengine=libaio --iodepth=8 --direct=1 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --output-format=terse \
		--terse-version=3 >"$RSIW_OUT/fio-$tag.txt"
	cat "$RSIW_OUT/fio-$tag.txt"
	# Terse v3: field 5 is the error, 6 the KiB read (verified), 47 the KiB written.
	assert_eq "$(awk -F';' '{ print $5, $6, $47 }' "$RSIW_OUT/fio-$tag.txt")" "0 4096 4096" \
		"fio error, KiB verified, KiB written"
	run nvme disconnect -n "$NVMEOF_NQN"
	wait_for 30 eval "! ls /dev/nvme*n1 2>/dev/null" || die "namespace still there after disconnect"
	run modprobe -r nvme-rdma
	log "round $tag: connect, 4 MiB verified, disconnect in $(($(date +%s) - t0)) s"
}

nvmeof_round() {
	local target=$1 tag=$2
	if [ "$RSIW_ROLE" = "$target" ]; then
		nvmeof_target_up
		publish "target-up-$tag" 1
		fetch "$(peer_role)" "host-done-$tag" 600 >/dev/null
		nvmeof_target_down
	else
		fetch "$target" "target-up-$tag" 120 >/dev/null
		nvmeof_host "$(fetch "$target" ip)" "$tag"
		publish "host-done-$tag" 1
	fi
	barrier "done-$tag"
}

nvmeof_setup() {
	load_ulp_driver
	rsiw_up eth0
	publish ip "$RSIW_IP"
	barrier up
	wait_peer 30
}
