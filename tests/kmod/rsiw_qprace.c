// SPDX-License-Identifier: GPL-2.0
/*
 * rsiw_qprace - destroys a QP between the iw_cm's iw_get_qp() and iw_add_ref()
 * (issue 38, item 3).
 *
 * iw_cm_connect() and iw_cm_accept() look the QP up with the provider's
 * iw_get_qp() and then take their reference with iw_add_ref(), both under the
 * cm_id's spinlock. A provider whose iw_get_qp() returns the QP without a
 * reference leaves a window in which an ib_destroy_qp() on another CPU frees
 * it, and iw_add_ref() then touches freed memory. The window is a few
 * instructions wide, with interrupts off, so the test VMs (one vCPU in
 * practice) can never hit it through rdma_connect().
 *
 * This module therefore plays the iw_cm's part itself, with the window held
 * open: it creates an RC QP on the RDMA device of netdev=, calls the device's
 * iw_get_qp() for it, destroys the QP from a kthread, and only after waiting
 * up to delay_ms for that destroy calls iw_add_ref() and iw_rem_ref(), as the
 * iw_cm would when the connection ends. A provider that hands the lookup's reference over to
 * the iw_cm makes ib_destroy_qp() wait for iw_rem_ref(): the wait times out
 * and the destroy returns after iw_rem_ref(). If the destroy returns within
 * delay_ms, the QP was freed while the iw_cm held a pointer to it: the module
 * says so and does not touch the QP again (on a KASAN kernel, calling
 * iw_add_ref() then would report the use after free).
 *
 * The module prints "PASS ..." or "FAIL ..." and fails to load (-EIO) on
 * failure. tests/vm/cases/qp-destroy-race.sh runs it.
 *
 * Parameters:
 *   netdev=NAME  the netdev of the RDMA device (default veth0)
 *   delay_ms=N   how long the window is held open (default 2000)
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>

static char *netdev = "veth0";
module_param(netdev, charp, 0444);
MODULE_PARM_DESC(netdev, "the netdev of the RDMA device (default veth0)");

static uint delay_ms = 2000;
module_param(delay_ms, uint, 0444);
MODULE_PARM_DESC(delay_ms, "how long iw_add_ref waits after iw_get_qp (default 2000)");

#define QR_TIMEOUT_MS 30000

struct qr {
	struct ib_qp *qp;
	struct completion destroyed;	/* ib_destroy_qp() returned */
	int destroy_ret;
};

static int qr_destroy_fn(void *data)
{
	struct qr *q = data;

	q->destroy_ret = ib_destroy_qp(q->qp);
	complete(&q->destroyed);
	return 0;
}

static int qr_run(struct ib_device *ibdev)
{
	struct ib_qp_init_attr qa = {};
	struct task_struct *task;
	struct ib_qp *got;
	struct ib_cq *cq;
	struct ib_pd *pd;
	struct qr q = {};
	int ret;

	if (!ibdev->ops.iw_get_qp || !ibdev->ops.iw_add_ref || !ibdev->ops.iw_rem_ref) {
		pr_info("FAIL setup: %s has no iw_cm operations\n", dev_name(&ibdev->dev));
		return -EINVAL;
	}
	init_completion(&q.destroyed);
	pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(pd))
		return PTR_ERR(pd);
	cq = ib_alloc_cq(ibdev, NULL, 16, 0, IB_POLL_DIRECT);
	ret = PTR_ERR_OR_ZERO(cq);
	if (ret)
		goto out_pd;
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qa.cap.max_send_wr = 4;
	qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.sq_sig_type = IB_SIGNAL_REQ_WR;
	qa.qp_type = IB_QPT_RC;
	q.qp = ib_create_qp(pd, &qa);
	ret = PTR_ERR_OR_ZERO(q.qp);
	if (ret) {
		pr_info("FAIL setup: ib_create_qp: %d\n", ret);
		goto out_cq;
	}

	/* The iw_cm's lookup (iw_cm_connect() does it under cm_id_priv->lock). */
	got = ibdev->ops.iw_get_qp(ibdev, q.qp->qp_num);
	if (got != q.qp) {
		pr_info("FAIL lookup: iw_get_qp(%u) returned %p, not the QP %p\n",
			q.qp->qp_num, got, q.qp);
		ib_destroy_qp(q.qp);
		ret = -EINVAL;
		goto out_cq;
	}

	/* Another CPU destroys the QP inside the window. */
	task = kthread_run(qr_destroy_fn, &q, "rsiw_qprace");
	if (IS_ERR(task)) {
		/* Not reached in practice; end the window as the iw_cm would. */
		ibdev->ops.iw_add_ref(got);
		ibdev->ops.iw_rem_ref(got);
		ib_destroy_qp(q.qp);
		ret = PTR_ERR(task);
		goto out_cq;
	}
	if (wait_for_completion_timeout(&q.destroyed, msecs_to_jiffies(delay_ms))) {
		/* The QP is gone: iw_add_ref() would touch freed memory. */
		pr_info("FAIL race: ib_destroy_qp returned (%d) while the iw_cm held the QP from iw_get_qp\n",
			q.destroy_ret);
		ret = -EINVAL;
		goto out_cq;
	}

	/* The iw_cm's reference, then the end of its connection. */
	ibdev->ops.iw_add_ref(got);
	ibdev->ops.iw_rem_ref(got);
	if (!wait_for_completion_timeout(&q.destroyed, msecs_to_jiffies(QR_TIMEOUT_MS))) {
		/* The kthread still uses q: do not return. */
		pr_info("FAIL release: ib_destroy_qp still waits %u ms after iw_rem_ref\n",
			QR_TIMEOUT_MS);
		wait_for_completion(&q.destroyed);
		ret = -ETIMEDOUT;
		goto out_cq;
	}
	if (q.destroy_ret) {
		pr_info("FAIL destroy: ib_destroy_qp: %d\n", q.destroy_ret);
		ret = q.destroy_ret;
		goto out_cq;
	}
	pr_info("PASS race: ib_destroy_qp waited for the iw_cm's reference (held %u ms)\n",
		delay_ms);
out_cq:
	ib_free_cq(cq);
out_pd:
	ib_dealloc_pd(pd);
	return ret;
}

static int __init qr_init(void)
{
	struct ib_device *ibdev;
	struct net_device *ndev;
	int ret;

	ndev = dev_get_by_name(&init_net, netdev);
	if (!ndev) {
		pr_info("FAIL setup: no netdev %s\n", netdev);
		return -ENODEV;
	}
	ibdev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	dev_put(ndev);
	if (!ibdev) {
		pr_info("FAIL setup: no RDMA device on %s\n", netdev);
		return -ENODEV;
	}
	ret = qr_run(ibdev);
	ib_device_put(ibdev);
	return ret ? -EIO : 0;
}

static void __exit qr_exit(void)
{
}

module_init(qr_init);
module_exit(qr_exit);
MODULE_DESCRIPTION("Destroys a QP between iw_get_qp and iw_add_ref, for rsiw's tests");
MODULE_LICENSE("GPL");
