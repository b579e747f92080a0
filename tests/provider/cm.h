/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rc_endpoint(): the rdma_cm set-up the test programs share. Include after
 * fail.h.
 */
#ifndef RSIW_TESTS_PROVIDER_CM_H
#define RSIW_TESTS_PROVIDER_CM_H

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

/*
 * An RC endpoint for ADDR:PORT, passive (to listen on) or active. With wr > 0
 * it has a QP of wr work requests per queue, send_sge send SGEs and one
 * receive SGE, every send signalled; with wr == 0 no QP (the caller creates
 * its own).
 */
static inline struct rdma_cm_id *rc_endpoint(const char *addr, const char *port,
				      int passive, unsigned int wr,
				      unsigned int send_sge)
{
	struct rdma_addrinfo hints = {}, *res;
	struct ibv_qp_init_attr attr = {};
	struct rdma_cm_id *id;

	hints.ai_port_space = RDMA_PS_TCP;
	if (passive)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(addr, port, &hints, &res))
		fail("rdma_getaddrinfo: %m");
	attr.cap.max_send_wr = wr;
	attr.cap.max_recv_wr = wr;
	attr.cap.max_send_sge = send_sge;
	attr.cap.max_recv_sge = 1;
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = 1;
	if (rdma_create_ep(&id, res, NULL, wr ? &attr : NULL))
		fail("rdma_create_ep: %m");
	rdma_freeaddrinfo(res);
	return id;
}

/*
 * The end of a server's connection: disconnect, deregister the n regions of
 * mrs, destroy the connection's endpoint and the listener's.
 */
static inline void rc_close(struct rdma_cm_id *id, struct rdma_cm_id *lid,
			    struct ibv_mr **mrs, int n)
{
	int i;

	rdma_disconnect(id);
	for (i = 0; i < n; i++)
		ibv_dereg_mr(mrs[i]);
	rdma_destroy_ep(id);
	rdma_destroy_ep(lid);
}

/* Connection parameters with an IRD and ORD of depth */
static inline struct rdma_conn_param rc_param(unsigned char depth)
{
	struct rdma_conn_param p = {};

	p.responder_resources = depth;
	p.initiator_depth = depth;
	return p;
}

#endif
