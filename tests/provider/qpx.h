/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the clients of the commit test programs (siw_commit, siw_pmem)
 * share: an RC QP with ibv_qp_ex send operations whose first message is the
 * server's description of its memory, completions, and work requests built
 * with ibv_wr_*(). Include after fail.h and cm.h.
 */
#ifndef RSIW_TESTS_PROVIDER_QPX_H
#define RSIW_TESTS_PROVIDER_QPX_H

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

/* The next completion of cq, within secs seconds */
static inline void cq_next(struct ibv_cq *cq, struct ibv_wc *wc, int secs)
{
	time_t end = time(NULL) + secs;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0) {
		if (time(NULL) > end)
			fail("no completion in %d s", secs);
		poll(NULL, 0, 1);
	}
	if (n < 0)
		fail("ibv_poll_cq: %d", n);
}

/*
 * An active endpoint without a QP, its PD and CQ, and qa filled for an RC
 * QP on them with send_ops (16 send and 4 receive work requests of one SGE)
 */
static inline void qpx_prepare(const char *addr, const char *port, uint64_t send_ops,
			struct rdma_cm_id **id, struct ibv_pd **pd,
			struct ibv_cq **cq, struct ibv_qp_init_attr_ex *qa)
{
	*id = rc_endpoint(addr, port, 0, 0, 0);
	*pd = ibv_alloc_pd((*id)->verbs);
	*cq = ibv_create_cq((*id)->verbs, 32, NULL, NULL, 0);
	if (!*pd || !*cq)
		fail("ibv_alloc_pd/ibv_create_cq: %m");
	memset(qa, 0, sizeof(*qa));
	qa->send_cq = *cq;
	qa->recv_cq = *cq;
	qa->cap.max_send_wr = 16;
	qa->cap.max_recv_wr = 4;
	qa->cap.max_send_sge = 1;
	qa->cap.max_recv_sge = 1;
	qa->qp_type = IBV_QPT_RC;
	qa->comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa->pd = *pd;
	qa->send_ops_flags = send_ops;
}

/*
 * Gives qp to rdma_cm (which takes it through its states), registers buf,
 * posts a receive for the server's description (info_len bytes at info,
 * inside buf), connects with p and waits for that description. Returns the
 * registration.
 */
static inline struct ibv_mr *qpx_connect(struct rdma_cm_id *id, struct ibv_qp *qp,
				  struct ibv_pd *pd, struct ibv_cq *cq,
				  void *buf, size_t len, void *info,
				  uint32_t info_len, struct rdma_conn_param *p,
				  int secs)
{
	struct ibv_recv_wr rwr = {}, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct ibv_mr *mr;

	id->qp = qp;
	mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		fail("ibv_reg_mr: %m");
	sge = (struct ibv_sge){ (uintptr_t)info, info_len, mr->lkey };
	rwr.wr_id = 100;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (ibv_post_recv(qp, &rwr, &bad))
		fail("ibv_post_recv: %m");
	if (rdma_connect(id, p))
		fail("rdma_connect: %m");
	cq_next(cq, &wc, secs);
	if (wc.wr_id != 100 || wc.status != IBV_WC_SUCCESS ||
	    wc.byte_len != info_len)
		fail("the server's description: %s, %u bytes",
		     ibv_wc_status_str(wc.status), wc.byte_len);
	return mr;
}

/*
 * Undoes qpx_prepare() and qpx_connect() (after rdma_disconnect(), if the
 * caller disconnects): the QP, the registration, the CQ, the PD, the id.
 */
static inline void qpx_teardown(struct rdma_cm_id *id, struct ibv_qp *qp,
				struct ibv_mr *mr, struct ibv_cq *cq,
				struct ibv_pd *pd)
{
	id->qp = NULL;
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_ep(id);
}

/* size zeroed bytes */
static inline void *qpx_zalloc(size_t size)
{
	void *p = calloc(1, size);

	if (!p)
		fail("calloc");
	return p;
}

/* The next work request built on qpx is id, signalled */
static inline void qpx_wr(struct ibv_qp_ex *qpx, uint64_t id)
{
	qpx->wr_id = id;
	qpx->wr_flags = IBV_SEND_SIGNALED;
}

/* Posts the work requests built since ibv_wr_start() */
static inline void qpx_complete(struct ibv_qp_ex *qpx, const char *check)
{
	int rv = ibv_wr_complete(qpx);

	if (rv)
		fail("%s: ibv_wr_complete: %s", check, strerror(rv));
}

#endif
