# SPDX-License-Identifier: GPL-2.0
#
# NFS over RDMA helpers for the nfsrdma-* VM cases (source after lib.sh).
#
# nfsrdma_round SERVER_ROLE TAG: the VM of role SERVER_ROLE exports a tmpfs
# with the kernel NFS server (nfsd, NFSv3) listening for RPC-over-RDMA on
# port 20049 (rpcrdma's svcrdma), the other VM mounts it with
# proto=rdma,port=20049 (xprtrdma), writes and verifies 4 MiB with fio
# (CRC32C, O_DIRECT so every block crosses the wire), copies a file there,
# drops the page cache, compares it, and unmounts. The MOUNT protocol goes over TCP
# (mountproto=tcp); NLM is off (nolock).
#
# The NFS transports use the DMA MR of their kernel PD for headers and
# inline data, fast registration (FRWR) for chunks, RDMA Read and Write
# from the server, and Send with Invalidate.

NFSRDMA_PORT=20049
NFSRDMA_EXPORT=/srv/nfs

nfsrdma_server_up() {
	run modprobe nfsd
	run modprobe rpcrdma
	mountpoint -q /proc/fs/nfsd || run mount -t nfsd nfsd /proc/fs/nfsd
	mkdir -p "$NFSRDMA_EXPORT" /var/lib/nfs /run/rpcbind
	run mount -t tmpfs -o size=64m nfsexport "$NFSRDMA_EXPORT"
	: >/var/lib/nfs/etab
	: >/var/lib/nfs/rmtab
	run rpcbind -w
	echo "$NFSRDMA_EXPORT *(rw,no_root_squash,insecure,no_subtree_check,fsid=1)" >/etc/exports
	run exportfs -ra
	run rpc.mountd -N 4 --no-udp
	run rpc.nfsd -N 4 -U 4
	echo "rdma $NFSRDMA_PORT" >/proc/fs/nfsd/portlist
	cat /proc/fs/nfsd/portlist
	wait_listen $NFSRDMA_PORT 30
	log "NFS server: $NFSRDMA_EXPORT on rdma $RSIW_IP:$NFSRDMA_PORT"
}

nfsrdma_server_down() {
	run rpc.nfsd 0
	run exportfs -ua
	pkill -x rpc.mountd || true
	pkill -x rpcbind || true
	run umount "$NFSRDMA_EXPORT"
	umount /proc/fs/nfsd
	wait_for 30 modprobe -r rpcrdma nfsd || die "cannot unload the NFS server modules"
}

# nfsrdma_client SERVER_IP TAG
nfsrdma_client() {
	local ip=$1 tag=$2 t0
	run modprobe nfs
	run modprobe rpcrdma
	mkdir -p /mnt/nfs
	t0=$(date +%s)
	run mount -t nfs -o vers=3,proto=rdma,port=$NFSRDMA_PORT,nolock,mountproto=tcp \
		"$ip:$NFSRDMA_EXPORT" /mnt/nfs
	grep ' /mnt/nfs ' /proc/mounts
	assert_match "$(grep ' /mnt/nfs ' /proc/mounts)" 'proto=rdma' "mount options"
	log "fio: 4 MiB random writes, 4-64 KiB blocks, O_DIRECT, CRC32C verify"
	fio --name=verify --directory=/mnt/nfs --rw=randwrite --bsrange=4k-64k \
		--size=4M --ioengine=libaio --iodepth=8 --direct=1 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --output-format=terse \
		--terse-version=3 >"$RSIW_OUT/nfs-fio-$tag.txt"
	cat "$RSIW_OUT/nfs-fio-$tag.txt"
	# fio warns on stdout that it cannot drop NFS's page cache (O_DIRECT is used anyway).
	assert_eq "$(awk -F';' '/^3;/ { print $5, $6, $47 }' "$RSIW_OUT/nfs-fio-$tag.txt")" "0 4096 4096" \
		"fio error, KiB verified, KiB written"
	# Buffered I/O: a 3 MiB file through the page cache, written back, dropped
	# from the cache and read again over the wire.
	head -c 3M /dev/urandom >/tmp/nfs-src
	run cp /tmp/nfs-src /mnt/nfs/copy
	sync
	echo 3 >/proc/sys/vm/drop_caches
	run cmp /tmp/nfs-src /mnt/nfs/copy
	run umount /mnt/nfs
	# nfsv3 holds nfs; both may stay busy for a moment after the unmount.
	wait_for 30 modprobe -r nfsv3 nfs rpcrdma || die "cannot unload the NFS client modules"
	log "round $tag: mount, 4 MiB verified, 3 MiB copied and read back, unmount in $(($(date +%s) - t0)) s"
}

nfsrdma_round() {
	local server=$1 tag=$2
	if [ "$RSIW_ROLE" = "$server" ]; then
		nfsrdma_server_up
		publish "nfs-up-$tag" 1
		fetch "$(peer_role)" "nfs-done-$tag" 600 >/dev/null
		nfsrdma_server_down
	else
		fetch "$server" "nfs-up-$tag" 120 >/dev/null
		nfsrdma_client "$(fetch "$server" ip)" "$tag"
		publish "nfs-done-$tag" 1
	fi
	barrier "nfs-done-$tag"
}

nfsrdma_setup() {
	load_ulp_driver
	rsiw_up eth0
	publish ip "$RSIW_IP"
	barrier up
	wait_peer 30
}
