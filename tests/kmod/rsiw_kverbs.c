// SPDX-License-Identifier: GPL-2.0
/*
 * rsiw_kverbs - an in-kernel verbs consumer that tests an RDMA device the way
 * a ULP uses it: through ib_core (ib_alloc_pd, ib_alloc_cq, ib_create_qp,
 * ib_post_send, ib_drain_qp, ...), never through the driver directly.
 *
 * At load it finds the device named by "dev" (an ib_client, as ULPs do), then
 *  - creates and destroys every object type "cycles" times (PD with its DMA
 *    MR, CQ, RC QP, SRQ, fast-registration MR);
 *  - tries each invalid argument and checks its errno (and bad_wr for posts);
 *  - with addr= set, connects two QPs over rdma_cm on that (local) address,
 *    a listener and a client in this module, and checks post_send's argument
 *    checks on the connected (RTS) client QP: the valid WRs before bad_wr
 *    are delivered, the bad one is refused;
 *  - checks that work requests posted to a QP in ERROR complete with
 *    IB_WC_WR_FLUSH_ERR in order (a QP never connected and one that was),
 *    that a graceful close asked in ERROR is a no-op (librdmacm's
 *    rdma_disconnect() after the peer closed), that ib_drain_qp() returns,
 *    and that a CQ overflow raises IB_EVENT_CQ_ERR.
 * It prints one line per check ("PASS name: ...", "FAIL name: ...",
 * "SKIP name: ...") and a summary line
 *   "rsiw_kverbs: summary: N passed, N failed, N skipped"
 * and the module init fails with -EIO if any check failed, so
 * "modprobe rsiw_kverbs" is the test. tests/vm/cases/kernel-verbs.sh runs it.
 *
 * It is C because it is a consumer of the C verbs API (ib_core has no Rust
 * consumer bindings yet); it tests the Rust driver from the outside.
 *
 * Parameters:
 *   dev=NAME     the RDMA device (default rsiw0)
 *   cycles=N     create/destroy cycles per object type (default 10000)
 *   mr_limit_errno=N  the errno expected for ib_alloc_mr above the page list
 *                limit (default EINVAL; the C siw answers ENOMEM)
 *   strict_lkey=1  a bad lkey accepted at post time fails instead of
 *                skipping (the C siw checks lkeys only when it processes a WR)
 *   inline_fault=1  post inline data at a non-kernel address and expect
 *                EFAULT (the C siw reads inline data directly and oopses)
 *   addr=A.B.C.D an IPv4 address of the device's netdev, for the connected
 *                QP checks (default: none, they are skipped)
 *   port=N       the TCP port of the loopback listener (default 7174)
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

static char *dev = "rsiw0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "RDMA device to test (default rsiw0)");

static unsigned int cycles = 10000;
module_param(cycles, uint, 0444);
MODULE_PARM_DESC(cycles, "create/destroy cycles per object type (default 10000)");

static int mr_limit_errno = EINVAL;
module_param(mr_limit_errno, int, 0444);
MODULE_PARM_DESC(mr_limit_errno,
		 "errno expected for ib_alloc_mr above max_fast_reg_page_list_len (default EINVAL; C siw: ENOMEM)");

static bool strict_lkey;
module_param(strict_lkey, bool, 0444);
MODULE_PARM_DESC(strict_lkey, "fail instead of skip when a bad lkey is accepted at post time");
static bool inline_fault;
module_param(inline_fault, bool, 0444);
MODULE_PARM_DESC(inline_fault,
		 "post inline data at a non-kernel address and expect EFAULT (siw oopses)");

static char *addr = "";
module_param(addr, charp, 0444);
MODULE_PARM_DESC(addr, "IPv4 address of the device's netdev for the connected-QP checks (default: none, skipped)");

static ushort port = 7174;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "TCP port of the rdma_cm loopback listener (default 7174)");

struct kv {
	struct ib_device *ibdev;
	unsigned int pass, fail, skip;
};

/* Prints one check's verdict ("PASS", "FAIL" or "SKIP") and counts it in @count. */
static __printf(4, 5) void kv_report(const char *verdict, unsigned int *count,
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

#define kv_pass(t, name, ...) kv_report("PASS", &(t)->pass, name, __VA_ARGS__)
#define kv_fail(t, name, ...) kv_report("FAIL", &(t)->fail, name, __VA_ARGS__)
#define kv_skip(t, name, ...) kv_report("SKIP", &(t)->skip, name, __VA_ARGS__)

/* Checks that a creation failed with @want (@got: its errno, 0 on success). */
static void expect_errno(struct kv *t, const char *name, long got, int want)
{
	if (!got)
		kv_fail(t, name, "succeeded, expected %d", want);
	else if (got != want)
		kv_fail(t, name, "got %ld, expected %d", got, want);
	else
		kv_pass(t, name, "%d", want);
}

/* Checks that @ptr is ERR_PTR(@want); frees what was created by mistake. */
#define EXPECT_ERR_PTR(t, name, ptr, want, freefn)			\
	do {								\
		typeof(ptr) __p = (ptr);				\
									\
		if (!IS_ERR(__p))					\
			freefn(__p);					\
		expect_errno(t, name, IS_ERR(__p) ? PTR_ERR(__p) : 0, want); \
	} while (0)

static unsigned long ms_since(ktime_t t0)
{
	return (unsigned long)ktime_ms_delta(ktime_get(), t0);
}

/* --- object cycles ------------------------------------------------------ */

static void cycle_pd(struct kv *t)
{
	bool dma = !(t->ibdev->attrs.kernel_cap_flags & IBK_LOCAL_DMA_LKEY);
	unsigned int i, with_mr = 0;
	ktime_t t0 = ktime_get();

	for (i = 0; i < cycles; i++) {
		struct ib_pd *pd = ib_alloc_pd(t->ibdev, 0);

		if (IS_ERR(pd)) {
			kv_fail(t, "cycle_pd", "ib_alloc_pd #%u: %ld", i, PTR_ERR(pd));
			return;
		}
		/* Without IBK_LOCAL_DMA_LKEY, ib_core takes a DMA MR (get_dma_mr). */
		if (pd->__internal_mr && pd->local_dma_lkey == pd->__internal_mr->lkey)
			with_mr++;
		ib_dealloc_pd(pd);
		cond_resched();
	}
	kv_pass(t, "cycle_pd", "%u x ib_alloc_pd/ib_dealloc_pd in %lu ms", cycles, ms_since(t0));
	if (!dma)
		kv_skip(t, "cycle_dma_mr", "device has a local DMA lkey: no get_dma_mr per PD");
	else if (with_mr == cycles)
		kv_pass(t, "cycle_dma_mr", "%u x get_dma_mr/dereg_mr (the PD's local_dma_lkey)",
			with_mr);
	else
		kv_fail(t, "cycle_dma_mr", "only %u of %u PDs had a DMA MR", with_mr, cycles);

	/* The remote-access DMA MR of IB_PD_UNSAFE_GLOBAL_RKEY (once: it warns). */
	{
		struct ib_pd *pd = ib_alloc_pd(t->ibdev, IB_PD_UNSAFE_GLOBAL_RKEY);

		if (IS_ERR(pd)) {
			kv_fail(t, "pd_global_rkey", "ib_alloc_pd: %ld", PTR_ERR(pd));
		} else {
			if (pd->__internal_mr && pd->unsafe_global_rkey == pd->__internal_mr->rkey)
				kv_pass(t, "pd_global_rkey", "get_dma_mr with remote access");
			else
				kv_fail(t, "pd_global_rkey", "no global rkey");
			ib_dealloc_pd(pd);
		}
	}
}

static void cycle_cq(struct kv *t)
{
	ktime_t t0 = ktime_get();
	unsigned int i;

	for (i = 0; i < cycles; i++) {
		struct ib_cq *cq = ib_alloc_cq(t->ibdev, NULL, 16, 0, IB_POLL_DIRECT);

		if (IS_ERR(cq)) {
			kv_fail(t, "cycle_cq", "ib_alloc_cq #%u: %ld", i, PTR_ERR(cq));
			return;
		}
		if (cq->cqe < 16) {
			kv_fail(t, "cycle_cq", "ib_alloc_cq #%u: %d CQEs, asked for 16", i,
				cq->cqe);
			ib_free_cq(cq);
			return;
		}
		ib_free_cq(cq);
		cond_resched();
	}
	kv_pass(t, "cycle_cq", "%u x ib_alloc_cq/ib_free_cq in %lu ms", cycles, ms_since(t0));
}

static void qp_attr_init(struct ib_qp_init_attr *a, struct ib_cq *scq, struct ib_cq *rcq)
{
	memset(a, 0, sizeof(*a));
	a->qp_type = IB_QPT_RC;
	a->send_cq = scq;
	a->recv_cq = rcq;
	a->sq_sig_type = IB_SIGNAL_REQ_WR;
	a->cap.max_send_wr = 16;
	a->cap.max_recv_wr = 16;
	a->cap.max_send_sge = 2;
	a->cap.max_recv_sge = 2;
}

static void cycle_qp(struct kv *t, struct ib_pd *pd, struct ib_cq *scq, struct ib_cq *rcq)
{
	struct ib_qp_init_attr a;
	ktime_t t0 = ktime_get();
	unsigned int i;

	for (i = 0; i < cycles; i++) {
		struct ib_qp *qp;
		int ret;

		qp_attr_init(&a, scq, rcq);
		qp = ib_create_qp(pd, &a);
		if (IS_ERR(qp)) {
			kv_fail(t, "cycle_qp", "ib_create_qp #%u: %ld", i, PTR_ERR(qp));
			return;
		}
		ret = ib_destroy_qp(qp);
		if (ret) {
			kv_fail(t, "cycle_qp", "ib_destroy_qp #%u: %d", i, ret);
			return;
		}
		cond_resched();
	}
	kv_pass(t, "cycle_qp", "%u x ib_create_qp(RC)/ib_destroy_qp in %lu ms", cycles,
		ms_since(t0));
}

static void srq_attr_init(struct ib_srq_init_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->srq_type = IB_SRQT_BASIC;
	a->attr.max_wr = 16;
	a->attr.max_sge = 2;
}

static void cycle_srq(struct kv *t, struct ib_pd *pd)
{
	struct ib_srq_init_attr a;
	ktime_t t0 = ktime_get();
	unsigned int i;

	for (i = 0; i < cycles; i++) {
		struct ib_srq *srq;

		srq_attr_init(&a);
		srq = ib_create_srq(pd, &a);
		if (IS_ERR(srq)) {
			if (i == 0 && PTR_ERR(srq) == -EOPNOTSUPP) {
				kv_skip(t, "cycle_srq", "the device has no SRQs");
				return;
			}
			kv_fail(t, "cycle_srq", "ib_create_srq #%u: %ld", i, PTR_ERR(srq));
			return;
		}
		ib_destroy_srq(srq);
		cond_resched();
	}
	kv_pass(t, "cycle_srq", "%u x ib_create_srq/ib_destroy_srq in %lu ms", cycles,
		ms_since(t0));
}

static void cycle_fastreg_mr(struct kv *t, struct ib_pd *pd)
{
	ktime_t t0 = ktime_get();
	unsigned int i;

	for (i = 0; i < cycles; i++) {
		struct ib_mr *mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 16);
		int ret;

		if (IS_ERR(mr)) {
			if (i == 0 && PTR_ERR(mr) == -EOPNOTSUPP) {
				kv_skip(t, "cycle_fastreg_mr",
					"ib_alloc_mr: EOPNOTSUPP (no fast registration yet)");
				return;
			}
			kv_fail(t, "cycle_fastreg_mr", "ib_alloc_mr #%u: %ld", i, PTR_ERR(mr));
			return;
		}
		ret = ib_dereg_mr(mr);
		if (ret) {
			kv_fail(t, "cycle_fastreg_mr", "ib_dereg_mr #%u: %d", i, ret);
			return;
		}
		cond_resched();
	}
	kv_pass(t, "cycle_fastreg_mr", "%u x ib_alloc_mr(MEM_REG, 16)/ib_dereg_mr in %lu ms",
		cycles, ms_since(t0));
}

/* --- invalid arguments at creation ------------------------------------- */

static void free_cq(struct ib_cq *cq)
{
	ib_free_cq(cq);
}

static void destroy_qp(struct ib_qp *qp)
{
	ib_destroy_qp(qp);
}

static void destroy_srq(struct ib_srq *srq)
{
	ib_destroy_srq(srq);
}

static void dereg_mr(struct ib_mr *mr)
{
	ib_dereg_mr(mr);
}

static void bad_create(struct kv *t, struct ib_pd *pd, struct ib_cq *scq, struct ib_cq *rcq)
{
	const struct ib_device_attr *da = &t->ibdev->attrs;
	struct ib_qp_init_attr qa;
	struct ib_srq_init_attr sa;
	struct ib_mr *mr;

	EXPECT_ERR_PTR(t, "cq_oversized",
		       ib_alloc_cq(t->ibdev, NULL, da->max_cqe + 1, 0, IB_POLL_DIRECT),
		       -EINVAL, free_cq);
	/* (A 0-entry CQ never reaches the driver: ib_core WARNs and fails it.) */

	qp_attr_init(&qa, scq, rcq);
	qa.cap.max_send_wr = da->max_qp_wr + 1;
	EXPECT_ERR_PTR(t, "qp_max_send_wr", ib_create_qp(pd, &qa), -EINVAL, destroy_qp);
	qp_attr_init(&qa, scq, rcq);
	qa.cap.max_recv_wr = da->max_qp_wr + 1;
	EXPECT_ERR_PTR(t, "qp_max_recv_wr", ib_create_qp(pd, &qa), -EINVAL, destroy_qp);
	qp_attr_init(&qa, scq, rcq);
	qa.cap.max_send_sge = da->max_send_sge + 1;
	EXPECT_ERR_PTR(t, "qp_max_send_sge", ib_create_qp(pd, &qa), -EINVAL, destroy_qp);
	qp_attr_init(&qa, scq, rcq);
	qa.cap.max_recv_sge = da->max_recv_sge + 1;
	EXPECT_ERR_PTR(t, "qp_max_recv_sge", ib_create_qp(pd, &qa), -EINVAL, destroy_qp);
	qp_attr_init(&qa, scq, rcq);
	qa.cap.max_inline_data = 1U << 20;
	EXPECT_ERR_PTR(t, "qp_max_inline_data", ib_create_qp(pd, &qa), -EINVAL, destroy_qp);
	qp_attr_init(&qa, scq, rcq);
	qa.qp_type = IB_QPT_UD;
	EXPECT_ERR_PTR(t, "qp_type_ud", ib_create_qp(pd, &qa), -EOPNOTSUPP, destroy_qp);

	srq_attr_init(&sa);
	sa.attr.max_wr = da->max_srq_wr + 1;
	EXPECT_ERR_PTR(t, "srq_max_wr", ib_create_srq(pd, &sa), -EINVAL, destroy_srq);
	srq_attr_init(&sa);
	sa.attr.max_sge = da->max_srq_sge + 1;
	EXPECT_ERR_PTR(t, "srq_max_sge", ib_create_srq(pd, &sa), -EINVAL, destroy_srq);

	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(mr) && PTR_ERR(mr) == -EOPNOTSUPP) {
		kv_skip(t, "mr_max_num_sg", "ib_alloc_mr: EOPNOTSUPP (no fast registration yet)");
	} else {
		if (!IS_ERR(mr))
			ib_dereg_mr(mr);
		EXPECT_ERR_PTR(t, "mr_max_num_sg",
			       ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG,
					   da->max_fast_reg_page_list_len + 1),
			       -mr_limit_errno, dereg_mr);
	}
}

/* --- invalid work requests ---------------------------------------------- */

/* Checks a post's result: @ret must be @want and @bad must be @want_bad. */
static void expect_post(struct kv *t, const char *name, int ret, int want,
			const void *bad, const void *want_bad)
{
	if (ret != want)
		kv_fail(t, name, "got %d, expected %d", ret, want);
	else if (bad != want_bad)
		kv_fail(t, name, "%d, but bad_wr is %p, expected %p", ret, bad, want_bad);
	else
		kv_pass(t, name, "%d, bad_wr set", want);
}

/*
 * A bad lkey must fail the post with EINVAL. A driver that checks lkeys only
 * when it processes the WR accepts it: skip then, unless strict_lkey=1.
 */
static void expect_lkey(struct kv *t, const char *name, int ret, const void *bad,
			const void *want_bad)
{
	if (ret == 0 && !strict_lkey)
		kv_skip(t, name, "accepted at post time (strict_lkey=0)");
	else
		expect_post(t, name, ret, -EINVAL, bad, want_bad);
}

/* Drops the completions left on a CQ polled with ib_poll_cq(). */
static void drop_completions(struct ib_cq *cq)
{
	struct ib_wc wc[8];

	while (ib_poll_cq(cq, ARRAY_SIZE(wc), wc) > 0)
		;
}

static struct ib_qp *new_qp(struct kv *t, const char *name, struct ib_pd *pd,
			    struct ib_cq *scq, struct ib_cq *rcq)
{
	struct ib_qp_init_attr a;
	struct ib_qp *qp;

	qp_attr_init(&a, scq, rcq);
	qp = ib_create_qp(pd, &a);
	if (IS_ERR(qp)) {
		kv_fail(t, name, "ib_create_qp: %ld", PTR_ERR(qp));
		return NULL;
	}
	return qp;
}

static int qp_to_error(struct ib_qp *qp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	return ib_modify_qp(qp, &attr, IB_QP_STATE);
}

/* Posts receives to a QP or an SRQ: ib_post_recv() or ib_post_srq_recv(). */
typedef int (*post_recv_fn)(void *obj, const struct ib_recv_wr *wr,
			    const struct ib_recv_wr **bad);

static int qp_post_recv(void *qp, const struct ib_recv_wr *wr, const struct ib_recv_wr **bad)
{
	return ib_post_recv(qp, wr, bad);
}

static int srq_post_recv(void *srq, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad)
{
	return ib_post_srq_recv(srq, wr, bad);
}

/*
 * The receive checks of a QP or an SRQ of @pd (@what: "post_recv" or
 * "post_srq_recv", the prefix of the check names): more than @max_sge SGEs
 * (the second WR of a chain is bad), a bad lkey, an lkey of @pd2, and last
 * an lkey of @pd, which is accepted.
 */
static noinline_for_stack void bad_recvs(struct kv *t, const char *what, post_recv_fn post,
					 void *obj, u32 max_sge, struct ib_pd *pd,
					 struct ib_pd *pd2)
{
	const struct {
		const char *name;
		u32 lkey;
		bool ok;
	} lkeys[] = {
		{ "bad_lkey", pd->local_dma_lkey ^ 0xff, false },
		{ "wrong_pd_lkey", pd2->local_dma_lkey, false },
		{ "own_pd", pd->local_dma_lkey, true },
	};
	const struct ib_recv_wr *rbad;
	struct ib_recv_wr rwr[2];
	struct ib_sge sge[8] = {};
	char name[48];
	int i, ret;

	memset(rwr, 0, sizeof(rwr));
	rwr[0].wr_id = 1;
	rwr[0].next = &rwr[1];
	rwr[1].wr_id = 2;
	rwr[1].sg_list = sge;
	rwr[1].num_sge = min_t(u32, max_sge + 1, ARRAY_SIZE(sge));
	rbad = NULL;
	ret = post(obj, rwr, &rbad);
	snprintf(name, sizeof(name), "%s_too_many_sge", what);
	if (max_sge + 1 > ARRAY_SIZE(sge))
		kv_skip(t, name, "%u SGEs allowed", max_sge);
	else
		expect_post(t, name, ret, -EINVAL, rbad, &rwr[1]);

	/* One SGE: a bad lkey (same index, wrong key), @pd2's, @pd's (accepted). */
	for (i = 0; i < ARRAY_SIZE(lkeys); i++) {
		memset(rwr, 0, sizeof(rwr));
		sge[0].addr = 0;
		sge[0].length = 64;
		sge[0].lkey = lkeys[i].lkey;
		rwr[0].wr_id = 3 + i;
		rwr[0].sg_list = sge;
		rwr[0].num_sge = 1;
		rbad = NULL;
		ret = post(obj, rwr, &rbad);
		snprintf(name, sizeof(name), "%s_%s", what, lkeys[i].name);
		if (!lkeys[i].ok)
			expect_lkey(t, name, ret, rbad, &rwr[0]);
		else if (ret)
			kv_fail(t, name, "an SGE of its own PD: %d", ret);
		else
			kv_pass(t, name, "an SGE of its own PD is accepted");
	}
}

static void bad_posts(struct kv *t, struct ib_pd *pd, struct ib_pd *pd2, struct ib_cq *scq,
		      struct ib_cq *rcq)
{
	const struct ib_send_wr *sbad;
	struct ib_send_wr swr[2];
	struct ib_qp *qp;
	int ret;

	qp = new_qp(t, "post_setup", pd, scq, rcq);
	if (!qp)
		return;
	bad_recvs(t, "post_recv", qp_post_recv, qp, qp->device->attrs.max_recv_sge, pd, pd2);

	/*
	 * post_send validates SGEs, lkeys and opcodes only on a connected QP
	 * (RTS, connected_posts()); before that it must refuse with ENOTCONN,
	 * as siw does.
	 */
	memset(swr, 0, sizeof(swr));
	swr[0].wr_id = 5;
	swr[0].opcode = IB_WR_SEND;
	swr[0].send_flags = IB_SEND_SIGNALED;
	sbad = NULL;
	ret = ib_post_send(qp, swr, &sbad);
	expect_post(t, "post_send_not_connected", ret, -ENOTCONN, sbad, &swr[0]);

	/* In ERROR an unknown opcode is still refused, not flushed. */
	ret = qp_to_error(qp);
	if (ret) {
		kv_fail(t, "post_send_unknown_opcode", "ib_modify_qp(ERR): %d", ret);
		goto out;
	}
	memset(swr, 0, sizeof(swr));
	swr[0].wr_id = 6;
	swr[0].opcode = IB_WR_SEND;
	swr[0].next = &swr[1];
	swr[1].wr_id = 7;
	swr[1].opcode = 0x7f;
	sbad = NULL;
	ret = ib_post_send(qp, swr, &sbad);
	expect_post(t, "post_send_unknown_opcode", ret, -EINVAL, sbad, &swr[1]);
out:
	ib_destroy_qp(qp);
	drop_completions(scq);
	drop_completions(rcq);
}

/* The same receive checks on an SRQ. */
static void bad_srq_posts(struct kv *t, struct ib_pd *pd, struct ib_pd *pd2)
{
	struct ib_srq_init_attr sa;
	struct ib_srq *srq;

	srq_attr_init(&sa);
	srq = ib_create_srq(pd, &sa);
	if (IS_ERR(srq)) {
		if (PTR_ERR(srq) == -EOPNOTSUPP)
			kv_skip(t, "post_srq_recv", "the device has no SRQs");
		else
			kv_fail(t, "post_srq_recv", "ib_create_srq: %ld", PTR_ERR(srq));
		return;
	}
	bad_recvs(t, "post_srq_recv", srq_post_recv, srq, sa.attr.max_sge, pd, pd2);
	ib_destroy_srq(srq);
}

/*
 * A graceful close asked for in ERROR (IB_QPS_SQD, what librdmacm's
 * rdma_disconnect() does on iWARP, after the peer closed) is a no-op: it
 * succeeds and the QP stays in ERROR.
 */
static void expect_close_noop(struct kv *t, const char *name, struct ib_qp *qp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_SQD };
	struct ib_qp_init_attr init;
	int ret;

	ret = ib_modify_qp(qp, &attr, IB_QP_STATE);
	if (ret) {
		kv_fail(t, name, "ib_modify_qp(SQD) in ERROR: %d, expected 0", ret);
		return;
	}
	memset(&attr, 0, sizeof(attr));
	ret = ib_query_qp(qp, &attr, IB_QP_STATE, &init);
	if (ret)
		kv_fail(t, name, "ib_query_qp: %d", ret);
	else if (attr.qp_state != IB_QPS_ERR)
		kv_fail(t, name, "state %d after SQD, expected ERROR (%d)", attr.qp_state,
			IB_QPS_ERR);
	else
		kv_pass(t, name, "ib_modify_qp(SQD) in ERROR: 0, the QP stays in ERROR");
}

/* --- flush, drain and overflow ------------------------------------------ */

/*
 * Polls exactly @n completions from @cq and checks that they are flushed
 * work requests of @qp with opcode @op and wr_ids @first, @first + 1, ...
 */
static bool expect_flushed(struct kv *t, const char *name, struct ib_cq *cq, struct ib_qp *qp,
			   int n, enum ib_wc_opcode op, u64 first)
{
	struct ib_wc wc[8];
	int got, i;

	got = ib_poll_cq(cq, ARRAY_SIZE(wc), wc);
	if (got != n) {
		kv_fail(t, name, "polled %d completions, expected %d", got, n);
		return false;
	}
	for (i = 0; i < n; i++) {
		if (wc[i].status != IB_WC_WR_FLUSH_ERR || wc[i].opcode != op ||
		    wc[i].wr_id != first + i || wc[i].qp != qp) {
			kv_fail(t, name, "wc %d: status %d opcode %d wr_id %llu qp %s", i,
				wc[i].status, wc[i].opcode, wc[i].wr_id,
				wc[i].qp == qp ? "ok" : "wrong");
			return false;
		}
	}
	return true;
}

static void flush_in_error(struct kv *t, struct ib_pd *pd)
{
	const struct ib_recv_wr *rbad;
	const struct ib_send_wr *sbad;
	struct ib_cq *scq, *rcq;
	struct ib_recv_wr rwr[2];
	struct ib_send_wr swr[2];
	struct ib_qp *qp;
	int ret;

	scq = ib_alloc_cq(t->ibdev, NULL, 16, 0, IB_POLL_DIRECT);
	rcq = ib_alloc_cq(t->ibdev, NULL, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(scq) || IS_ERR(rcq)) {
		kv_fail(t, "flush_in_error", "ib_alloc_cq failed");
		goto out_cq;
	}
	qp = new_qp(t, "flush_in_error", pd, scq, rcq);
	if (!qp)
		goto out_cq;

	/* Two receives posted before the error are flushed by it, in order. */
	memset(rwr, 0, sizeof(rwr));
	rwr[0].wr_id = 100;
	rwr[0].next = &rwr[1];
	rwr[1].wr_id = 101;
	ret = ib_post_recv(qp, rwr, &rbad);
	if (ret) {
		kv_fail(t, "flush_in_error", "ib_post_recv before ERROR: %d", ret);
		goto out_qp;
	}
	ret = qp_to_error(qp);
	if (ret) {
		kv_fail(t, "flush_in_error", "ib_modify_qp(ERR): %d", ret);
		goto out_qp;
	}
	/* Work requests posted in ERROR complete as flushed. */
	memset(swr, 0, sizeof(swr));
	swr[0].wr_id = 200;
	swr[0].opcode = IB_WR_SEND;
	swr[0].send_flags = IB_SEND_SIGNALED;
	swr[0].next = &swr[1];
	swr[1].wr_id = 201;
	swr[1].opcode = IB_WR_SEND;
	swr[1].send_flags = IB_SEND_SIGNALED;
	ret = ib_post_send(qp, swr, &sbad);
	if (ret) {
		kv_fail(t, "flush_in_error", "ib_post_send in ERROR: %d", ret);
		goto out_qp;
	}
	memset(rwr, 0, sizeof(rwr));
	rwr[0].wr_id = 102;
	ret = ib_post_recv(qp, rwr, &rbad);
	if (ret) {
		kv_fail(t, "flush_in_error", "ib_post_recv in ERROR: %d", ret);
		goto out_qp;
	}
	if (expect_flushed(t, "flush_in_error", scq, qp, 2, IB_WC_SEND, 200) &&
	    expect_flushed(t, "flush_in_error", rcq, qp, 3, IB_WC_RECV, 100))
		kv_pass(t, "flush_in_error",
			"2 sends and 3 receives completed with IB_WC_WR_FLUSH_ERR, in order");
	expect_close_noop(t, "close_in_error", qp);
out_qp:
	ib_destroy_qp(qp);
out_cq:
	if (!IS_ERR(scq))
		ib_free_cq(scq);
	if (!IS_ERR(rcq))
		ib_free_cq(rcq);
}

static atomic_t drain_flushed;

static void drain_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	if (wc->status == IB_WC_WR_FLUSH_ERR && wc->opcode == IB_WC_RECV)
		atomic_inc(&drain_flushed);
}

/*
 * ib_drain_qp() on a QP with a pending receive, with CQs polled by ib_core
 * (@ctx): the receive is flushed to its ib_cqe and the drain returns.
 */
static void drain(struct kv *t, struct ib_pd *pd, enum ib_poll_context ctx, const char *name)
{
	struct ib_cqe cqe = { .done = drain_recv_done };
	const struct ib_recv_wr *rbad;
	struct ib_recv_wr rwr = { .wr_cqe = &cqe };
	struct ib_cq *scq, *rcq;
	struct ib_qp *qp;
	ktime_t t0;
	int ret;

	scq = ib_alloc_cq(t->ibdev, NULL, 16, 0, ctx);
	rcq = ib_alloc_cq(t->ibdev, NULL, 16, 0, ctx);
	if (IS_ERR(scq) || IS_ERR(rcq)) {
		kv_fail(t, name, "ib_alloc_cq failed");
		goto out_cq;
	}
	qp = new_qp(t, name, pd, scq, rcq);
	if (!qp)
		goto out_cq;
	/* A pending receive, consumed by the CQ's own poller when flushed. */
	ret = ib_post_recv(qp, &rwr, &rbad);
	if (ret) {
		kv_fail(t, name, "ib_post_recv: %d", ret);
	} else {
		atomic_set(&drain_flushed, 0);
		t0 = ktime_get();
		ib_drain_qp(qp);
		if (atomic_read(&drain_flushed) == 1)
			kv_pass(t, name, "ib_drain_qp returned in %lu ms, the receive flushed",
				ms_since(t0));
		else
			kv_fail(t, name, "ib_drain_qp returned, %d flushed receives, expected 1",
				atomic_read(&drain_flushed));
	}
	ib_destroy_qp(qp);
out_cq:
	if (!IS_ERR(scq))
		ib_free_cq(scq);
	if (!IS_ERR(rcq))
		ib_free_cq(rcq);
}

static atomic_t cq_err_events;

static void cq_event(struct ib_event *ev, void *ctx)
{
	if (ev->event == IB_EVENT_CQ_ERR)
		atomic_inc(&cq_err_events);
}

static void cq_overflow(struct kv *t, struct ib_pd *pd)
{
	struct ib_cq_init_attr ca = { .cqe = 1 };
	const struct ib_send_wr *sbad;
	struct ib_send_wr swr[2];
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_wc wc[4];
	int ret, got;

	atomic_set(&cq_err_events, 0);
	cq = ib_create_cq(t->ibdev, NULL, cq_event, NULL, &ca);
	if (IS_ERR(cq)) {
		kv_fail(t, "cq_overflow", "ib_create_cq(1): %ld", PTR_ERR(cq));
		return;
	}
	if (cq->cqe != 1) {
		kv_skip(t, "cq_overflow", "a 1-entry CQ has %d entries", cq->cqe);
		goto out_cq;
	}
	qp = new_qp(t, "cq_overflow", pd, cq, cq);
	if (!qp)
		goto out_cq;
	ret = qp_to_error(qp);
	if (ret) {
		kv_fail(t, "cq_overflow", "ib_modify_qp(ERR): %d", ret);
		goto out_qp;
	}
	memset(swr, 0, sizeof(swr));
	swr[0].wr_id = 1;
	swr[0].opcode = IB_WR_SEND;
	swr[0].send_flags = IB_SEND_SIGNALED;
	swr[0].next = &swr[1];
	swr[1].wr_id = 2;
	swr[1].opcode = IB_WR_SEND;
	swr[1].send_flags = IB_SEND_SIGNALED;
	ret = ib_post_send(qp, swr, &sbad);
	got = ib_poll_cq(cq, ARRAY_SIZE(wc), wc);
	if (atomic_read(&cq_err_events) != 1)
		kv_fail(t, "cq_overflow", "%d IB_EVENT_CQ_ERR events, expected 1 (post %d)",
			atomic_read(&cq_err_events), ret);
	else if (got != 1 || wc[0].wr_id != 1)
		kv_fail(t, "cq_overflow", "polled %d completions, expected the first only", got);
	else
		kv_pass(t, "cq_overflow", "IB_EVENT_CQ_ERR raised, the queued completion kept");
out_qp:
	ib_destroy_qp(qp);
out_cq:
	ib_destroy_cq(cq);
}

/* --- a connected QP: rdma_cm loopback ----------------------------------- */

#define KV_CM_TIMEOUT_MS 20000
#define KV_CM_ERRORS							\
	(BIT(RDMA_CM_EVENT_ADDR_ERROR) | BIT(RDMA_CM_EVENT_ROUTE_ERROR) |	\
	 BIT(RDMA_CM_EVENT_CONNECT_ERROR) | BIT(RDMA_CM_EVENT_UNREACHABLE) |	\
	 BIT(RDMA_CM_EVENT_REJECTED) | BIT(RDMA_CM_EVENT_DEVICE_REMOVAL))
/* Receives the server posts before it accepts: one per zero-length Send. */
#define KV_SRV_RECVS 8

/*
 * A listener and a client in this module, connected over rdma_cm to addr=:
 * the client's QP is the connected QP under test, the server's receives what
 * it sends. Each side has one CQ for sends and receives.
 */
struct kv_conn {
	struct rdma_cm_id *listen, *cli, *srv;
	struct ib_cq *cli_cq, *srv_cq;
	wait_queue_head_t wq;
	spinlock_t lock;		/* protects srv, cli, cli_ev and srv_ev */
	unsigned long cli_ev, srv_ev;	/* the RDMA_CM_EVENT_* seen, as bits */
};

static int kv_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct kv_conn *c = id->context;
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&c->lock, flags);
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		if (c->srv)
			ret = 1;	/* one connection only: rdma_cm destroys this id */
		else
			c->srv = id;
		c->srv_ev |= BIT(ev->event);
	} else if (id == c->cli) {
		c->cli_ev |= BIT(ev->event);
	} else {
		c->srv_ev |= BIT(ev->event);
	}
	spin_unlock_irqrestore(&c->lock, flags);
	wake_up(&c->wq);
	return ret;
}

/* Waits for event @ev on the client (@cli) or the server side; returns 0 or -ETIMEDOUT. */
static int kv_cm_wait(struct kv_conn *c, bool cli, enum rdma_cm_event_type ev)
{
	unsigned long *seen = cli ? &c->cli_ev : &c->srv_ev;

	wait_event_timeout(c->wq, READ_ONCE(*seen) & (BIT(ev) | KV_CM_ERRORS),
			   msecs_to_jiffies(KV_CM_TIMEOUT_MS));
	return READ_ONCE(*seen) & BIT(ev) ? 0 : -ETIMEDOUT;
}

static void kv_conn_teardown(struct kv_conn *c)
{
	/* As ULPs do: the QP first, then its id. */
	if (c->cli) {
		if (c->cli->qp)
			rdma_destroy_qp(c->cli);
		rdma_destroy_id(c->cli);
	}
	if (c->srv) {
		if (c->srv->qp)
			rdma_destroy_qp(c->srv);
		rdma_destroy_id(c->srv);
	}
	if (c->listen)
		rdma_destroy_id(c->listen);
	if (!IS_ERR_OR_NULL(c->cli_cq))
		ib_free_cq(c->cli_cq);
	if (!IS_ERR_OR_NULL(c->srv_cq))
		ib_free_cq(c->srv_cq);
}

/*
 * Connects the pair: listen on addr:port, resolve and connect the client,
 * accept with KV_SRV_RECVS zero-length receives posted. Reports "connect";
 * returns 0 if the client QP is in RTS.
 */
static noinline_for_stack int kv_conn_setup(struct kv *t, struct kv_conn *c,
					    struct ib_pd *pd)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct rdma_conn_param cp = { .initiator_depth = 1, .responder_resources = 1 };
	struct ib_recv_wr rwr[KV_SRV_RECVS] = {};
	const struct ib_recv_wr *rbad;
	struct ib_qp_init_attr qa;
	struct ib_qp_attr attr;
	struct rdma_cm_id *id;
	const char *step;
	int i, ret;

	init_waitqueue_head(&c->wq);
	spin_lock_init(&c->lock);
	if (!in4_pton(addr, -1, (u8 *)&sin.sin_addr.s_addr, -1, NULL)) {
		kv_fail(t, "connect", "addr=%s is not an IPv4 address", addr);
		return -EINVAL;
	}
	step = "ib_alloc_cq";
	c->cli_cq = ib_alloc_cq(t->ibdev, NULL, 64, 0, IB_POLL_DIRECT);
	c->srv_cq = ib_alloc_cq(t->ibdev, NULL, 64, 0, IB_POLL_DIRECT);
	ret = PTR_ERR_OR_ZERO(c->cli_cq) ?: PTR_ERR_OR_ZERO(c->srv_cq);
	if (ret)
		goto fail;

	step = "rdma_create_id(listener)";
	id = rdma_create_id(&init_net, kv_cm_handler, c, RDMA_PS_TCP, IB_QPT_RC);
	ret = PTR_ERR_OR_ZERO(id);
	if (ret)
		goto fail;
	c->listen = id;
	step = "rdma_bind_addr";
	ret = rdma_bind_addr(c->listen, (struct sockaddr *)&sin);
	if (ret)
		goto fail;
	step = "rdma_listen";
	ret = rdma_listen(c->listen, 1);
	if (ret)
		goto fail;

	step = "rdma_create_id(client)";
	id = rdma_create_id(&init_net, kv_cm_handler, c, RDMA_PS_TCP, IB_QPT_RC);
	ret = PTR_ERR_OR_ZERO(id);
	if (ret)
		goto fail;
	spin_lock_irq(&c->lock);
	c->cli = id;
	spin_unlock_irq(&c->lock);
	step = "rdma_resolve_addr";
	ret = rdma_resolve_addr(c->cli, NULL, (struct sockaddr *)&sin, 5000) ?:
	      kv_cm_wait(c, true, RDMA_CM_EVENT_ADDR_RESOLVED);
	if (ret)
		goto fail;
	step = "rdma_resolve_route";
	ret = rdma_resolve_route(c->cli, 5000) ?:
	      kv_cm_wait(c, true, RDMA_CM_EVENT_ROUTE_RESOLVED);
	if (ret)
		goto fail;
	step = "resolved device";
	ret = -ENODEV;
	if (c->cli->device != t->ibdev)
		goto fail;
	step = "rdma_create_qp(client)";
	qp_attr_init(&qa, c->cli_cq, c->cli_cq);
	ret = rdma_create_qp(c->cli, pd, &qa);
	if (ret)
		goto fail;
	step = "rdma_connect";
	ret = rdma_connect(c->cli, &cp) ?:
	      kv_cm_wait(c, false, RDMA_CM_EVENT_CONNECT_REQUEST);
	if (ret)
		goto fail;

	step = "rdma_create_qp(server)";
	qp_attr_init(&qa, c->srv_cq, c->srv_cq);
	ret = rdma_create_qp(c->srv, pd, &qa);
	if (ret)
		goto fail;
	step = "ib_post_recv(server)";
	for (i = 0; i < KV_SRV_RECVS; i++) {
		rwr[i].wr_id = 1000 + i;
		rwr[i].next = i + 1 < KV_SRV_RECVS ? &rwr[i + 1] : NULL;
	}
	ret = ib_post_recv(c->srv->qp, rwr, &rbad);
	if (ret)
		goto fail;
	step = "rdma_accept";
	rdma_lock_handler(c->srv);
	ret = rdma_accept(c->srv, &cp);
	rdma_unlock_handler(c->srv);
	if (ret)
		goto fail;
	step = "ESTABLISHED";
	ret = kv_cm_wait(c, false, RDMA_CM_EVENT_ESTABLISHED) ?:
	      kv_cm_wait(c, true, RDMA_CM_EVENT_ESTABLISHED);
	if (ret)
		goto fail;

	step = "ib_query_qp(client)";
	ret = ib_query_qp(c->cli->qp, &attr, IB_QP_STATE, &qa);
	if (ret)
		goto fail;
	if (attr.qp_state != IB_QPS_RTS) {
		kv_fail(t, "connect", "client QP in state %d after ESTABLISHED, expected RTS",
			attr.qp_state);
		return -EINVAL;
	}
	kv_pass(t, "connect", "rdma_cm loopback on %pI4:%u, client QP in RTS", &sin.sin_addr,
		port);
	return 0;
fail:
	kv_fail(t, "connect", "%s: %d (client events %#lx, server events %#lx)", step, ret,
		READ_ONCE(c->cli_ev), READ_ONCE(c->srv_ev));
	return ret ?: -EINVAL;
}

/*
 * Polls @cq until it has returned @n completions or 10 s have passed; checks
 * that they succeeded with @op and wr_ids @first, @first + 1, ...
 */
static bool expect_success(struct kv *t, const char *name, struct ib_cq *cq, int n,
			   enum ib_wc_opcode op, u64 first)
{
	unsigned long end = jiffies + 10 * HZ;
	struct ib_wc wc;
	int got = 0;

	while (got < n && time_before(jiffies, end)) {
		if (ib_poll_cq(cq, 1, &wc) < 1) {
			usleep_range(10000, 20000);
			continue;
		}
		if (wc.status != IB_WC_SUCCESS || wc.opcode != op || wc.wr_id != first + got ||
		    wc.byte_len) {
			kv_fail(t, name, "wc %d: status %d opcode %d wr_id %llu byte_len %u", got,
				wc.status, wc.opcode, wc.wr_id, wc.byte_len);
			return false;
		}
		got++;
	}
	if (got < n)
		kv_fail(t, name, "%d of %d completions after 10 s", got, n);
	return got == n;
}

/* Send WR @id: @opcode, @flags, @nsge SGEs at @sge, then @next. */
static void init_send(struct ib_send_wr *wr, u64 id, u32 opcode, int flags,
		      struct ib_sge *sge, int nsge, struct ib_send_wr *next)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = id;
	wr->opcode = opcode;
	wr->send_flags = flags;
	wr->sg_list = sge;
	wr->num_sge = nsge;
	wr->next = next;
}

/*
 * Posts to @qp a valid zero-length Send (wr_id 10 + *@good) chained to @bad;
 * returns the result, bad_wr in @sbad. A driver must post the Send whatever
 * @bad is, so it counts in @good.
 */
static int post_after_good(struct ib_qp *qp, struct ib_send_wr *bad, int *good,
			   const struct ib_send_wr **sbad)
{
	struct ib_send_wr first;

	init_send(&first, 10 + *good, IB_WR_SEND, IB_SEND_SIGNALED, NULL, 0, bad);
	(*good)++;
	*sbad = NULL;
	return ib_post_send(qp, &first, sbad);
}

/*
 * post_send's argument checks on a connected QP. Each post is a chain of a
 * valid zero-length Send and a bad WR: the post fails with EINVAL and bad_wr
 * is the bad one, and the valid Sends reach the server. Then, in ERROR, work
 * requests complete as flushed, a graceful close is a no-op, and the server
 * sees the connection go.
 */
static noinline_for_stack void connected_posts(struct kv *t, struct ib_pd *pd, struct ib_pd *pd2)
{
	static const char *const names[] = {
		"post_send_too_many_sge", "post_send_unknown_opcode_rts",
		"post_send_inline_too_long", "post_send_bad_lkey", "post_send_wrong_pd_lkey",
		"post_send_before_bad_wr", "post_send_flush_rts", "close_in_error_rts",
		"disconnect_peer_closed", "post_send_inline_bad_addr",
	};
	struct kv_conn c = {};
	const struct ib_send_wr *sbad;
	struct ib_send_wr swr[2], bad;
	struct ib_sge sge[8] = {};
	bool accepted_bad = false;
	struct ib_qp *qp;
	u32 nsge;
	void *buf;
	int i, ret, good = 0;

	if (!*addr) {
		for (i = 0; i < ARRAY_SIZE(names); i++)
			kv_skip(t, names[i], "needs a connected (RTS) QP: no addr= given");
		return;
	}
	buf = kzalloc(1024, GFP_KERNEL);
	if (!buf) {
		kv_fail(t, "connect", "no memory");
		return;
	}
	if (kv_conn_setup(t, &c, pd))
		goto out;
	qp = c.cli->qp;
	nsge = qp->device->attrs.max_send_sge;

	/* More SGEs than the device's maximum. */
	init_send(&bad, 90, IB_WR_SEND, 0, sge, min_t(u32, nsge + 1, ARRAY_SIZE(sge)), NULL);
	ret = post_after_good(qp, &bad, &good, &sbad);
	if (nsge + 1 > ARRAY_SIZE(sge))
		kv_skip(t, names[0], "the device has %u send SGEs", nsge);
	else
		expect_post(t, names[0], ret, -EINVAL, sbad, &bad);

	/* An opcode that does not exist. */
	init_send(&bad, 91, 0x7f, 0, NULL, 0, NULL);
	ret = post_after_good(qp, &bad, &good, &sbad);
	expect_post(t, names[1], ret, -EINVAL, sbad, &bad);

	/* Inline data longer than any device's inline limit (siw: 80 bytes). */
	sge[0].addr = (uintptr_t)buf;
	sge[0].length = 1024;
	sge[0].lkey = pd->local_dma_lkey;
	init_send(&bad, 92, IB_WR_SEND, IB_SEND_INLINE, sge, 1, NULL);
	ret = post_after_good(qp, &bad, &good, &sbad);
	expect_post(t, names[2], ret, -EINVAL, sbad, &bad);

	/*
	 * Inline data at an address that is not kernel memory: the post fails
	 * with EFAULT instead of oopsing (siw reads the address directly).
	 */
	if (inline_fault) {
		sge[0].addr = 0x10;
		sge[0].length = 16;
		init_send(&bad, 95, IB_WR_SEND, IB_SEND_INLINE, sge, 1, NULL);
		ret = post_after_good(qp, &bad, &good, &sbad);
		expect_post(t, names[9], ret, -EFAULT, sbad, &bad);
	} else {
		kv_skip(t, names[9], "inline_fault=0");
	}

	/* A bad lkey, then an lkey of another PD, as send sources. */
	sge[0].addr = (uintptr_t)buf;
	sge[0].length = 64;
	sge[0].lkey = pd->local_dma_lkey ^ 0xff;
	init_send(&bad, 93, IB_WR_SEND, IB_SEND_SIGNALED, sge, 1, NULL);
	ret = post_after_good(qp, &bad, &good, &sbad);
	accepted_bad |= !ret;
	expect_lkey(t, names[3], ret, sbad, &bad);

	sge[0].lkey = pd2->local_dma_lkey;
	init_send(&bad, 94, IB_WR_SEND, IB_SEND_SIGNALED, sge, 1, NULL);
	ret = post_after_good(qp, &bad, &good, &sbad);
	accepted_bad |= !ret;
	expect_lkey(t, names[4], ret, sbad, &bad);

	/* The valid Sends before each bad_wr went out, in order. */
	if (accepted_bad) {
		kv_skip(t, names[5], "a bad lkey was accepted");
		msleep(1000);	/* for the accepted bad WRs to fail */
	} else if (expect_success(t, names[5], c.cli_cq, good, IB_WC_SEND, 10) &&
		   expect_success(t, names[5], c.srv_cq, good, IB_WC_RECV, 1000)) {
		kv_pass(t, names[5], "%d zero-length Sends completed on both sides, in order",
			good);
	}

	/* In ERROR, a connected QP flushes what is posted; a close is a no-op. */
	ret = qp_to_error(qp);
	if (ret) {
		kv_fail(t, names[6], "ib_modify_qp(ERR) in RTS: %d", ret);
		goto out;
	}
	drop_completions(c.cli_cq);	/* what the modify flushed */
	init_send(&swr[0], 20, IB_WR_SEND, IB_SEND_SIGNALED, NULL, 0, &swr[1]);
	init_send(&swr[1], 21, IB_WR_SEND, IB_SEND_SIGNALED, NULL, 0, NULL);
	sbad = NULL;
	ret = ib_post_send(qp, swr, &sbad);
	if (ret)
		kv_fail(t, names[6], "ib_post_send in ERROR: %d", ret);
	else if (expect_flushed(t, names[6], c.cli_cq, qp, 2, IB_WC_SEND, 20))
		kv_pass(t, names[6], "2 sends completed with IB_WC_WR_FLUSH_ERR, in order");
	expect_close_noop(t, names[7], qp);

	/* The server sees the connection go, and may still disconnect. */
	ret = kv_cm_wait(&c, false, RDMA_CM_EVENT_DISCONNECTED);
	if (ret) {
		kv_fail(t, names[8], "no DISCONNECTED on the server (events %#lx)",
			READ_ONCE(c.srv_ev));
	} else {
		ret = rdma_disconnect(c.srv);
		if (ret)
			kv_fail(t, names[8], "rdma_disconnect after the peer closed: %d", ret);
		else
			kv_pass(t, names[8], "DISCONNECTED, then rdma_disconnect: 0");
	}
out:
	kv_conn_teardown(&c);
	kfree(buf);
}

/* --- the device --------------------------------------------------------- */

static struct ib_device *found;

static int kv_add(struct ib_device *ibdev)
{
	if (!found && !strcmp(dev_name(&ibdev->dev), dev) && ib_device_try_get(ibdev))
		found = ibdev;
	return 0;
}

static void kv_remove(struct ib_device *ibdev, void *client_data)
{
}

static struct ib_client kv_client = {
	.name = "rsiw_kverbs",
	.add = kv_add,
	.remove = kv_remove,
};

static void run(struct kv *t)
{
	struct ib_cq *scq = NULL, *rcq = NULL;
	struct ib_pd *pd, *pd2 = NULL;

	cycle_pd(t);
	cycle_cq(t);

	pd = ib_alloc_pd(t->ibdev, 0);
	if (IS_ERR(pd)) {
		kv_fail(t, "setup", "ib_alloc_pd: %ld", PTR_ERR(pd));
		return;
	}
	pd2 = ib_alloc_pd(t->ibdev, 0);
	scq = ib_alloc_cq(t->ibdev, NULL, 64, 0, IB_POLL_DIRECT);
	rcq = ib_alloc_cq(t->ibdev, NULL, 64, 0, IB_POLL_DIRECT);
	if (IS_ERR(pd2) || IS_ERR(scq) || IS_ERR(rcq)) {
		kv_fail(t, "setup", "ib_alloc_pd/ib_alloc_cq failed");
		goto out;
	}

	cycle_qp(t, pd, scq, rcq);
	cycle_srq(t, pd);
	cycle_fastreg_mr(t, pd);

	bad_create(t, pd, scq, rcq);
	bad_posts(t, pd, pd2, scq, rcq);
	bad_srq_posts(t, pd, pd2);
	connected_posts(t, pd, pd2);
	flush_in_error(t, pd);
	drain(t, pd, IB_POLL_DIRECT, "drain_qp_direct");
	drain(t, pd, IB_POLL_SOFTIRQ, "drain_qp_softirq");
	drain(t, pd, IB_POLL_WORKQUEUE, "drain_qp_workqueue");
	cq_overflow(t, pd);
out:
	if (!IS_ERR_OR_NULL(scq))
		ib_free_cq(scq);
	if (!IS_ERR_OR_NULL(rcq))
		ib_free_cq(rcq);
	if (!IS_ERR_OR_NULL(pd2))
		ib_dealloc_pd(pd2);
	ib_dealloc_pd(pd);
}

static int __init kv_init(void)
{
	struct kv t = {};
	ktime_t t0 = ktime_get();
	int ret;

	ret = ib_register_client(&kv_client);
	if (ret)
		return ret;
	if (!found) {
		pr_info("FAIL setup: no RDMA device %s\n", dev);
		ib_unregister_client(&kv_client);
		return -ENODEV;
	}
	t.ibdev = found;
	pr_info("testing %s (driver id %u), %u cycles per object type\n", dev,
		found->ops.driver_id, cycles);
	run(&t);
	ib_device_put(found);
	found = NULL;
	ib_unregister_client(&kv_client);
	pr_info("summary: %u passed, %u failed, %u skipped in %lu ms\n", t.pass, t.fail,
		t.skip, ms_since(t0));
	return t.fail ? -EIO : 0;
}

static void __exit kv_exit(void)
{
}

module_init(kv_init);
module_exit(kv_exit);
MODULE_DESCRIPTION("In-kernel verbs consumer test for rsiw");
MODULE_LICENSE("GPL");
