#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# rdma-core's stock siw provider opens the device: ibv_devices lists it and
# ibv_devinfo -v shows an active iWARP port, with no provider warnings; the
# port's GID[0] is derived from the netdev's MAC.
. /rsiw/tests/vm/lib.sh

mac=02:72:73:69:77:01
load_driver
veth_pair veth0 veth1 "$mac"
rsiw_up veth0

export IBV_SHOW_WARNINGS=1
out=$(ibv_devices 2>&1)
echo "$out"
assert_match "$out" "^[[:space:]]*$DEV[[:space:]]" "ibv_devices"
assert_no_match "$out" "[Ww]arn|couldn't load driver" "ibv_devices"

err=$RSIW_OUT/ibv_devinfo.err
out=$(ibv_devinfo -v -d "$DEV" 2>"$err") || { cat "$err"; die "ibv_devinfo -v -d $DEV failed"; }
echo "$out"
cat "$err"
assert_eq "$(grep -ci -e warn -e "couldn't load" "$err")" 0 "warnings from ibv_devinfo"
assert_match "$out" "transport:[[:space:]]+iWARP \(1\)" "transport"
assert_match "$out" "state:[[:space:]]+PORT_ACTIVE" "port state"
assert_match "$out" "node_guid:[[:space:]]+[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}" "node_guid"
assert_no_match "$out" "node_guid:[[:space:]]+0000:0000:0000:0000" "node_guid"

# GID[0] is derived from the MAC: its first six bytes (as siw does it). The
# kernel's GID table is in sysfs; ibv_devinfo prints a GID only when its last
# eight bytes are not zero, so check its line only if there is one.
gid_mac() {
	python3 -c 'import ipaddress, sys; b = ipaddress.IPv6Address(sys.argv[1]).packed; print(":".join(f"{x:02x}" for x in b[:6]))' "$1"
}
gid=$(cat "/sys/class/infiniband/$DEV/ports/1/gids/0")
log "GID[0] of $DEV: $gid"
assert_eq "$(gid_mac "$gid")" "$mac" "MAC in GID[0] ($gid)"
gid_v=$(awk '/GID\[ *0\]:/ { print $2; exit }' <<<"$out")
[ -z "$gid_v" ] || assert_eq "$(gid_mac "$gid_v")" "$mac" "MAC in ibv_devinfo's GID[0] ($gid_v)"
pass
