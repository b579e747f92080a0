#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check that resizing a user CQ fails with EOPNOTSUPP, in the library and
in the kernel.

  cq_resize.py DEV

The stock siw provider has no resize_cq, so ibv_resize_cq() fails in
libibverbs without reaching the kernel. The kernel's answer is checked with
the raw uverbs command (IB_USER_VERBS_CMD_RESIZE_CQ through libibverbs'
ibv_cmd_resize_cq()): rsiw does not implement resize_user_cq, so uverbs must
refuse it with EOPNOTSUPP and the CQ must stay usable. Exits non-zero on a
failure.
"""

import ctypes
import errno
import sys

vp = ctypes.c_void_p
lib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
lib.ibv_get_device_list.restype = ctypes.POINTER(vp)
lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
lib.ibv_free_device_list.argtypes = [ctypes.POINTER(vp)]
lib.ibv_get_device_name.restype = ctypes.c_char_p
lib.ibv_get_device_name.argtypes = [vp]
lib.ibv_open_device.restype = vp
lib.ibv_open_device.argtypes = [vp]
lib.ibv_close_device.argtypes = [vp]
lib.ibv_create_cq.restype = vp
lib.ibv_create_cq.argtypes = [vp, ctypes.c_int, vp, vp, ctypes.c_int]
lib.ibv_destroy_cq.argtypes = [vp]
lib.ibv_resize_cq.argtypes = [vp, ctypes.c_int]
lib.ibv_cmd_resize_cq.argtypes = [vp, ctypes.c_int, vp, ctypes.c_size_t, vp, ctypes.c_size_t]


def main() -> int:
    name = sys.argv[1].encode()
    n = ctypes.c_int()
    devs = lib.ibv_get_device_list(ctypes.byref(n))
    dev = next((devs[i] for i in range(n.value) if lib.ibv_get_device_name(devs[i]) == name), None)
    if dev is None:
        print(f"FAIL: no device {name.decode()}")
        return 1
    ctx = lib.ibv_open_device(dev)
    lib.ibv_free_device_list(devs)
    if not ctx:
        print(f"FAIL: ibv_open_device: {errno.errorcode.get(ctypes.get_errno())}")
        return 1
    cq = lib.ibv_create_cq(ctx, 16, None, None, 0)
    if not cq:
        print(f"FAIL: ibv_create_cq: {errno.errorcode.get(ctypes.get_errno())}")
        return 1
    bad = 0
    rc = lib.ibv_resize_cq(cq, 64)
    print(f"ibv_resize_cq(64): {errno.errorcode.get(rc, rc)}")
    if rc != errno.EOPNOTSUPP:
        bad += 1
    # struct ibv_resize_cq: the 8-byte command header, then cq_handle, cqe
    # and the response pointer; struct ib_uverbs_resize_cq_resp: cqe, reserved.
    cmd = ctypes.create_string_buffer(24)
    resp = ctypes.create_string_buffer(8)
    for cqe in (64, 8):
        rc = lib.ibv_cmd_resize_cq(cq, cqe, cmd, len(cmd), resp, len(resp))
        print(f"IB_USER_VERBS_CMD_RESIZE_CQ({cqe}): {errno.errorcode.get(rc, rc)}")
        if rc != errno.EOPNOTSUPP:
            bad += 1
    rc = lib.ibv_destroy_cq(cq)
    if rc:
        print(f"FAIL: ibv_destroy_cq: {errno.errorcode.get(rc, rc)}")
        bad += 1
    lib.ibv_close_device(ctx)
    if bad:
        print(f"FAIL: {bad} resize answers were not EOPNOTSUPP")
        return 1
    print("user CQ resize: EOPNOTSUPP from the library and from the kernel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
