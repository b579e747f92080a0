// SPDX-License-Identifier: GPL-2.0 or BSD-3-Clause
/*
 * A hostile user of the extended siw ABI (Documentation/infiniband/
 * rsiw-abi.rst, "What the driver checks"): on a connected QP of an extended
 * context it writes one malformed RFC 7306 SQE straight into the mapped send
 * ring (as a provider with bugs, or a process scribbling on the ring, would)
 * and rings the doorbell. The driver must complete it with the exact error
 * status, move the QP to ERROR, and stay up with a clean console (the VM
 * runner checks it). One connection per SQE:
 *
 *   siw_hostile server ADDR PORT
 *   siw_hostile client ADDR PORT
 *
 * The server accepts one connection per case and waits for each to go. The
 * client needs the patched provider (its QP's ring is reached through the
 * provider's struct siw_qp) and a context with the RFC 7306 extensions.
 *
 * Built with the provider by tests/provider/build.sh (with siw.c's flags, for
 * siw.h); run by the VM case ext-user.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "siw_abi.h"
#include "siw.h"

#define PROG "siw_hostile"
#include "fail.h"
#include "cm.h"
#include "ring.h"

enum { ANY_OPCODE = -1 };

struct hcase {
	const char *name;
	uint8_t opcode;
	uint8_t num_sge;
	uint16_t flags;
	uint32_t sge0_len;
	/* bytes of the SQE to set after the fields above: offset, value */
	int off1;
	uint8_t val1;
	enum ibv_wc_status status;
	int wc_opcode; /* enum ibv_wc_opcode, or ANY_OPCODE */
};

static const struct hcase cases[] = {
	{ "compare-and-swap, result SGE of 4 bytes", SIW_OP_COMP_AND_SWAP, 1,
	  0, 4, 0, 0, IBV_WC_LOC_QP_OP_ERR, IBV_WC_COMP_SWAP },
	{ "compare-and-swap, 2 SGEs", SIW_OP_COMP_AND_SWAP, 2, 0, 8, 0, 0,
	  IBV_WC_LOC_QP_OP_ERR, IBV_WC_COMP_SWAP },
	{ "compare-and-swap, no SGE", SIW_OP_COMP_AND_SWAP, 0, 0, 8, 0, 0,
	  IBV_WC_LOC_QP_OP_ERR, IBV_WC_COMP_SWAP },
	{ "compare-and-swap, inline", SIW_OP_COMP_AND_SWAP, 1,
	  SIW_WQE_INLINE, 8, 0, 0, IBV_WC_LOC_QP_OP_ERR, IBV_WC_COMP_SWAP },
	{ "compare-and-swap, a compare mask", SIW_OP_COMP_AND_SWAP, 1, 0, 8,
	  56, 1, IBV_WC_LOC_QP_OP_ERR, IBV_WC_COMP_SWAP },
	{ "compare-and-swap, reserved byte 72", SIW_OP_COMP_AND_SWAP, 1, 0, 8,
	  72, 1, IBV_WC_LOC_QP_OP_ERR, IBV_WC_COMP_SWAP },
	{ "compare-and-swap, reserved byte 119", SIW_OP_COMP_AND_SWAP, 1, 0,
	  8, 119, 0x80, IBV_WC_LOC_QP_OP_ERR, IBV_WC_COMP_SWAP },
	{ "fetch-and-add, a swap value", SIW_OP_FETCH_AND_ADD, 1, 0, 8, 48,
	  1, IBV_WC_LOC_QP_OP_ERR, IBV_WC_FETCH_ADD },
	{ "masked fetch-and-add, a swap mask", SIW_OP_MASKED_FETCH_AND_ADD, 1,
	  0, 8, 64, 1, IBV_WC_LOC_QP_OP_ERR, IBV_WC_FETCH_ADD },
	{ "masked compare-and-swap, flag bit 7", SIW_OP_MASKED_COMP_AND_SWAP,
	  1, 0x80, 8, 0, 0, IBV_WC_LOC_QP_OP_ERR, IBV_WC_COMP_SWAP },
	{ "Send with Immediate, a remote address", SIW_OP_SEND_WITH_IMM, 0, 0,
	  0, 16, 1, IBV_WC_LOC_QP_OP_ERR, IBV_WC_SEND },
	{ "Write with Immediate, 6 SGEs", SIW_OP_WRITE_WITH_IMM, 6, 0, 0, 0, 0,
	  IBV_WC_LOC_QP_OP_ERR, IBV_WC_RDMA_WRITE },
	{ "Write with Immediate, 77 bytes inline", SIW_OP_WRITE_WITH_IMM, 1,
	  SIW_WQE_INLINE, 77, 0, 0, IBV_WC_LOC_LEN_ERR, IBV_WC_RDMA_WRITE },
	{ "Write with Immediate, inline with 2 SGEs", SIW_OP_WRITE_WITH_IMM,
	  2, SIW_WQE_INLINE, 8, 0, 0, IBV_WC_LOC_QP_OP_ERR,
	  IBV_WC_RDMA_WRITE },
	{ "Flush, which no context gets yet", SIW_OP_FLUSH, 0, 0, 0, 0, 0,
	  IBV_WC_LOC_QP_OP_ERR, ANY_OPCODE },
	{ "RECEIVE_RDMA_WITH_IMM, a CQE opcode", SIW_OP_RECEIVE_RDMA_WITH_IMM,
	  0, 0, 0, 0, 0, IBV_WC_LOC_QP_OP_ERR, IBV_WC_SEND },
	{ "opcode 0xff", 0xff, 1, 0, 0, 0, 0, IBV_WC_LOC_QP_OP_ERR,
	  IBV_WC_SEND },
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int server(const char *addr, const char *port)
{
	struct rdma_cm_id *lid = rc_endpoint(addr, port, 1, 4, 6), *id;
	struct rdma_conn_param p = rc_param(1);
	struct rdma_cm_event *ev;
	unsigned int i;

	if (rdma_listen(lid, 1))
		fail("rdma_listen: %m");
	for (i = 0; i < NCASES; i++) {
		if (rdma_get_request(lid, &id))
			fail("rdma_get_request %u: %m", i);
		if (rdma_accept(id, &p))
			fail("rdma_accept %u: %m", i);
		/* The client's QP fails locally: it only disconnects */
		if (rdma_get_cm_event(id->channel, &ev))
			fail("rdma_get_cm_event %u: %m", i);
		if (ev->event != RDMA_CM_EVENT_DISCONNECTED)
			fail("connection %u: event %s", i,
			     rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
		rdma_destroy_ep(id);
	}
	printf("siw_hostile server: %u connections\n", i);
	rdma_destroy_ep(lid);
	return 0;
}

static void one(const char *addr, const char *port, unsigned int i)
{
	const struct hcase *c = &cases[i];
	struct rdma_conn_param p = rc_param(1);
	struct rdma_cm_id *id = rc_endpoint(addr, port, 0, 4, 6);
	struct siw_context *ctx;
	struct siw_qp *qp;
	struct siw_sqe sqe;
	struct ibv_wc wc;
	uint8_t *b = (uint8_t *)&sqe;
	int n;

	if (rdma_connect(id, &p))
		fail("%s: rdma_connect: %m", c->name);
	ctx = ctx_ibv2siw(id->verbs);
	if ((ctx->ext_caps & 0x1f) != 0x1f)
		fail("the context got %#" PRIx64 ", not the RFC 7306 extensions",
		     ctx->ext_caps);
	qp = qp_base2siw(id->qp);
	memset(&sqe, 0, sizeof(sqe));
	sqe.id = 0x4b0 + i;
	sqe.num_sge = c->num_sge;
	sqe.opcode = c->opcode;
	sqe.sge[0].length = c->sge0_len;
	if (c->off1)
		b[c->off1] = c->val1;
	if (raw_post(qp, &sqe, c->flags | SIW_WQE_SIGNALLED))
		fail("%s: the doorbell: %m", c->name);
	n = rdma_get_send_comp(id, &wc);
	if (n != 1)
		fail("%s: rdma_get_send_comp: %d %m", c->name, n);
	if (wc.wr_id != (uint64_t)sqe.id || wc.status != c->status ||
	    (c->wc_opcode != ANY_OPCODE && (int)wc.opcode != c->wc_opcode))
		fail("%s: completion %#" PRIx64 " status %s opcode %d, expected %#" PRIx64
		     " %s %d",
		     c->name, wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode,
		     (uint64_t)sqe.id, ibv_wc_status_str(c->status), c->wc_opcode);
	printf("siw_hostile client: %s: %s\n", c->name,
	       ibv_wc_status_str(wc.status));
	rdma_disconnect(id);
	rdma_destroy_ep(id);
}

int main(int argc, char **argv)
{
	unsigned int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "server")) {
		role = "server";
		return server(argv[2], argv[3]);
	}
	if (argc == 4 && !strcmp(argv[1], "client")) {
		role = "client";
		for (i = 0; i < NCASES; i++)
			one(argv[2], argv[3], i);
		printf("siw_hostile client: %u malformed SQEs, each completed with its error\n",
		       i);
		return 0;
	}
	fprintf(stderr, "usage: %s server|client ADDR PORT\n", argv[0]);
	return 2;
}
