# SPDX-License-Identifier: GPL-2.0
"""The lockdep reports of upstream code that the tests can trigger and rsiw
takes no part in, shared by the VM runner (scripts/rsiw/vm.py, which reads
every console) and the blktests cases (tests/vm/py/blktests.py, which reads
the kernel log blktests kept of a failed test)."""

import re

# Lockdep reports of upstream code that the tests can trigger and rsiw takes no
# part in, by the two lock classes of a "possible circular locking dependency"
# report. Such a report is logged but does not fail the run; any other lockdep
# report does. Lockdep turns itself off after its first report, so cases that
# can trigger one do so last in the VM (see tests/vm/nvmeof.sh).
KNOWN_LOCKDEP = {
    # nvmet-rdma: a command that arrives before the target handled the
    # ESTABLISHED event is queued and then run from the CM handler, under
    # rdma_cm's handler_mutex (nvmet_rdma_queue_established), and an I/O
    # queue's Connect takes nvmet_config_sem (nvmet_execute_io_connect);
    # removing the port through configfs holds nvmet_config_sem and destroys
    # the listening cm_id (handler_mutex). Timing-dependent, with any iWARP
    # device: the ESTABLISHED event goes through iw_cm's work queue while the
    # completion goes through ib-comp-wq.
    frozenset({"nvmet_config_sem", "&id_priv->handler_mutex"}):
        "nvmet-rdma: early Connect run from the CM handler vs. port removal (upstream)",
    # srp/002 (dm-multipath over SRP, logout and login under file I/O): the
    # SCSI disk's removal (srp_remove_work, sd_remove, del_gendisk, with the
    # queue frozen: its usage counter) flushes the bdi's writeback work,
    # which dm's request cloning made wait on that queue. Block layer and
    # dm; the same report on rsiw and siw (rsiw-testing.rst, blktests).
    frozenset({"(work_completion)(&(&wb->dwork)->work)", "&q->q_usage_counter(queue)"}):
        "srp/002: del_gendisk() with the queue frozen vs. writeback through dm (upstream)",
}
LOCK_ADDR_RE = re.compile(r"^\s*[0-9a-f]+ \(")


def lock_class(msg: str) -> str | None:
    """The lock class of a lockdep lock line, "ADDR (CLASS){USAGE}-{..}, at: ...",
    whose CLASS may hold parentheses ("(work_completion)(&(&wb->dwork)->work)"),
    without the "#N" that numbers the instances of a class name
    ("&q->q_usage_counter(queue)#8")."""
    m = LOCK_ADDR_RE.match(msg)
    if not m:
        return None
    depth, start = 1, m.end()
    for i in range(start, len(msg)):
        c = msg[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                if not msg.startswith("{", i + 1):
                    return None
                return re.sub(r"#\d+$", "", msg[start:i])
    return None


def circular_report_locks(lines) -> list:
    """The two lock classes of each "possible circular locking dependency"
    report in LINES (kernel log messages, without their timestamps): the
    lock the task tried to take and the one it held."""
    out, cur, nxt = [], None, False
    for msg in lines:
        if "possible circular locking dependency detected" in msg:
            cur, nxt = [], False
            out.append(cur)
        elif cur is not None and len(cur) < 2:
            if nxt:
                cur.append(lock_class(msg) or "?")
                nxt = False
            elif "is trying to acquire lock:" in msg or "but task is already holding lock:" in msg:
                nxt = True
    return out
