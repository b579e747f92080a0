// SPDX-License-Identifier: GPL-2.0
/*
 * rsiw_kext - an in-kernel verbs consumer of the RFC 7306 extensions:
 * atomics and immediate data, posted through ib_core as a ULP posts them.
 *
 * At load it finds the device named by "dev" and connects QPs over rdma_cm
 * on addr= (a listener and a client in this module, so the device is the
 * requester and the responder at once). Each side registers a page with fast
 * registration (remote read, write and atomic) for the other. Then, with each
 * side as the requester in turn:
 *  - FetchAdd, CmpSwap (matching and not), masked FetchAdd and masked
 *    CmpSwap with the vectors of spec-map ATOM-07 and ATOM-08: the original
 *    value in the result buffer, the target word after, the completion's
 *    opcode and length;
 *  - ATOM-16: a Write, a FetchAdd of the written word and a Send, posted
 *    together, complete in order and the FetchAdd sees the Write;
 *  - IMM-05: RDMA Write with Immediate (16 bytes, and zero bytes into a
 *    receive with no SGE, as RTRS posts it): IB_WC_RECV_RDMA_WITH_IMM with
 *    the immediate and the Write's length (D-07);
 *  - Send with Immediate: one IB_WC_RECV with IB_WC_WITH_IMM and the
 *    payload, consuming one receive; IMM-03: Sends, Writes with Immediate
 *    and Sends with Immediate complete their receives in order.
 * Then the errors a requester sees (each on a connection of its own): an
 * atomic to a misaligned address and to a region without remote atomic
 * access complete in error, the word is unchanged, both QPs go to ERROR.
 * With bench=N it then measures the mean of N round trips of an 8-byte
 * Read, a FetchAdd, a masked FetchAdd, and an 8-byte Write ping-pong without
 * and with immediate data (ib_write_lat's exchange), prints the ratios, and
 * the rate of FetchAdds with 4 in flight; bench_only=1 skips everything else
 * (make bench).
 * Last, ATOM-15: nqp connections, each with "threads" threads posting
 * FetchAdd +1 "iters" times to one word, while cpu_threads threads add to
 * it with atomic64_inc(): the final value is exact.
 *
 * With commit=1 it checks the commit extensions (draft-talpey-rdma-commit-02)
 * instead, on a device loaded with rsiw commit=1: IB_DEVICE_FLUSH_GLOBAL,
 * IB_DEVICE_ATOMIC_WRITE and IB_DEVICE_FLUSH_PERSISTENT; a fast registration
 * with IB_ACCESS_FLUSH_PERSISTENT refused (DRAM is not persistent memory);
 * with each side as the requester, Writes, a Flush (global visibility) and an
 * Atomic Write posted together complete in order as IB_WC_FLUSH and
 * IB_WC_ATOMIC_WRITE and the target holds the Writes and the 8 bytes; a
 * whole-region Flush with a garbage range; more Flushes and Atomic Writes
 * than ORD in one post (CMT-02); and on connections of their own the errors:
 * Flush to persistence or without the Flushable right (IB_WC_REM_ACCESS_ERR),
 * a misaligned Atomic Write and one without remote write (an error, the word
 * unchanged, both QPs in ERROR), and bad Flush flags refused when posted.
 * With commit_off=1 it checks that a device with them off refuses
 * IB_WR_FLUSH and IB_WR_ATOMIC_WRITE with EINVAL.
 *
 * With peer= and commit=1 it posts a Flush instead (CMT-06).
 *
 * With off=1 it checks a device that has the extensions off instead: no
 * atomic capability, and every extension opcode refused with EINVAL. With
 * peer= it only posts a FetchAdd to a server without RFC 7306 there (C siw),
 * which must end in that peer's Terminate: an error completion, the QP in
 * ERROR, a disconnect (ATOM-17).
 *
 * It prints "PASS name: ...", "FAIL name: ..." or "SKIP name: ..." per check
 * and "rsiw_kext: summary: N passed, N failed, N skipped"; the module init
 * fails with -EIO if any check failed. tests/vm/cases/kernel-ext.sh runs it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

static char *dev = "rsiw0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "RDMA device to test (default rsiw0)");
static char *addr = "";
module_param(addr, charp, 0444);
MODULE_PARM_DESC(addr, "IPv4 address of the device's netdev (required)");
static ushort port = 7274;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "first TCP port of the rdma_cm loopback listeners (default 7274)");
static bool off;
module_param(off, bool, 0444);
MODULE_PARM_DESC(off, "check a device with the extensions off (default: on)");
static char *peer = "";
module_param(peer, charp, 0444);
MODULE_PARM_DESC(peer, "IPv4 address of a server without RFC 7306 (C siw): only the atomic to it is checked");
static unsigned int nqp = 4;
module_param(nqp, uint, 0444);
MODULE_PARM_DESC(nqp, "connections of the concurrency check (default 4)");
static unsigned int threads = 2;
module_param(threads, uint, 0444);
MODULE_PARM_DESC(threads, "FetchAdd threads per connection (default 2)");
static unsigned int iters = 250;
module_param(iters, uint, 0444);
MODULE_PARM_DESC(iters, "FetchAdds per thread (default 250)");
static unsigned int bench;
module_param(bench, uint, 0444);
MODULE_PARM_DESC(bench, "round trips per latency measurement (default 0: none)");
static bool bench_only;
module_param(bench_only, bool, 0444);
MODULE_PARM_DESC(bench_only, "with bench=N, only the measurements (make bench)");
static bool commit;
module_param(commit, bool, 0444);
MODULE_PARM_DESC(commit, "check the commit extensions (rsiw commit=1) instead");
static bool commit_off;
module_param(commit_off, bool, 0444);
MODULE_PARM_DESC(commit_off, "check that a device with commit=0 refuses Flush and Atomic Write");
static unsigned int cpu_threads = 2;
module_param(cpu_threads, uint, 0444);
MODULE_PARM_DESC(cpu_threads, "threads adding to the word with CPU atomics (default 2)");

#define KX_MAX_QP 16
#define KX_MAX_THREADS 8
#define KX_CPU_ITERS 20000
#define KX_TIMEOUT_MS 20000
#define KX_CM_ERRORS							\
	(BIT(RDMA_CM_EVENT_ADDR_ERROR) | BIT(RDMA_CM_EVENT_ROUTE_ERROR) |	\
	 BIT(RDMA_CM_EVENT_CONNECT_ERROR) | BIT(RDMA_CM_EVENT_UNREACHABLE) |	\
	 BIT(RDMA_CM_EVENT_REJECTED) | BIT(RDMA_CM_EVENT_DEVICE_REMOVAL))
#define KX_ACCESS_ALL (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ |	\
		       IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)

struct kx {
	struct ib_device *ibdev;
	struct ib_pd *pd;
	unsigned int pass, fail, skip;
};

static __printf(4, 5) void kx_report(const char *verdict, unsigned int *count,
				     const char *name, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("%s %s: %pV\n", verdict, name, &vaf);
	va_end(args);
	(*count)++;
}

#define kx_pass(t, name, ...) kx_report("PASS", &(t)->pass, name, __VA_ARGS__)
#define kx_fail(t, name, ...) kx_report("FAIL", &(t)->fail, name, __VA_ARGS__)
#define kx_skip(t, name, ...) kx_report("SKIP", &(t)->skip, name, __VA_ARGS__)

/* --- a connected pair ---------------------------------------------------- */

/*
 * Side 0 is the client, side 1 the server. Each side has a CQ for sends and
 * receives, a page registered (fast registration) for the other side's
 * remote accesses, and a page for local buffers (the PD's DMA lkey).
 */
struct kx_conn {
	struct rdma_cm_id *listen, *id[2];
	struct ib_cq *cq[2];
	void *page[2], *local[2];
	struct scatterlist sg[2];
	bool mapped[2];
	struct ib_mr *mr[2];
	wait_queue_head_t wq;
	spinlock_t lock;		/* protects id[1], ev and pdata */
	unsigned long ev[2];		/* the RDMA_CM_EVENT_* seen, as bits */
	u8 pdata[24];			/* the client's ESTABLISHED private data */
};

static int kx_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct kx_conn *c = id->context;
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&c->lock, flags);
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		if (c->id[1])
			ret = 1;
		else
			c->id[1] = id;
		c->ev[1] |= BIT(ev->event);
	} else {
		if (id == c->id[0] && ev->event == RDMA_CM_EVENT_ESTABLISHED &&
		    ev->param.conn.private_data)
			memcpy(c->pdata, ev->param.conn.private_data,
			       min_t(size_t, ev->param.conn.private_data_len, sizeof(c->pdata)));
		c->ev[id == c->id[0] ? 0 : 1] |= BIT(ev->event);
	}
	spin_unlock_irqrestore(&c->lock, flags);
	wake_up(&c->wq);
	return ret;
}

static int kx_cm_wait(struct kx_conn *c, int side, enum rdma_cm_event_type ev)
{
	wait_event_timeout(c->wq, READ_ONCE(c->ev[side]) & (BIT(ev) | KX_CM_ERRORS),
			   msecs_to_jiffies(KX_TIMEOUT_MS));
	return READ_ONCE(c->ev[side]) & BIT(ev) ? 0 : -ETIMEDOUT;
}

static struct ib_qp *kx_qp(struct kx_conn *c, int side)
{
	return c->id[side] ? c->id[side]->qp : NULL;
}

static void kx_teardown(struct ib_device *ibdev, struct kx_conn *c)
{
	int s;

	for (s = 0; s < 2; s++) {
		if (c->id[s]) {
			if (c->id[s]->qp)
				rdma_destroy_qp(c->id[s]);
			rdma_destroy_id(c->id[s]);
		}
	}
	if (c->listen)
		rdma_destroy_id(c->listen);
	for (s = 0; s < 2; s++) {
		if (!IS_ERR_OR_NULL(c->mr[s]))
			ib_dereg_mr(c->mr[s]);
		if (c->mapped[s])
			ib_dma_unmap_sg(ibdev, &c->sg[s], 1, DMA_BIDIRECTIONAL);
		if (!IS_ERR_OR_NULL(c->cq[s]))
			ib_free_cq(c->cq[s]);
		free_page((unsigned long)c->page[s]);
		free_page((unsigned long)c->local[s]);
	}
	memset(c, 0, sizeof(*c));
}

/* Polls @cq for one completion into @wc; returns 0, or -ETIMEDOUT. */
static int kx_poll(struct ib_cq *cq, struct ib_wc *wc)
{
	unsigned long end = jiffies + msecs_to_jiffies(KX_TIMEOUT_MS);

	while (time_before(jiffies, end)) {
		if (ib_poll_cq(cq, 1, wc) == 1)
			return 0;
		usleep_range(1000, 2000);
	}
	return -ETIMEDOUT;
}

/* Registers @len bytes at @buf for @side with @access; returns the MR. */
static struct ib_mr *kx_reg(struct kx *t, struct kx_conn *c, int side, void *buf,
			    struct scatterlist *sg, bool *mapped, int access)
{
	struct ib_qp *qp = kx_qp(c, side);
	struct ib_reg_wr rw = {};
	const struct ib_send_wr *bad;
	struct ib_wc wc;
	struct ib_mr *mr;
	int ret;

	mr = ib_alloc_mr(t->pd, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(mr))
		return mr;
	sg_init_one(sg, buf, PAGE_SIZE);
	if (ib_dma_map_sg(t->ibdev, sg, 1, DMA_BIDIRECTIONAL) != 1) {
		ib_dereg_mr(mr);
		return ERR_PTR(-EIO);
	}
	*mapped = true;
	ret = ib_map_mr_sg(mr, sg, 1, NULL, PAGE_SIZE);
	if (ret != 1)
		goto fail;
	rw.wr.opcode = IB_WR_REG_MR;
	rw.wr.send_flags = IB_SEND_SIGNALED;
	rw.wr.wr_id = 0xfe;
	rw.mr = mr;
	rw.key = mr->rkey;
	rw.access = access;
	ret = ib_post_send(qp, &rw.wr, &bad) ?: kx_poll(c->cq[side], &wc);
	if (ret || wc.status != IB_WC_SUCCESS)
		goto fail;
	return mr;
fail:
	ib_dereg_mr(mr);
	return ERR_PTR(ret ?: -EIO);
}

/*
 * Connects pair @c on port @p: the client's CQ polled in @cli_ctx (the
 * server's directly), both pages registered with @access. Returns 0 or the
 * error, reported under @name.
 */
static noinline_for_stack int kx_setup(struct kx *t, struct kx_conn *c, const char *name,
				       u16 p, enum ib_poll_context cli_ctx, int access)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(p) };
	struct rdma_conn_param cp = { .initiator_depth = 4, .responder_resources = 4 };
	struct ib_qp_init_attr qa;
	struct rdma_cm_id *id;
	const char *step;
	int s, ret;

	init_waitqueue_head(&c->wq);
	spin_lock_init(&c->lock);
	if (!in4_pton(addr, -1, (u8 *)&sin.sin_addr.s_addr, -1, NULL)) {
		kx_fail(t, name, "addr=%s is not an IPv4 address", addr);
		return -EINVAL;
	}
	step = "allocations";
	ret = -ENOMEM;
	for (s = 0; s < 2; s++) {
		c->page[s] = (void *)get_zeroed_page(GFP_KERNEL);
		c->local[s] = (void *)get_zeroed_page(GFP_KERNEL);
		c->cq[s] = ib_alloc_cq(t->ibdev, NULL, 256, 0, s ? IB_POLL_DIRECT : cli_ctx);
		if (!c->page[s] || !c->local[s] || IS_ERR(c->cq[s]))
			goto fail;
	}
	step = "listen";
	id = rdma_create_id(&init_net, kx_cm_handler, c, RDMA_PS_TCP, IB_QPT_RC);
	ret = PTR_ERR_OR_ZERO(id);
	if (ret)
		goto fail;
	c->listen = id;
	ret = rdma_bind_addr(id, (struct sockaddr *)&sin) ?: rdma_listen(id, 1);
	if (ret)
		goto fail;
	step = "resolve";
	id = rdma_create_id(&init_net, kx_cm_handler, c, RDMA_PS_TCP, IB_QPT_RC);
	ret = PTR_ERR_OR_ZERO(id);
	if (ret)
		goto fail;
	spin_lock_irq(&c->lock);
	c->id[0] = id;
	spin_unlock_irq(&c->lock);
	ret = rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 5000) ?:
	      kx_cm_wait(c, 0, RDMA_CM_EVENT_ADDR_RESOLVED) ?:
	      rdma_resolve_route(id, 5000) ?:
	      kx_cm_wait(c, 0, RDMA_CM_EVENT_ROUTE_RESOLVED);
	if (ret)
		goto fail;
	ret = -ENODEV;
	if (id->device != t->ibdev)
		goto fail;
	step = "connect";
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IB_QPT_RC;
	qa.sq_sig_type = IB_SIGNAL_REQ_WR;
	qa.cap.max_send_wr = 64;
	qa.cap.max_recv_wr = 64;
	qa.cap.max_send_sge = 2;
	qa.cap.max_recv_sge = 1;
	qa.send_cq = qa.recv_cq = c->cq[0];
	ret = rdma_create_qp(c->id[0], t->pd, &qa) ?: rdma_connect(c->id[0], &cp) ?:
	      kx_cm_wait(c, 1, RDMA_CM_EVENT_CONNECT_REQUEST);
	if (ret)
		goto fail;
	qa.send_cq = qa.recv_cq = c->cq[1];
	ret = rdma_create_qp(c->id[1], t->pd, &qa);
	if (ret)
		goto fail;
	rdma_lock_handler(c->id[1]);
	ret = rdma_accept(c->id[1], &cp);
	rdma_unlock_handler(c->id[1]);
	ret = ret ?: kx_cm_wait(c, 1, RDMA_CM_EVENT_ESTABLISHED) ?:
	      kx_cm_wait(c, 0, RDMA_CM_EVENT_ESTABLISHED);
	if (ret)
		goto fail;
	/* The server's side registers first: its CQ is polled directly. */
	step = "fast registration";
	for (s = 1; s >= 0; s--) {
		if (s == 0 && cli_ctx != IB_POLL_DIRECT) {
			/* A polled CQ only: the client's page is not a target then. */
			c->mr[0] = NULL;
			break;
		}
		c->mr[s] = kx_reg(t, c, s, c->page[s], &c->sg[s], &c->mapped[s], access);
		ret = PTR_ERR_OR_ZERO(c->mr[s]);
		if (ret)
			goto fail;
	}
	return 0;
fail:
	kx_fail(t, name, "%s: %d (client events %#lx, server events %#lx)", step, ret,
		READ_ONCE(c->ev[0]), READ_ONCE(c->ev[1]));
	return ret ?: -EIO;
}

/* --- requester and responder checks --------------------------------------- */

static const char *const side_name[2] = { "client", "server" };

/* A receive with @nsge SGEs (0 or 1) at @buf + @off of @side. */
static int kx_recv(struct kx *t, struct kx_conn *c, int side, u64 id, int nsge, u32 off)
{
	struct ib_sge sge = {
		.addr = (uintptr_t)c->local[side] + off,
		.length = 64,
		.lkey = t->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = nsge };
	const struct ib_recv_wr *bad;

	return ib_post_recv(kx_qp(c, side), &wr, &bad);
}

/*
 * Posts the atomic @opcode from @side to the other side's word at @off, with
 * @ca (compare or add), @swap and the masks; returns the original value from
 * the result buffer and checks the completion. -1 on failure (reported).
 */
static int kx_atomic(struct kx *t, struct kx_conn *c, int side, const char *name,
		     enum ib_wr_opcode opcode, u32 off, u64 ca, u64 swap, u64 cam, u64 sm,
		     u64 *orig)
{
	int peer = !side;
	u64 *res = c->local[side];
	struct ib_sge sge = {
		.addr = (uintptr_t)res,
		.length = 8,
		.lkey = t->pd->local_dma_lkey,
	};
	struct ib_atomic_wr aw = {
		.wr = {
			.wr_id = 0xa0 + opcode,
			.opcode = opcode,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = c->mr[peer]->iova + off,
		.rkey = c->mr[peer]->rkey,
		.compare_add = ca,
		.swap = swap,
		.compare_add_mask = cam,
		.swap_mask = sm,
	};
	static const enum ib_wc_opcode wc_op[] = {
		[IB_WR_ATOMIC_CMP_AND_SWP] = IB_WC_COMP_SWAP,
		[IB_WR_ATOMIC_FETCH_AND_ADD] = IB_WC_FETCH_ADD,
		[IB_WR_MASKED_ATOMIC_CMP_AND_SWP] = IB_WC_MASKED_COMP_SWAP,
		[IB_WR_MASKED_ATOMIC_FETCH_AND_ADD] = IB_WC_MASKED_FETCH_ADD,
	};
	const struct ib_send_wr *bad;
	struct ib_wc wc;
	int ret;

	*res = 0xdeadbeefdeadbeefULL;
	ret = ib_post_send(kx_qp(c, side), &aw.wr, &bad) ?: kx_poll(c->cq[side], &wc);
	if (ret) {
		kx_fail(t, name, "%s: post or poll: %d", side_name[side], ret);
		return -1;
	}
	if (wc.status != IB_WC_SUCCESS || wc.opcode != wc_op[opcode] || wc.byte_len != 8 ||
	    wc.wr_id != aw.wr.wr_id) {
		kx_fail(t, name, "%s: wc status %d opcode %d (want %d) byte_len %u", side_name[side],
			wc.status, wc.opcode, wc_op[opcode], wc.byte_len);
		return -1;
	}
	*orig = READ_ONCE(*res);
	return 0;
}

/* Checks one atomic: the word at @off starts at @before, ends at @after. */
static void kx_check_atomic(struct kx *t, struct kx_conn *c, int side, const char *name,
			    enum ib_wr_opcode opcode, u64 before, u64 ca, u64 swap, u64 cam,
			    u64 sm, u64 after)
{
	u64 *word = c->page[!side];
	u64 orig;

	WRITE_ONCE(*word, before);
	if (kx_atomic(t, c, side, name, opcode, 0, ca, swap, cam, sm, &orig))
		return;
	if (orig != before || READ_ONCE(*word) != after)
		kx_fail(t, name, "%s: original %#llx (want %#llx), word %#llx (want %#llx)",
			side_name[side], orig, before, READ_ONCE(*word), after);
	else
		kx_pass(t, name, "%s requester: %#llx -> %#llx", side_name[side], before, after);
}

/* Waits for a receive completion on @side and checks it. */
static bool kx_expect_recv(struct kx *t, struct kx_conn *c, int side, const char *name,
			   u64 id, enum ib_wc_opcode op, bool with_imm, __be32 imm, u32 len)
{
	struct ib_wc wc;

	if (kx_poll(c->cq[side], &wc)) {
		kx_fail(t, name, "%s: no receive completion", side_name[side]);
		return false;
	}
	if (wc.status != IB_WC_SUCCESS || wc.wr_id != id || wc.opcode != op ||
	    !!(wc.wc_flags & IB_WC_WITH_IMM) != with_imm || (with_imm && wc.ex.imm_data != imm) ||
	    wc.byte_len != len) {
		kx_fail(t, name,
			"%s: wc status %d wr_id %llu opcode %d flags %#x imm %#x byte_len %u; want wr_id %llu opcode %d imm %d/%#x byte_len %u",
			side_name[side], wc.status, wc.wr_id, wc.opcode, wc.wc_flags,
			be32_to_cpu(wc.ex.imm_data), wc.byte_len, id, op, with_imm,
			be32_to_cpu(imm), len);
		return false;
	}
	return true;
}

/* Waits for the send completion @id with @op on @side. */
static bool kx_expect_send(struct kx *t, struct kx_conn *c, int side, const char *name,
			   u64 id, enum ib_wc_opcode op)
{
	struct ib_wc wc;

	if (kx_poll(c->cq[side], &wc) || wc.status != IB_WC_SUCCESS || wc.wr_id != id ||
	    wc.opcode != op) {
		kx_fail(t, name, "%s: send completion %llu status %d opcode %d, want %llu/%d",
			side_name[side], wc.wr_id, wc.status, wc.opcode, id, op);
		return false;
	}
	return true;
}

static void kx_sge(struct kx *t, struct kx_conn *c, int side, struct ib_sge *sge, u32 off,
		   u32 len)
{
	sge->addr = (uintptr_t)c->local[side] + off;
	sge->length = len;
	sge->lkey = t->pd->local_dma_lkey;
}

/* ATOM-16: Write X=1, FetchAdd X+1, Send, posted together. */
static void kx_order(struct kx *t, struct kx_conn *c, int side)
{
	const char *name = "atom_16_write_atomic_send_order";
	int peer = !side;
	u64 *res = c->local[side], *x = c->page[peer] + 64;
	struct ib_sge wsge, asge;
	struct ib_rdma_wr w = {};
	struct ib_atomic_wr a = {};
	struct ib_send_wr s = {};
	const struct ib_send_wr *bad;

	WRITE_ONCE(*x, 0);
	*(u64 *)(c->local[side] + 512) = 1;
	kx_sge(t, c, side, &wsge, 512, 8);
	kx_sge(t, c, side, &asge, 0, 8);
	w.wr.wr_id = 1;
	w.wr.opcode = IB_WR_RDMA_WRITE;
	w.wr.send_flags = IB_SEND_SIGNALED;
	w.wr.sg_list = &wsge;
	w.wr.num_sge = 1;
	w.wr.next = &a.wr;
	w.remote_addr = c->mr[peer]->iova + 64;
	w.rkey = c->mr[peer]->rkey;
	a.wr.wr_id = 2;
	a.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	a.wr.send_flags = IB_SEND_SIGNALED;
	a.wr.sg_list = &asge;
	a.wr.num_sge = 1;
	a.wr.next = &s;
	a.remote_addr = c->mr[peer]->iova + 64;
	a.rkey = c->mr[peer]->rkey;
	a.compare_add = 1;
	s.wr_id = 3;
	s.opcode = IB_WR_SEND;
	s.send_flags = IB_SEND_SIGNALED;
	if (kx_recv(t, c, peer, 300, 0, 0) || ib_post_send(kx_qp(c, side), &w.wr, &bad)) {
		kx_fail(t, name, "%s: post failed", side_name[side]);
		return;
	}
	if (!kx_expect_send(t, c, side, name, 1, IB_WC_RDMA_WRITE) ||
	    !kx_expect_send(t, c, side, name, 2, IB_WC_FETCH_ADD) ||
	    !kx_expect_send(t, c, side, name, 3, IB_WC_SEND) ||
	    !kx_expect_recv(t, c, peer, name, 300, IB_WC_RECV, false, 0, 0))
		return;
	if (*res != 1 || READ_ONCE(*x) != 2)
		kx_fail(t, name, "%s: FetchAdd saw %llu (want 1), word %llu (want 2)",
			side_name[side], *res, READ_ONCE(*x));
	else
		kx_pass(t, name, "%s requester: Write, FetchAdd (saw the Write), Send in order",
			side_name[side]);
}

/* IMM-05, D-07: RDMA Write with Immediate of @len bytes (0: no SGE). */
static void kx_write_imm(struct kx *t, struct kx_conn *c, int side, const char *name, u32 len)
{
	int peer = !side;
	__be32 imm = cpu_to_be32(0x11223344 + len);
	struct ib_rdma_wr w = {};
	const struct ib_send_wr *bad;
	struct ib_sge sge;
	u8 *dst = c->page[peer] + 1024;

	memset(dst, 0, 64);
	memset(c->local[side] + 1024, 0x5a, len);
	kx_sge(t, c, side, &sge, 1024, len);
	w.wr.wr_id = 10;
	w.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
	w.wr.send_flags = IB_SEND_SIGNALED;
	w.wr.sg_list = len ? &sge : NULL;
	w.wr.num_sge = len ? 1 : 0;
	w.wr.ex.imm_data = imm;
	w.remote_addr = c->mr[peer]->iova + 1024;
	w.rkey = c->mr[peer]->rkey;
	/* A receive with no SGE, as RTRS posts them: its buffer is not written. */
	if (kx_recv(t, c, peer, 400 + len, 0, 0) || ib_post_send(kx_qp(c, side), &w.wr, &bad)) {
		kx_fail(t, name, "%s: post failed", side_name[side]);
		return;
	}
	if (!kx_expect_send(t, c, side, name, 10, IB_WC_RDMA_WRITE) ||
	    !kx_expect_recv(t, c, peer, name, 400 + len, IB_WC_RECV_RDMA_WITH_IMM, true, imm, len))
		return;
	if (len && (dst[0] != 0x5a || dst[len - 1] != 0x5a || dst[len]))
		kx_fail(t, name, "%s: the Write's bytes did not land", side_name[side]);
	else
		kx_pass(t, name, "%s requester: RECV_RDMA_WITH_IMM, imm and byte_len %u",
			side_name[side], len);
}

/*
 * Send with Immediate: one IB_WC_RECV with the immediate and the payload,
 * consuming one receive; a plain Send then completes the next receive
 * without one. Solicited, as RTRS does not, to check the flag gets through.
 */
static void kx_send_imm(struct kx *t, struct kx_conn *c, int side)
{
	const char *name = "send_with_imm_one_receive";
	int peer = !side;
	__be32 imm = cpu_to_be32(0xcafe0001);
	struct ib_send_wr s = {}, p = {};
	const struct ib_send_wr *bad;
	struct ib_sge sge;
	u8 *rbuf = c->local[peer] + 2048;

	memset(rbuf, 0, 128);
	memset(c->local[side] + 2048, 0x77, 24);
	kx_sge(t, c, side, &sge, 2048, 24);
	s.wr_id = 20;
	s.opcode = IB_WR_SEND_WITH_IMM;
	s.send_flags = IB_SEND_SIGNALED | IB_SEND_SOLICITED;
	s.sg_list = &sge;
	s.num_sge = 1;
	s.ex.imm_data = imm;
	s.next = &p;
	p.wr_id = 21;
	p.opcode = IB_WR_SEND;
	p.send_flags = IB_SEND_SIGNALED;
	if (kx_recv(t, c, peer, 500, 1, 2048) || kx_recv(t, c, peer, 501, 1, 2112) ||
	    ib_post_send(kx_qp(c, side), &s, &bad)) {
		kx_fail(t, name, "%s: post failed", side_name[side]);
		return;
	}
	if (!kx_expect_send(t, c, side, name, 20, IB_WC_SEND) ||
	    !kx_expect_send(t, c, side, name, 21, IB_WC_SEND) ||
	    !kx_expect_recv(t, c, peer, name, 500, IB_WC_RECV, true, imm, 24) ||
	    !kx_expect_recv(t, c, peer, name, 501, IB_WC_RECV, false, 0, 0))
		return;
	if (rbuf[0] != 0x77 || rbuf[23] != 0x77 || rbuf[24])
		kx_fail(t, name, "%s: the payload did not land", side_name[side]);
	else
		kx_pass(t, name, "%s requester: one IB_WC_RECV with the immediate and 24 bytes",
			side_name[side]);
}

/* IMM-03: Send, Write with Immediate, Send with Immediate, Send: receives in order. */
static void kx_imm_order(struct kx *t, struct kx_conn *c, int side)
{
	const char *name = "imm_03_receives_in_post_order";
	int peer = !side, i;
	struct ib_rdma_wr w = {};
	struct ib_send_wr s[3] = {};
	const struct ib_send_wr *bad;
	u32 op[4] = { IB_WR_SEND, IB_WR_RDMA_WRITE_WITH_IMM, IB_WR_SEND_WITH_IMM, IB_WR_SEND };
	struct ib_send_wr *wr[4] = { &s[0], &w.wr, &s[1], &s[2] };

	for (i = 0; i < 4; i++) {
		wr[i]->wr_id = 30 + i;
		wr[i]->opcode = op[i];
		wr[i]->ex.imm_data = cpu_to_be32(i);
		wr[i]->next = i < 3 ? wr[i + 1] : NULL;
		if (kx_recv(t, c, peer, 600 + i, 1, 3072 + 64 * i)) {
			kx_fail(t, name, "%s: post_recv failed", side_name[side]);
			return;
		}
	}
	w.wr.send_flags = IB_SEND_SIGNALED;
	w.remote_addr = c->mr[peer]->iova;
	w.rkey = c->mr[peer]->rkey;
	if (ib_post_send(kx_qp(c, side), wr[0], &bad)) {
		kx_fail(t, name, "%s: post failed", side_name[side]);
		return;
	}
	if (!kx_expect_recv(t, c, peer, name, 600, IB_WC_RECV, false, 0, 0) ||
	    !kx_expect_recv(t, c, peer, name, 601, IB_WC_RECV_RDMA_WITH_IMM, true,
			    cpu_to_be32(1), 0) ||
	    !kx_expect_recv(t, c, peer, name, 602, IB_WC_RECV, true, cpu_to_be32(2), 0) ||
	    !kx_expect_recv(t, c, peer, name, 603, IB_WC_RECV, false, 0, 0) ||
	    !kx_expect_send(t, c, side, name, 31, IB_WC_RDMA_WRITE))
		return;
	kx_pass(t, name, "%s requester: 4 receives in order", side_name[side]);
}

static noinline_for_stack void kx_ops(struct kx *t, struct kx_conn *c, int side)
{
	kx_check_atomic(t, c, side, "atom_fetch_add", IB_WR_ATOMIC_FETCH_AND_ADD, 5, 3, 0, 0, 0,
			8);
	kx_check_atomic(t, c, side, "atom_cmp_swap_match", IB_WR_ATOMIC_CMP_AND_SWP, 8, 8, 42,
			0, 0, 42);
	kx_check_atomic(t, c, side, "atom_cmp_swap_mismatch", IB_WR_ATOMIC_CMP_AND_SWP, 42, 7,
			1, 0, 0, 42);
	kx_check_atomic(t, c, side, "atom_07_masked_fetch_add",
			IB_WR_MASKED_ATOMIC_FETCH_AND_ADD, 0x00000000FFFFFFFFULL, 1, 0,
			0x0000000080000000ULL, 0, 0);
	kx_check_atomic(t, c, side, "atom_07_masked_fetch_add_xor",
			IB_WR_MASKED_ATOMIC_FETCH_AND_ADD, 0xF0F0F0F0F0F0F0F0ULL,
			0xFFFFFFFFFFFFFFFFULL, 0, ~0ULL, 0, 0x0F0F0F0F0F0F0F0FULL);
	kx_check_atomic(t, c, side, "atom_08_masked_cmp_swap",
			IB_WR_MASKED_ATOMIC_CMP_AND_SWP, 0x123456789ABCDEF0ULL,
			0x000000009ABCDEF0ULL, 0xAAAAAAAA00000000ULL, 0x00000000FFFFFFFFULL,
			0xFFFFFFFF00000000ULL, 0xAAAAAAAA9ABCDEF0ULL);
	kx_check_atomic(t, c, side, "atom_08_masked_cmp_swap_mismatch",
			IB_WR_MASKED_ATOMIC_CMP_AND_SWP, 0x123456789ABCDEF0ULL,
			0x000000009ABCDEF1ULL, 0xAAAAAAAA00000000ULL, 0x00000000FFFFFFFFULL,
			0xFFFFFFFF00000000ULL, 0x123456789ABCDEF0ULL);
	kx_order(t, c, side);
	kx_write_imm(t, c, side, "imm_05_write_with_imm", 16);
	kx_write_imm(t, c, side, "imm_05_write_with_imm_zero_length", 0);
	kx_send_imm(t, c, side);
	kx_imm_order(t, c, side);
}

/* --- latencies ------------------------------------------------------------ */

/* Posts @wr on @side and polls its completion; returns 0 or an error. */
static int kx_post_poll(struct kx_conn *c, int side, struct ib_send_wr *wr)
{
	const struct ib_send_wr *bad;
	struct ib_wc wc;
	int ret;

	ret = ib_post_send(kx_qp(c, side), wr, &bad);
	while (!ret) {
		ret = ib_poll_cq(c->cq[side], 1, &wc);
		if (ret == 1)
			return wc.status == IB_WC_SUCCESS ? 0 : -EIO;
		cpu_relax();
	}
	return ret;
}

/*
 * One round trip of @kind: 0 an 8-byte RDMA Read, 1 a FetchAdd, 2 a masked
 * FetchAdd (the requester's completion); 3 an 8-byte RDMA Write each way,
 * each side spinning on the byte it receives (ib_write_lat's ping-pong); 4
 * the same with immediate data, each side waiting for its receive.
 */
static int kx_round_trip(struct kx *t, struct kx_conn *c, int kind, u32 seq)
{
	struct ib_sge sge[2];
	struct ib_rdma_wr w[2] = {};
	struct ib_atomic_wr a = {};
	struct ib_wc wc;
	int s, ret;

	kx_sge(t, c, 0, &sge[0], 0, 8);
	if (kind < 3) {
		a.wr.opcode = kind ? (kind == 1 ? IB_WR_ATOMIC_FETCH_AND_ADD :
				      IB_WR_MASKED_ATOMIC_FETCH_AND_ADD) : IB_WR_RDMA_READ;
		a.wr.send_flags = IB_SEND_SIGNALED;
		a.wr.sg_list = &sge[0];
		a.wr.num_sge = 1;
		a.remote_addr = c->mr[1]->iova;
		a.rkey = c->mr[1]->rkey;
		a.compare_add = 1;
		if (!kind) {
			/* The Read's parameters in its ib_rdma_wr. */
			w[0].wr = a.wr;
			w[0].remote_addr = c->mr[1]->iova;
			w[0].rkey = c->mr[1]->rkey;
			return kx_post_poll(c, 0, &w[0].wr);
		}
		return kx_post_poll(c, 0, &a.wr);
	}
	for (s = 0; s < 2; s++) {
		u32 *mine = c->local[s] + 256;
		volatile u32 *theirs = c->page[!s] + 256;

		*mine = seq;
		kx_sge(t, c, s, &sge[s], 256, 4);
		w[s].wr.opcode = kind == 4 ? IB_WR_RDMA_WRITE_WITH_IMM : IB_WR_RDMA_WRITE;
		w[s].wr.send_flags = IB_SEND_SIGNALED;
		w[s].wr.sg_list = &sge[s];
		w[s].wr.num_sge = 1;
		w[s].wr.ex.imm_data = cpu_to_be32(seq);
		w[s].remote_addr = c->mr[!s]->iova + 256;
		w[s].rkey = c->mr[!s]->rkey;
		if (kind == 4) {
			ret = kx_recv(t, c, !s, seq, 0, 0);
			if (ret)
				return ret;
		}
		ret = kx_post_poll(c, s, &w[s].wr);
		if (ret)
			return ret;
		if (kind == 4) {
			while ((ret = ib_poll_cq(c->cq[!s], 1, &wc)) == 0)
				cpu_relax();
			if (ret < 0 || wc.status != IB_WC_SUCCESS)
				return -EIO;
		} else {
			while (*theirs != seq)
				cpu_relax();
		}
	}
	return 0;
}

/*
 * FetchAdds per second with @depth in flight (the connection's ORD): @n
 * FetchAdds of +1 to the peer's word, each completion refilling the window.
 * Returns the rate, or 0 on error.
 */
static u64 kx_fetch_add_rate(struct kx *t, struct kx_conn *c, unsigned int n,
			     unsigned int depth)
{
	const struct ib_send_wr *bad;
	struct ib_atomic_wr a = {};
	struct ib_sge sge;
	struct ib_wc wc[8];
	unsigned int posted = 0, done = 0;
	ktime_t t0 = ktime_get();
	s64 ns;
	int i, ret;

	kx_sge(t, c, 0, &sge, 0, 8);
	a.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	a.wr.send_flags = IB_SEND_SIGNALED;
	a.wr.sg_list = &sge;
	a.wr.num_sge = 1;
	a.remote_addr = c->mr[1]->iova;
	a.rkey = c->mr[1]->rkey;
	a.compare_add = 1;
	while (done < n) {
		while (posted < n && posted - done < depth) {
			if (ib_post_send(kx_qp(c, 0), &a.wr, &bad))
				return 0;
			posted++;
		}
		ret = ib_poll_cq(c->cq[0], ARRAY_SIZE(wc), wc);
		if (ret < 0)
			return 0;
		for (i = 0; i < ret; i++)
			if (wc[i].status != IB_WC_SUCCESS)
				return 0;
		done += ret;
		if (!ret)
			cpu_relax();
		if (!(done % 256))
			cond_resched();
	}
	ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
	return ns > 0 ? div64_u64((u64)n * NSEC_PER_SEC, ns) : 0;
}

/* @a / @b with two decimals, as "x.yy" (0.00 if @b is 0). */
static void kx_ratio(char *buf, size_t len, u64 a, u64 b)
{
	if (!b) {
		snprintf(buf, len, "0.00");
		return;
	}
	snprintf(buf, len, "%llu.%02llu", div64_u64(a, b), div64_u64(a * 100, b) % 100);
}

/*
 * Mean round trip of each kind over @bench iterations (ns). The mean over the
 * whole run, not a median of single round trips: a guest's clock may tick
 * more coarsely than one round trip.
 */
static noinline_for_stack void kx_bench(struct kx *t, struct kx_conn *c)
{
	static const char *const names[] = {
		"bench_read_8", "bench_fetch_add", "bench_masked_fetch_add",
		"bench_write_8_ping_pong", "bench_write_imm_8_ping_pong",
	};
	u64 mean[ARRAY_SIZE(names)], rate;
	char r[3][24];
	unsigned int k, i;

	for (k = 0; k < ARRAY_SIZE(names); k++) {
		ktime_t t0 = ktime_get();

		for (i = 0; i < bench; i++) {
			int ret = kx_round_trip(t, c, k, 0x10000 * (k + 1) + i + 1);

			if (ret) {
				kx_fail(t, names[k], "round trip %u: %d", i, ret);
				return;
			}
			if (!(i % 64))
				cond_resched();
		}
		mean[k] = div_u64(ktime_to_ns(ktime_sub(ktime_get(), t0)), bench);
		kx_pass(t, names[k], "mean %llu ns over %u round trips", mean[k], bench);
	}
	rate = kx_fetch_add_rate(t, c, bench * 4, 4);
	if (rate)
		kx_pass(t, "bench_fetch_add_rate", "%llu FetchAdds/s, 4 in flight, %u in all",
			rate, bench * 4);
	else
		kx_fail(t, "bench_fetch_add_rate", "a FetchAdd failed");
	/* The goal: an atomic round trip within 1.1 times an 8-byte Read's. */
	kx_ratio(r[0], sizeof(r[0]), mean[1], mean[0]);
	kx_ratio(r[1], sizeof(r[1]), mean[2], mean[1]);
	kx_ratio(r[2], sizeof(r[2]), mean[4], mean[3]);
	pr_info("bench: fetch_add/read_8 %s, masked/plain %s, write_imm/write %s\n",
		r[0], r[1], r[2]);
}

/* --- errors the requester sees -------------------------------------------- */

static int kx_qp_state(struct ib_qp *qp)
{
	struct ib_qp_init_attr ia;
	struct ib_qp_attr a;

	return ib_query_qp(qp, &a, IB_QP_STATE, &ia) ?: a.qp_state;
}

/*
 * An atomic that the responder refuses, on a connection of its own: @off into
 * a region registered with @access. The WR completes with an error status
 * (@want, or any error with @want 0), the word is unchanged and both QPs end
 * in ERROR.
 */
static noinline_for_stack void kx_refused(struct kx *t, const char *name, u16 p, u32 off,
					  int access, enum ib_wc_status want)
{
	struct kx_conn c = {};
	u64 *word, orig;
	struct ib_sge sge;
	struct ib_atomic_wr aw = {};
	const struct ib_send_wr *bad;
	struct ib_wc wc;
	int i, st[2];

	if (kx_setup(t, &c, name, p, IB_POLL_DIRECT, access))
		goto out;
	word = c.page[1] + (off & ~7);
	WRITE_ONCE(word[0], 0x1111);
	WRITE_ONCE(word[1], 0x2222);
	kx_sge(t, &c, 0, &sge, 0, 8);
	aw.wr.wr_id = 77;
	aw.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	aw.wr.send_flags = IB_SEND_SIGNALED;
	aw.wr.sg_list = &sge;
	aw.wr.num_sge = 1;
	aw.remote_addr = c.mr[1]->iova + off;
	aw.rkey = c.mr[1]->rkey;
	aw.compare_add = 1;
	if (ib_post_send(kx_qp(&c, 0), &aw.wr, &bad) || kx_poll(c.cq[0], &wc)) {
		kx_fail(t, name, "post or poll failed");
		goto out;
	}
	orig = READ_ONCE(word[0]) ^ 0x1111 ? 1 : READ_ONCE(word[1]) ^ 0x2222;
	/* Both sides go to ERROR: the responder sent a Terminate, the requester got it. */
	for (i = 0; i < 100; i++) {
		st[0] = kx_qp_state(kx_qp(&c, 0));
		st[1] = kx_qp_state(kx_qp(&c, 1));
		if (st[0] == IB_QPS_ERR && st[1] == IB_QPS_ERR)
			break;
		msleep(50);
	}
	if (wc.wr_id != 77 || wc.status == IB_WC_SUCCESS || (want && wc.status != want))
		kx_fail(t, name, "wc wr_id %llu status %d, want an error (%d)", wc.wr_id,
			wc.status, want);
	else if (orig)
		kx_fail(t, name, "the target was modified");
	else if (st[0] != IB_QPS_ERR || st[1] != IB_QPS_ERR)
		kx_fail(t, name, "QP states %d and %d, want ERROR", st[0], st[1]);
	else
		kx_pass(t, name, "status %d, word unchanged, both QPs in ERROR", wc.status);
out:
	kx_teardown(t->ibdev, &c);
}

/* --- ATOM-15: concurrent FetchAdds and CPU atomics ------------------------ */

struct kx_worker {
	struct ib_qp *qp;
	struct ib_cqe cqe;
	struct completion done, finished;
	u64 *res, raddr;
	u32 lkey, rkey;
	atomic64_t *word;
	enum ib_wc_status status;
	int err;
	bool cpu;
};

static void kx_fa_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kx_worker *w = container_of(wc->wr_cqe, struct kx_worker, cqe);

	w->status = wc->status;
	complete(&w->done);
}

static int kx_worker_fn(void *arg)
{
	struct kx_worker *w = arg;
	unsigned int i;

	for (i = 0; i < (w->cpu ? KX_CPU_ITERS : iters) && !w->err; i++) {
		struct ib_sge sge = { .addr = (uintptr_t)w->res, .length = 8, .lkey = w->lkey };
		struct ib_atomic_wr aw = {};
		const struct ib_send_wr *bad;

		if (w->cpu) {
			atomic64_inc(w->word);
			if (!(i % 256))
				cond_resched();
			continue;
		}
		reinit_completion(&w->done);
		aw.wr.wr_cqe = &w->cqe;
		aw.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
		aw.wr.send_flags = IB_SEND_SIGNALED;
		aw.wr.sg_list = &sge;
		aw.wr.num_sge = 1;
		aw.remote_addr = w->raddr;
		aw.rkey = w->rkey;
		aw.compare_add = 1;
		w->err = ib_post_send(w->qp, &aw.wr, &bad);
		if (!w->err && !wait_for_completion_timeout(&w->done,
							    msecs_to_jiffies(KX_TIMEOUT_MS)))
			w->err = -ETIMEDOUT;
		if (!w->err && w->status != IB_WC_SUCCESS)
			w->err = -EIO;
	}
	complete(&w->finished);
	return 0;
}

static noinline_for_stack void kx_concurrency(struct kx *t)
{
	const char *name = "atom_15_concurrent_fetch_add";
	unsigned int n = clamp(nqp, 1U, (unsigned int)KX_MAX_QP);
	unsigned int m = clamp(threads, 1U, (unsigned int)KX_MAX_THREADS);
	unsigned int ncpu = min(cpu_threads, (unsigned int)KX_MAX_THREADS);
	unsigned int i, nw = n * m + ncpu;
	struct kx_conn *c;
	struct kx_worker *w;
	ktime_t t0;
	u64 want, got;
	int err = 0;

	/* Connection 0 holds the word (its server's page); 1..n do the FetchAdds. */
	c = kcalloc(n + 1, sizeof(*c), GFP_KERNEL);
	w = kcalloc(nw, sizeof(*w), GFP_KERNEL);
	if (!c || !w) {
		kx_fail(t, name, "no memory");
		goto out;
	}
	for (i = 0; i <= n; i++)
		if (kx_setup(t, &c[i], name, port + 10 + i, i ? IB_POLL_SOFTIRQ : IB_POLL_DIRECT,
			     KX_ACCESS_ALL))
			goto out;
	for (i = 0; i < nw; i++) {
		struct kx_worker *x = &w[i];
		struct kx_conn *cc = &c[1 + i % n];

		init_completion(&x->done);
		init_completion(&x->finished);
		x->word = c[0].page[1];
		x->cpu = i >= n * m;
		x->qp = kx_qp(cc, 0);
		x->cqe.done = kx_fa_done;
		/* Each thread of a connection has a result word of its own. */
		x->res = cc->local[0] + 8 * (i / n);
		x->lkey = t->pd->local_dma_lkey;
		x->raddr = c[0].mr[1]->iova;
		x->rkey = c[0].mr[1]->rkey;
	}
	atomic64_set(w[0].word, 0);
	t0 = ktime_get();
	for (i = 0; i < nw; i++) {
		struct task_struct *k = kthread_run(kx_worker_fn, &w[i], "kx_fa/%u", i);

		if (IS_ERR(k)) {
			w[i].err = PTR_ERR(k);
			complete(&w[i].finished);
		}
	}
	for (i = 0; i < nw; i++) {
		wait_for_completion(&w[i].finished);
		err = err ?: w[i].err;
	}
	got = atomic64_read(w[0].word);
	want = (u64)n * m * iters + (u64)ncpu * KX_CPU_ITERS;
	if (err)
		kx_fail(t, name, "a thread failed: %d", err);
	else if (got != want)
		kx_fail(t, name, "word %llu, want %llu", got, want);
	else
		kx_pass(t, name,
			"%u QPs x %u threads x %u FetchAdds and %u CPU threads x %u: %llu in %lld ms",
			n, m, iters, ncpu, KX_CPU_ITERS, got, ktime_ms_delta(ktime_get(), t0));
out:
	if (c)
		for (i = 0; i <= n; i++)
			kx_teardown(t->ibdev, &c[i]);
	kfree(c);
	kfree(w);
}

/* --- a peer without RFC 7306 --------------------------------------------- */

/*
 * ATOM-17: an atomic to a peer that has no RFC 7306 (C siw) gets its
 * Terminate: the work request completes with an error status, the QP goes
 * to ERROR, nothing hangs. The server's accept carries its buffer's address
 * and rkey (tests/vm/py/ext_siw.py).
 */
static noinline_for_stack void kx_peer(struct kx *t)
{
	const char *name = commit ? "cmt_06_peer_without_commit" : "atom_17_peer_without_atomics";
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	struct kx_conn c = {};
	struct ib_qp_init_attr qa = {};
	struct ib_atomic_wr aw = {};
	const struct ib_send_wr *bad;
	struct ib_sge sge;
	struct ib_wc wc;
	u64 raddr;
	u32 rkey;
	int i, ret, st = -1;

	init_waitqueue_head(&c.wq);
	spin_lock_init(&c.lock);
	if (!in4_pton(peer, -1, (u8 *)&sin.sin_addr.s_addr, -1, NULL)) {
		kx_fail(t, name, "peer=%s is not an IPv4 address", peer);
		return;
	}
	c.local[0] = (void *)get_zeroed_page(GFP_KERNEL);
	c.cq[0] = ib_alloc_cq(t->ibdev, NULL, 16, 0, IB_POLL_DIRECT);
	c.id[0] = rdma_create_id(&init_net, kx_cm_handler, &c, RDMA_PS_TCP, IB_QPT_RC);
	if (!c.local[0] || IS_ERR(c.cq[0]) || IS_ERR(c.id[0])) {
		if (IS_ERR(c.id[0]))
			c.id[0] = NULL;
		kx_fail(t, name, "setup failed");
		goto out;
	}
	qa.qp_type = IB_QPT_RC;
	qa.sq_sig_type = IB_SIGNAL_REQ_WR;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.send_cq = qa.recv_cq = c.cq[0];
	ret = rdma_resolve_addr(c.id[0], NULL, (struct sockaddr *)&sin, 5000) ?:
	      kx_cm_wait(&c, 0, RDMA_CM_EVENT_ADDR_RESOLVED) ?:
	      rdma_resolve_route(c.id[0], 5000) ?:
	      kx_cm_wait(&c, 0, RDMA_CM_EVENT_ROUTE_RESOLVED) ?:
	      rdma_create_qp(c.id[0], t->pd, &qa) ?: rdma_connect(c.id[0], &cp) ?:
	      kx_cm_wait(&c, 0, RDMA_CM_EVENT_ESTABLISHED);
	if (ret) {
		kx_fail(t, name, "connect to %pI4:%u: %d (events %#lx)", &sin.sin_addr, port, ret,
			READ_ONCE(c.ev[0]));
		goto out;
	}
	memcpy(&raddr, c.pdata, 8);
	memcpy(&rkey, c.pdata + 8, 4);
	kx_sge(t, &c, 0, &sge, 0, 8);
	aw.wr.wr_id = 17;
	aw.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	aw.wr.send_flags = IB_SEND_SIGNALED;
	aw.wr.sg_list = &sge;
	aw.wr.num_sge = 1;
	aw.remote_addr = raddr;
	aw.rkey = rkey;
	aw.compare_add = 0;
	if (commit) {
		/* CMT-06: a Flush (global visibility, 8 bytes) instead. */
		struct ib_rdma_wr *fw = (struct ib_rdma_wr *)&aw;

		BUILD_BUG_ON(sizeof(*fw) > sizeof(aw));
		memset(&aw, 0, sizeof(aw));
		sge.length = 8;
		fw->wr.wr_id = 17;
		fw->wr.opcode = IB_WR_FLUSH;
		fw->wr.send_flags = IB_SEND_SIGNALED;
		fw->wr.sg_list = &sge;
		fw->wr.num_sge = 1;
		fw->wr.ex.invalidate_rkey = 0x2;
		fw->remote_addr = raddr;
		fw->rkey = rkey;
	}
	ret = ib_post_send(c.id[0]->qp, &aw.wr, &bad) ?: kx_poll(c.cq[0], &wc);
	if (ret) {
		kx_fail(t, name, "post or poll: %d", ret);
		goto out;
	}
	for (i = 0; i < 100; i++) {
		st = kx_qp_state(c.id[0]->qp);
		if (st == IB_QPS_ERR)
			break;
		msleep(50);
	}
	if (wc.wr_id != 17 || wc.status == IB_WC_SUCCESS || wc.status == IB_WC_WR_FLUSH_ERR)
		kx_fail(t, name, "wc wr_id %llu status %d, want the peer's error", wc.wr_id,
			wc.status);
	else if (st != IB_QPS_ERR)
		kx_fail(t, name, "QP state %d, want ERROR", st);
	else if (kx_cm_wait(&c, 0, RDMA_CM_EVENT_DISCONNECTED))
		kx_fail(t, name, "no DISCONNECTED (events %#lx)", READ_ONCE(c.ev[0]));
	else
		kx_pass(t, name, "the %s completed with status %d (%s), QP in ERROR",
			commit ? "Flush" : "FetchAdd", wc.status, ib_wc_status_msg(wc.status));
out:
	kx_teardown(t->ibdev, &c);
}

/* --- the extensions off --------------------------------------------------- */

static noinline_for_stack void kx_off(struct kx *t)
{
	static const u32 ops[] = {
		IB_WR_ATOMIC_FETCH_AND_ADD, IB_WR_ATOMIC_CMP_AND_SWP,
		IB_WR_MASKED_ATOMIC_FETCH_AND_ADD, IB_WR_MASKED_ATOMIC_CMP_AND_SWP,
		IB_WR_RDMA_WRITE_WITH_IMM, IB_WR_SEND_WITH_IMM,
	};
	const char *name = "ext_off_refused";
	struct kx_conn c = {};
	struct ib_atomic_wr aw = {};
	const struct ib_send_wr *bad;
	struct ib_sge sge;
	int i, ret;

	if (t->ibdev->attrs.atomic_cap != IB_ATOMIC_NONE ||
	    t->ibdev->attrs.masked_atomic_cap != IB_ATOMIC_NONE) {
		kx_fail(t, "ext_off_attrs", "atomic_cap %d masked %d, want none",
			t->ibdev->attrs.atomic_cap, t->ibdev->attrs.masked_atomic_cap);
		return;
	}
	kx_pass(t, "ext_off_attrs", "no atomic capability");
	if (kx_setup(t, &c, name, port, IB_POLL_DIRECT,
		     IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE))
		goto out;
	kx_sge(t, &c, 0, &sge, 0, 8);
	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		memset(&aw, 0, sizeof(aw));
		aw.wr.opcode = ops[i];
		aw.wr.sg_list = &sge;
		aw.wr.num_sge = 1;
		aw.remote_addr = c.mr[1]->iova;
		aw.rkey = c.mr[1]->rkey;
		ret = ib_post_send(kx_qp(&c, 0), &aw.wr, &bad);
		if (ret != -EINVAL) {
			kx_fail(t, name, "opcode %u: post returned %d, want -EINVAL", ops[i], ret);
			goto out;
		}
	}
	kx_pass(t, name, "%zu extension opcodes refused with EINVAL", ARRAY_SIZE(ops));
out:
	kx_teardown(t->ibdev, &c);
}

/* --- the commit extensions ---------------------------------------------- */

/* The Flags of a Flush in ex.invalidate_rkey (enum siw_flush_flags). */
#define KX_FLUSH_P 0x1
#define KX_FLUSH_G 0x2
#define KX_FLUSH_R 0x4

/*
 * A Flush from @side to the other side's page, @len bytes at @off (rsiw's
 * kernel convention: a struct ib_rdma_wr, the Flags in ex.invalidate_rkey,
 * the length in the one SGE, which is not accessed).
 */
static void kx_flush_wr(struct kx_conn *c, int side, struct ib_rdma_wr *w, struct ib_sge *sge,
			u64 id, u32 flags, u32 off, u32 len)
{
	int peer = !side;

	memset(w, 0, sizeof(*w));
	sge->addr = 0;
	sge->length = len;
	sge->lkey = 0;
	w->wr.wr_id = id;
	w->wr.opcode = IB_WR_FLUSH;
	w->wr.send_flags = IB_SEND_SIGNALED;
	w->wr.sg_list = sge;
	w->wr.num_sge = 1;
	w->wr.ex.invalidate_rkey = flags;
	w->remote_addr = c->mr[peer]->iova + off;
	w->rkey = c->mr[peer]->rkey;
}

/* An Atomic Write of the 8 bytes at @data from @side to the other side's @off. */
static void kx_awrite_wr(struct kx_conn *c, int side, struct ib_rdma_wr *w, struct ib_sge *sge,
			 u64 id, const void *data, u32 off)
{
	int peer = !side;

	memset(w, 0, sizeof(*w));
	sge->addr = (uintptr_t)data;
	sge->length = 8;
	sge->lkey = 0;
	w->wr.wr_id = id;
	w->wr.opcode = IB_WR_ATOMIC_WRITE;
	w->wr.send_flags = IB_SEND_SIGNALED;
	w->wr.sg_list = sge;
	w->wr.num_sge = 1;
	w->remote_addr = c->mr[peer]->iova + off;
	w->rkey = c->mr[peer]->rkey;
}

/*
 * FLUSH-03, AWRITE-04: two Writes, a Flush over them and an Atomic Write,
 * posted together; then a whole-region Flush with a garbage range (FLUSH-02).
 */
static noinline_for_stack void kx_commit_ops(struct kx *t, struct kx_conn *c, int side)
{
	const char *name = "flush_03_write_flush_atomic_write";
	int peer = !side;
	u8 *dst = c->page[peer], *src = c->local[side];
	static const u8 image[8] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };
	struct ib_sge ws[2], fs, as;
	struct ib_rdma_wr w[2] = {}, f, a;
	const struct ib_send_wr *bad;
	int i;

	memset(dst, 0, 1024);
	for (i = 0; i < 512; i++)
		src[i] = (u8)(i * 7 + side + 1);
	memcpy(src + 600, image, 8);
	for (i = 0; i < 2; i++) {
		kx_sge(t, c, side, &ws[i], i * 256, 256);
		w[i].wr.wr_id = 10 + i;
		w[i].wr.opcode = IB_WR_RDMA_WRITE;
		w[i].wr.sg_list = &ws[i];
		w[i].wr.num_sge = 1;
		w[i].wr.next = &w[i + 1].wr;
		w[i].remote_addr = c->mr[peer]->iova + i * 256;
		w[i].rkey = c->mr[peer]->rkey;
	}
	kx_flush_wr(c, side, &f, &fs, 12, KX_FLUSH_G, 0, 512);
	kx_awrite_wr(c, side, &a, &as, 13, src + 600, 512);
	w[1].wr.next = &f.wr;
	f.wr.next = &a.wr;
	if (ib_post_send(kx_qp(c, side), &w[0].wr, &bad)) {
		kx_fail(t, name, "%s: post failed", side_name[side]);
		return;
	}
	if (!kx_expect_send(t, c, side, name, 12, IB_WC_FLUSH) ||
	    !kx_expect_send(t, c, side, name, 13, IB_WC_ATOMIC_WRITE))
		return;
	if (memcmp(dst, src, 512) || memcmp(dst + 512, image, 8) || dst[520])
		kx_fail(t, name, "%s: the target does not hold the Writes and the 8 bytes",
			side_name[side]);
	else
		kx_pass(t, name, "%s requester: IB_WC_FLUSH, IB_WC_ATOMIC_WRITE in order, data placed",
			side_name[side]);

	name = "flush_02_whole_region";
	kx_flush_wr(c, side, &f, &fs, 14, KX_FLUSH_G | KX_FLUSH_R, 0x7ffff000, 0xfffffff0);
	f.remote_addr = 0xdeadbeef000ULL;
	if (ib_post_send(kx_qp(c, side), &f.wr, &bad)) {
		kx_fail(t, name, "%s: post failed", side_name[side]);
		return;
	}
	if (kx_expect_send(t, c, side, name, 14, IB_WC_FLUSH))
		kx_pass(t, name, "%s requester: Length and TO ignored", side_name[side]);
}

/* CMT-02: 12 Flushes and Atomic Writes in one post, ORD 4: all complete in order. */
static noinline_for_stack void kx_commit_ord(struct kx *t, struct kx_conn *c, int side)
{
	const char *name = "cmt_02_ord_shared";
	int peer = !side;
	u64 *dst = c->page[peer] + 1024, *src = c->local[side] + 1024;
	struct ib_sge sge[12];
	struct ib_rdma_wr w[12];
	const struct ib_send_wr *bad;
	int i;

	for (i = 0; i < 12; i++) {
		src[i] = 0x1000 + i + side;
		dst[i] = 0;
		if (i % 3 == 2)
			kx_flush_wr(c, side, &w[i], &sge[i], 100 + i, KX_FLUSH_G, 1024, 96);
		else
			kx_awrite_wr(c, side, &w[i], &sge[i], 100 + i, &src[i], 1024 + i * 8);
		if (i)
			w[i - 1].wr.next = &w[i].wr;
	}
	if (ib_post_send(kx_qp(c, side), &w[0].wr, &bad)) {
		kx_fail(t, name, "%s: post failed", side_name[side]);
		return;
	}
	for (i = 0; i < 12; i++)
		if (!kx_expect_send(t, c, side, name, 100 + i,
				    i % 3 == 2 ? IB_WC_FLUSH : IB_WC_ATOMIC_WRITE))
			return;
	for (i = 0; i < 12; i++) {
		if (i % 3 != 2 && READ_ONCE(dst[i]) != src[i]) {
			kx_fail(t, name, "%s: word %d is %#llx, want %#llx", side_name[side], i,
				READ_ONCE(dst[i]), src[i]);
			return;
		}
	}
	kx_pass(t, name, "%s requester: 12 requests, ORD 4, completed in order", side_name[side]);
}

/*
 * A Flush (@flags) or an Atomic Write (@flags 0) at @off that the responder
 * refuses, on a connection of its own with @access: an error completion
 * (@want, or any error with @want 0), the target unchanged, both QPs in ERROR.
 */
static noinline_for_stack void kx_commit_refused(struct kx *t, const char *name, u16 p,
						 int access, u32 flags, u32 off,
						 enum ib_wc_status want)
{
	static const u64 data = 0x5555555555555555ULL;
	struct kx_conn c = {};
	struct ib_rdma_wr w;
	struct ib_sge sge;
	const struct ib_send_wr *bad;
	struct ib_wc wc;
	u64 *word;
	bool changed;
	int i, st[2];

	if (kx_setup(t, &c, name, p, IB_POLL_DIRECT, access))
		goto out;
	word = c.page[1] + (off & ~7);
	WRITE_ONCE(word[0], 0x1111);
	WRITE_ONCE(word[1], 0x2222);
	if (flags)
		kx_flush_wr(&c, 0, &w, &sge, 77, flags, off, 64);
	else
		kx_awrite_wr(&c, 0, &w, &sge, 77, &data, off);
	if (ib_post_send(kx_qp(&c, 0), &w.wr, &bad) || kx_poll(c.cq[0], &wc)) {
		kx_fail(t, name, "post or poll failed");
		goto out;
	}
	changed = READ_ONCE(word[0]) != 0x1111 || READ_ONCE(word[1]) != 0x2222;
	for (i = 0; i < 100; i++) {
		st[0] = kx_qp_state(kx_qp(&c, 0));
		st[1] = kx_qp_state(kx_qp(&c, 1));
		if (st[0] == IB_QPS_ERR && st[1] == IB_QPS_ERR)
			break;
		msleep(50);
	}
	if (wc.wr_id != 77 || wc.status == IB_WC_SUCCESS || (want && wc.status != want))
		kx_fail(t, name, "wc wr_id %llu status %d, want an error (%d)", wc.wr_id,
			wc.status, want);
	else if (changed)
		kx_fail(t, name, "the target was modified");
	else if (st[0] != IB_QPS_ERR || st[1] != IB_QPS_ERR)
		kx_fail(t, name, "QP states %d and %d, want ERROR", st[0], st[1]);
	else
		kx_pass(t, name, "status %d, target unchanged, both QPs in ERROR", wc.status);
out:
	kx_teardown(t->ibdev, &c);
}

/* Flush Flags the requester refuses when posted, and a bad Atomic Write. */
static noinline_for_stack void kx_commit_post_refused(struct kx *t, struct kx_conn *c)
{
	const char *name = "commit_post_refused";
	static const u32 bad_flags[] = { 0, KX_FLUSH_R, 0x8 | KX_FLUSH_G };
	static const u64 data;
	struct ib_rdma_wr w;
	struct ib_sge sge;
	const struct ib_send_wr *bad;
	int i, ret;

	for (i = 0; i < ARRAY_SIZE(bad_flags); i++) {
		kx_flush_wr(c, 0, &w, &sge, 90, bad_flags[i], 0, 8);
		ret = ib_post_send(kx_qp(c, 0), &w.wr, &bad);
		if (ret != -EINVAL) {
			kx_fail(t, name, "Flush flags %#x: post returned %d, want -EINVAL",
				bad_flags[i], ret);
			return;
		}
	}
	kx_awrite_wr(c, 0, &w, &sge, 91, &data, 0);
	sge.length = 4;
	ret = ib_post_send(kx_qp(c, 0), &w.wr, &bad);
	if (ret != -EINVAL) {
		kx_fail(t, name, "a 4-byte Atomic Write: post returned %d, want -EINVAL", ret);
		return;
	}
	kx_pass(t, name, "bad Flush flags and a 4-byte Atomic Write refused with EINVAL");
}

static noinline_for_stack void kx_commit(struct kx *t)
{
	u64 caps = t->ibdev->attrs.device_cap_flags;
	struct kx_conn c = {};
	struct ib_mr *mr;
	void *page;
	struct scatterlist sg;
	bool mapped = false;
	int side;

	if (!(caps & IB_DEVICE_FLUSH_GLOBAL) || !(caps & IB_DEVICE_ATOMIC_WRITE) ||
	    !(caps & IB_DEVICE_FLUSH_PERSISTENT))
		kx_fail(t, "commit_attrs", "device_cap_flags %#llx: want FLUSH_GLOBAL, ATOMIC_WRITE and FLUSH_PERSISTENT",
			caps);
	else
		kx_pass(t, "commit_attrs",
			"IB_DEVICE_FLUSH_GLOBAL, IB_DEVICE_ATOMIC_WRITE, IB_DEVICE_FLUSH_PERSISTENT");
	if (kx_setup(t, &c, "commit_connect", port, IB_POLL_DIRECT,
		     KX_ACCESS_ALL | IB_ACCESS_FLUSH_GLOBAL))
		goto out;
	kx_pass(t, "commit_connect", "a pair, each page registered with IB_ACCESS_FLUSH_GLOBAL");
	/* CMT-03: DRAM is not persistent memory. */
	page = (void *)get_zeroed_page(GFP_KERNEL);
	mr = page ? kx_reg(t, &c, 1, page, &sg, &mapped,
			   KX_ACCESS_ALL | IB_ACCESS_FLUSH_PERSISTENT) : ERR_PTR(-ENOMEM);
	if (!IS_ERR(mr)) {
		kx_fail(t, "cmt_03_flush_persistent_refused", "the registration succeeded");
		ib_dereg_mr(mr);
	} else if (PTR_ERR(mr) != -EINVAL) {
		kx_fail(t, "cmt_03_flush_persistent_refused", "error %ld, want -EINVAL",
			PTR_ERR(mr));
	} else {
		kx_pass(t, "cmt_03_flush_persistent_refused", "EINVAL");
	}
	if (mapped)
		ib_dma_unmap_sg(t->ibdev, &sg, 1, DMA_BIDIRECTIONAL);
	free_page((unsigned long)page);
	for (side = 0; side < 2; side++) {
		kx_commit_ops(t, &c, side);
		kx_commit_ord(t, &c, side);
	}
	kx_commit_post_refused(t, &c);
out:
	kx_teardown(t->ibdev, &c);
	kx_commit_refused(t, "flush_04_persistent_on_dram", port + 1,
			  KX_ACCESS_ALL | IB_ACCESS_FLUSH_GLOBAL, KX_FLUSH_P, 0,
			  IB_WC_REM_ACCESS_ERR);
	kx_commit_refused(t, "flush_04_no_flush_right", port + 2, KX_ACCESS_ALL, KX_FLUSH_G, 0,
			  IB_WC_REM_ACCESS_ERR);
	kx_commit_refused(t, "cmt_04_flush_out_of_bounds", port + 3,
			  KX_ACCESS_ALL | IB_ACCESS_FLUSH_GLOBAL, KX_FLUSH_G, PAGE_SIZE - 63,
			  IB_WC_REM_ACCESS_ERR);
	kx_commit_refused(t, "awrite_02_misaligned", port + 4, KX_ACCESS_ALL, 0, 4, 0);
	kx_commit_refused(t, "awrite_02_no_write_right", port + 5,
			  IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ, 0, 0,
			  IB_WC_REM_ACCESS_ERR);
}

/* A device with the commit extensions off refuses their work requests. */
static noinline_for_stack void kx_commit_off(struct kx *t)
{
	const char *name = "commit_off_refused";
	static const u64 data;
	u64 caps = t->ibdev->attrs.device_cap_flags;
	struct kx_conn c = {};
	struct ib_rdma_wr w;
	struct ib_sge sge;
	const struct ib_send_wr *bad;
	int ret;

	if (caps & (IB_DEVICE_FLUSH_GLOBAL | IB_DEVICE_ATOMIC_WRITE | IB_DEVICE_FLUSH_PERSISTENT)) {
		kx_fail(t, name, "device_cap_flags %#llx advertise a commit extension", caps);
		return;
	}
	if (kx_setup(t, &c, name, port, IB_POLL_DIRECT, KX_ACCESS_ALL))
		goto out;
	kx_flush_wr(&c, 0, &w, &sge, 1, KX_FLUSH_G, 0, 8);
	ret = ib_post_send(kx_qp(&c, 0), &w.wr, &bad);
	if (ret == -EINVAL) {
		kx_awrite_wr(&c, 0, &w, &sge, 2, &data, 0);
		ret = ib_post_send(kx_qp(&c, 0), &w.wr, &bad);
	}
	if (ret != -EINVAL)
		kx_fail(t, name, "post returned %d, want -EINVAL", ret);
	else
		kx_pass(t, name, "no capability; IB_WR_FLUSH and IB_WR_ATOMIC_WRITE refused");
out:
	kx_teardown(t->ibdev, &c);
}

/* --- the device --------------------------------------------------------- */

static struct ib_device *found;

static int kx_add(struct ib_device *ibdev)
{
	if (!found && !strcmp(dev_name(&ibdev->dev), dev) && ib_device_try_get(ibdev))
		found = ibdev;
	return 0;
}

static void kx_remove(struct ib_device *ibdev, void *client_data)
{
}

static struct ib_client kx_client = {
	.name = "rsiw_kext",
	.add = kx_add,
	.remove = kx_remove,
};

static void run(struct kx *t)
{
	struct kx_conn c = {};
	int side;

	if (off) {
		kx_off(t);
		return;
	}
	/* peer= with commit=1 is the commit extensions' check against siw. */
	if (*peer) {
		kx_peer(t);
		return;
	}
	if (commit) {
		kx_commit(t);
		return;
	}
	if (commit_off) {
		kx_commit_off(t);
		return;
	}
	if (t->ibdev->attrs.atomic_cap != IB_ATOMIC_GLOB ||
	    t->ibdev->attrs.masked_atomic_cap != IB_ATOMIC_GLOB)
		kx_fail(t, "ext_attrs", "atomic_cap %d masked %d, want IB_ATOMIC_GLOB",
			t->ibdev->attrs.atomic_cap, t->ibdev->attrs.masked_atomic_cap);
	else
		kx_pass(t, "ext_attrs", "atomic_cap and masked_atomic_cap IB_ATOMIC_GLOB");
	if (!kx_setup(t, &c, "connect", port, IB_POLL_DIRECT, KX_ACCESS_ALL)) {
		kx_pass(t, "connect", "a pair over rdma_cm, each side's page registered");
		for (side = 0; side < 2 && !(bench && bench_only); side++)
			kx_ops(t, &c, side);
		if (bench)
			kx_bench(t, &c);
	}
	kx_teardown(t->ibdev, &c);
	if (bench && bench_only)
		return;
	kx_refused(t, "atom_11_misaligned", port + 1, 4, KX_ACCESS_ALL, 0);
	kx_refused(t, "atom_12_no_atomic_right", port + 2, 0,
		   IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ,
		   IB_WC_REM_ACCESS_ERR);
	kx_concurrency(t);
}

static int __init kx_init(void)
{
	struct kx t = {};
	ktime_t t0 = ktime_get();
	int ret;

	if (!*addr && !*peer) {
		pr_info("FAIL setup: addr= or peer= is required\n");
		return -EINVAL;
	}
	ret = ib_register_client(&kx_client);
	if (ret)
		return ret;
	if (!found) {
		pr_info("FAIL setup: no RDMA device %s\n", dev);
		ib_unregister_client(&kx_client);
		return -ENODEV;
	}
	t.ibdev = found;
	t.pd = ib_alloc_pd(found, 0);
	if (IS_ERR(t.pd)) {
		pr_info("FAIL setup: ib_alloc_pd: %ld\n", PTR_ERR(t.pd));
		t.fail++;
	} else {
		run(&t);
		ib_dealloc_pd(t.pd);
	}
	ib_device_put(found);
	found = NULL;
	ib_unregister_client(&kx_client);
	pr_info("summary: %u passed, %u failed, %u skipped in %lld ms\n", t.pass, t.fail,
		t.skip, ktime_ms_delta(ktime_get(), t0));
	return t.fail ? -EIO : 0;
}

static void __exit kx_exit(void)
{
}

module_init(kx_init);
module_exit(kx_exit);
MODULE_DESCRIPTION("In-kernel consumer test of rsiw's RFC 7306 atomics and immediate data");
MODULE_LICENSE("GPL");
