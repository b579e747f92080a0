// SPDX-License-Identifier: GPL-2.0 or BSD-3-Clause
/*
 * The RDMA commit extensions (draft-talpey-rdma-commit-02) from user space,
 * through the patched siw provider (Documentation/infiniband/rsiw-abi.rst):
 * ibv_wr_flush(), ibv_wr_atomic_write() and siwdv_wr_verify(), every
 * completion and result checked. Checks are named after the spec map's IDs.
 *
 *   siw_commit_server ADDR PORT
 *   siw_commit client ADDR PORT
 *
 * The server (built without siwdv: it runs with either provider, the stock
 * one giving it a legacy context) registers a page with remote read, write,
 * atomic and IB_ACCESS_FLUSH_GLOBAL rights and one without the Flush right,
 * and serves one rdma_cm connection after the other: it sends their
 * addresses and rkeys, then waits for the client's "done" message (the
 * words of the page it must find: the server checks them itself) or for the
 * connection to fail, until a done message says it was the last.
 *
 * The client (the patched provider: an extended context with commit=1)
 * creates its QPs with siwdv_create_qp() (IBV_QP_EX_WITH_FLUSH,
 * _ATOMIC_WRITE, the atomics, SIWDV_QP_EX_WITH_VERIFY), ORD 2, and runs:
 *
 *   connection 1:
 *     FLUSH-03   a Write and a Flush (global, the Write's range) in one
 *                batch: IBV_WC_RDMA_WRITE, then IBV_WC_FLUSH;
 *     FLUSH-02   a Flush of the whole region with a garbage range;
 *     AWRITE-03  an Atomic Write: IBV_WC_ATOMIC_WRITE, and a Read of the
 *                target's 8 bytes returns them;
 *     AWRITE-02  an Atomic Write to a misaligned address: ibv_wr_complete()
 *                fails with EINVAL and the QP goes on;
 *     VERIFY-05  a Verify without a digest: SIWDV_WC_VERIFY, byte_len 4,
 *                the CRC32c of the range in the digest sink;
 *     VERIFY-06  a Write, a Flush and a Verify with the matching digest in
 *                one batch: the digest matches the new data;
 *     ATOM-01    fetch-and-add and compare-and-swap on the same page;
 *     CMT-02     Flush, Atomic Write, Verify, Flush, Atomic Write and a
 *                Read in one batch with ORD 2: all complete in order, the
 *                Read returns the last Atomic Write;
 *     CMT-02     twelve requests in one batch with ORD 2 (the server's IRD
 *                2): Reads, fetch-and-adds and compare-and-swaps mixed with
 *                Flushes, Atomic Writes and a Verify, all on one word. They
 *                share the two credits: a requester that had a third one
 *                outstanding would get the server's Terminate (0/2/07, D-08)
 *                and errors instead of completions. All complete in order
 *                and each atomic's result, the Verify and the last Read
 *                find the word as every request before them left it (a
 *                chain that any reordering breaks: the Verify's digest is
 *                of the Atomic Write just before it);
 *   then, one connection each, the refusals:
 *     VERIFY-04  a Verify with a wrong digest, an Atomic Write behind it:
 *                the Verify completes with IBV_WC_REM_OP_ERR, the Atomic
 *                Write is flushed and not performed (the next connection's
 *                done message has the server check the word);
 *     FLUSH-04   a Flush of the region without the Flush right:
 *                IBV_WC_REM_ACCESS_ERR;
 *     FLUSH-04   a Flush to persistence of the page (DRAM, so registered
 *                without IB_ACCESS_FLUSH_PERSISTENT, which the driver
 *                refuses for memory that is not persistent memory):
 *                IBV_WC_REM_ACCESS_ERR;
 *     AWRITE-01, AWRITE-02, VERIFY-01: SQEs written straight into the send
 *                ring (as a provider with bugs would): an Atomic Write with
 *                an SGE (a length other than 8), one to a misaligned
 *                address, a Verify whose digest is not of the context's
 *                verify_digest_len: each IBV_WC_LOC_QP_OP_ERR;
 *   and a last connection whose done message checks the words.
 *
 * The VM case commit-user runs the server with the patched provider (rsiw
 * to rsiw, both extended) and with the stock one (a legacy context is the
 * target of Flush, Atomic Write, Verify and atomics, issue 36).
 *
 * Built with the provider by tests/provider/build.sh (the client with
 * siw.c's flags, for siw.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <infiniband/verbs.h>

#ifdef SIW_COMMIT_CLIENT
#include "siw_abi.h"
#include "siw.h"
#include "siwdv.h"
#endif

#define MEM 4096
#define NCHK 7

/* Offsets in the server's page */
#define AW_OFF 0 /* Atomic Write (AWRITE-03) */
#define FA_OFF 16 /* fetch-and-add, compare-and-swap */
#define CMT_OFF 24 /* CMT-02's Atomic Writes */
#define MISM_OFF 32 /* the Atomic Write behind a failed Verify */
#define MIX_OFF 40 /* CMT-02's mixed batch */
#define W_OFF 256 /* Writes, Flushes and Verifies */
#define W_LEN 64

#define V_AW 0x0123456789abcdefULL
#define V_CMT1 0x1111111111111111ULL
#define V_CMT2 0x2222222222222222ULL
#define V_MISM 0x5a5a5a5a5a5a5a5aULL
#define FA_ADD 7ULL
#define CS_SWAP 0x77ULL

#define PROG "siw_commit"
#include "fail.h"
#include "cm.h"
#include "qpx.h"
#ifdef SIW_COMMIT_CLIENT
#include "ring.h"
#endif

struct info {
	uint64_t addr;
	uint32_t rkey; /* with IB_ACCESS_FLUSH_GLOBAL */
	uint32_t rkey_noflush; /* the same page without it */
	uint64_t addr_noflush;
};

/* The client's last message on a connection: words the server must have */
struct done {
	char tag[8]; /* "done" */
	uint32_t nchk;
	uint32_t last;
	struct {
		uint32_t off;
		uint32_t pad;
		uint64_t val;
	} chk[NCHK];
};

#ifndef SIW_COMMIT_CLIENT
/* --- the server: plain verbs, either provider ---------------------------- */

/*
 * The first receive completion (1: the done message, or a receive flushed)
 * or the peer's disconnection (0), whichever comes first. *gone tells
 * whether RDMA_CM_EVENT_DISCONNECTED was taken meanwhile (it may come
 * between two polls of the CQ, just after the done message): then
 * rdma_disconnect(), which waits for that event in synchronous mode, must
 * not be called.
 */
static int wait_done(struct rdma_cm_id *id, struct ibv_wc *wc, int *gone)
{
	struct pollfd pfd = { .fd = id->channel->fd, .events = POLLIN };
	time_t end = time(NULL) + 60;
	struct rdma_cm_event *ev;
	int n;

	*gone = 0;
	for (;;) {
		n = ibv_poll_cq(id->recv_cq, 1, wc);
		if (n < 0)
			fail("ibv_poll_cq: %d", n);
		if (n || *gone)
			return n;
		if (time(NULL) > end)
			fail("no done message and no disconnection in 60 s");
		if (poll(&pfd, 1, 10) > 0 && !rdma_get_cm_event(id->channel, &ev)) {
			*gone = ev->event == RDMA_CM_EVENT_DISCONNECTED;
			rdma_ack_cm_event(ev);
		}
	}
}

static int server(const char *addr, const char *port)
{
	struct rdma_cm_id *lid = rc_endpoint(addr, port, 1, 4, 1), *id;
	uint8_t *mem, *mem2;
	unsigned int conn, i;
	int last = 0;

	if (rdma_listen(lid, 1))
		fail("rdma_listen: %m");
	mem = aligned_alloc(MEM, MEM);
	mem2 = aligned_alloc(MEM, MEM);
	if (!mem || !mem2)
		fail("aligned_alloc");
	memset(mem, 0, MEM);
	memset(mem2, 0xee, MEM);
	printf("siw_commit server: listening\n");
	for (conn = 1; !last; conn++) {
		struct rdma_conn_param p = rc_param(2);
		struct ibv_mr *mr, *mr2, *rmr, *imr;
		struct done d[2] = {};
		struct info info;
		struct ibv_wc wc;
		int n, gone;

		if (rdma_get_request(lid, &id))
			fail("rdma_get_request %u: %m", conn);
		mr = ibv_reg_mr(id->pd, mem, MEM,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ |
					IBV_ACCESS_REMOTE_ATOMIC |
					IBV_ACCESS_FLUSH_GLOBAL);
		if (!mr)
			fail("ibv_reg_mr with IBV_ACCESS_FLUSH_GLOBAL: %m");
		mr2 = ibv_reg_mr(id->pd, mem2, MEM,
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					 IBV_ACCESS_REMOTE_READ);
		rmr = rdma_reg_msgs(id, d, sizeof(d));
		info = (struct info){ (uintptr_t)mem, mr ? mr->rkey : 0,
				      mr2 ? mr2->rkey : 0, (uintptr_t)mem2 };
		imr = rdma_reg_msgs(id, &info, sizeof(info));
		if (!mr2 || !rmr || !imr)
			fail("ibv_reg_mr: %m");
		for (i = 0; i < 2; i++)
			if (rdma_post_recv(id, (void *)(uintptr_t)i, &d[i],
					   sizeof(d[i]), rmr))
				fail("rdma_post_recv: %m");
		if (rdma_accept(id, &p))
			fail("rdma_accept %u: %m", conn);
		if (rdma_post_send(id, (void *)9, &info, sizeof(info), imr, 0))
			fail("rdma_post_send: %m");
		n = rdma_get_send_comp(id, &wc);
		if (n != 1 || wc.status != IBV_WC_SUCCESS)
			fail("connection %u: sending the page's keys: %d %s",
			     conn, n, n == 1 ? ibv_wc_status_str(wc.status) : "");
		/* The done message, or the connection failed */
		n = wait_done(id, &wc, &gone);
		if (n == 1 && wc.status == IBV_WC_SUCCESS) {
			struct done *m = &d[wc.wr_id & 1];

			if (wc.byte_len != sizeof(*m) || memcmp(m->tag, "done", 5) ||
			    m->nchk > NCHK)
				fail("connection %u: a done message of %u bytes",
				     conn, wc.byte_len);
			for (i = 0; i < m->nchk; i++) {
				uint64_t w;

				if (m->chk[i].off > MEM - 8)
					fail("offset %u", m->chk[i].off);
				memcpy(&w, mem + m->chk[i].off, 8);
				if (w != m->chk[i].val)
					fail("connection %u: the word at %u is %#" PRIx64
					     ", expected %#" PRIx64,
					     conn, m->chk[i].off, w, m->chk[i].val);
			}
			for (i = 0; i < MEM; i++)
				if (mem2[i] != 0xee)
					fail("the page without the Flush right changed at %u",
					     i);
			last = m->last;
			printf("siw_commit server: connection %u: %u words as expected%s\n",
			       conn, m->nchk, last ? " (last)" : "");
		} else {
			printf("siw_commit server: connection %u ended: %s\n", conn,
			       n == 1 ? ibv_wc_status_str(wc.status) :
					"disconnected");
		}
		/*
		 * A failed connection is destroyed without rdma_disconnect(),
		 * which waits for RDMA_CM_EVENT_DISCONNECTED in synchronous
		 * mode: rsiw does not report the peer's close on a connection
		 * it terminated (reported separately, not this test's subject).
		 */
		if (n == 1 && wc.status == IBV_WC_SUCCESS && !gone)
			rdma_disconnect(id);
		else
			printf("siw_commit server: connection %u: destroying it\n",
			       conn);
		rdma_dereg_mr(imr);
		rdma_dereg_mr(rmr);
		ibv_dereg_mr(mr2);
		ibv_dereg_mr(mr);
		rdma_destroy_ep(id);
	}
	rdma_destroy_ep(lid);
	printf("siw_commit server: %u connections, all checks passed\n",
	       conn - 1);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	role = "server";
	if (argc == 3)
		return server(argv[1], argv[2]);
	fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
	return 2;
}

#else
/* --- the client: the patched provider's ibv_wr_*() and siwdv -------------- */

struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct siwdv_qp_ex *dv;
	struct ibv_mr *mr;
	struct info info;
	struct {
		struct info info;
		uint8_t w[W_LEN];
		uint8_t digest[8];
		uint64_t res[8];
		uint64_t mix[8];
		struct done done;
	} *b;
};

/* CRC32c (Castagnoli, reflected, final XOR): rsiw's Verify digest */
static uint32_t crc32c(const uint8_t *p, size_t n)
{
	uint32_t c = ~0U;
	int k;

	while (n--) {
		c ^= *p++;
		for (k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78U & -(c & 1));
	}
	return ~c;
}

/* The digest as it is on the wire and in the sink: little-endian */
static void digest_of(const uint8_t *p, size_t n, uint8_t d[4])
{
	uint32_t c = crc32c(p, n);
	int i;

	for (i = 0; i < 4; i++)
		d[i] = c >> (8 * i);
}

static void poll_wc(struct conn *c, struct ibv_wc *wc)
{
	cq_next(c->cq, wc, 20);
}

/* The next completion must be wr_id's, with opcode and status (and byte_len, if not -1) */
static void expect(struct conn *c, const char *check, uint64_t wr_id,
		   int opcode, enum ibv_wc_status status, int len)
{
	struct ibv_wc wc;

	poll_wc(c, &wc);
	if (wc.wr_id != wr_id || wc.status != status ||
	    (status == IBV_WC_SUCCESS && (int)wc.opcode != opcode) ||
	    (len >= 0 && (int)wc.byte_len != len))
		fail("%s: completion %" PRIu64 " opcode %d status %s byte_len %u; expected %" PRIu64
		     " opcode %d status %s byte_len %d",
		     check, wc.wr_id, wc.opcode, ibv_wc_status_str(wc.status),
		     wc.byte_len, wr_id, opcode, ibv_wc_status_str(status), len);
}

static void pass(const char *check, const char *what)
{
	printf("siw_commit client: PASS %s: %s\n", check, what);
}

static void conn_open(struct conn *c, const char *addr, const char *port)
{
	struct rdma_conn_param p = rc_param(2);
	struct ibv_qp_init_attr_ex qa;
	struct siwdv_qp_init_attr dv = {};

	memset(c, 0, sizeof(*c));
	qpx_prepare(addr, port,
		    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
			    IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_FLUSH |
			    IBV_QP_EX_WITH_ATOMIC_WRITE |
			    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
		    &c->id, &c->pd, &c->cq, &qa);
	dv.comp_mask = SIWDV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS;
	dv.send_ops_flags = SIWDV_QP_EX_WITH_VERIFY;
	c->qp = siwdv_create_qp(c->id->verbs, &qa, &dv);
	if (!c->qp)
		fail("siwdv_create_qp with Flush, Atomic Write and Verify: %m");
	c->qpx = ibv_qp_to_qp_ex(c->qp);
	c->dv = siwdv_qp_ex_from_ibv_qp_ex(c->qpx);
	if (!c->qpx || !c->dv)
		fail("no ibv_qp_ex or siwdv_qp_ex");
	c->b = qpx_zalloc(sizeof(*c->b));
	c->mr = qpx_connect(c->id, c->qp, c->pd, c->cq, c->b, sizeof(*c->b),
			    &c->b->info, sizeof(c->b->info), &p, 20);
	c->info = c->b->info;
}

/* graceful: rdma_disconnect() first (not on a failed connection, see server()) */
static void conn_close(struct conn *c, int graceful)
{
	if (graceful)
		rdma_disconnect(c->id);
	qpx_teardown(c->id, c->qp, c->mr, c->cq, c->pd);
	free(c->b);
}

/* Work requests, between start() and complete() */
static void start(struct conn *c)
{
	ibv_wr_start(c->qpx);
}

static void wr(struct conn *c, uint64_t id)
{
	qpx_wr(c->qpx, id);
}

static void complete(struct conn *c, const char *check)
{
	qpx_complete(c->qpx, check);
}

static void wr_write(struct conn *c, uint64_t id, uint32_t off)
{
	wr(c, id);
	ibv_wr_rdma_write(c->qpx, c->info.rkey, c->info.addr + off);
	ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)c->b->w, W_LEN);
}

static void wr_flush(struct conn *c, uint64_t id, uint32_t rkey, uint64_t addr,
		     size_t len, uint8_t type, uint8_t level)
{
	wr(c, id);
	ibv_wr_flush(c->qpx, rkey, addr, len, type, level);
}

static void wr_awrite(struct conn *c, uint64_t id, uint32_t off, uint64_t v)
{
	wr(c, id);
	ibv_wr_atomic_write(c->qpx, c->info.rkey, c->info.addr + off, &v);
}

static void wr_verify(struct conn *c, uint64_t id, uint32_t off, uint32_t len,
		      const uint8_t *digest, size_t dlen)
{
	memset(c->b->digest, 0xcc, sizeof(c->b->digest));
	wr(c, id);
	siwdv_wr_verify(c->dv, c->info.rkey, c->info.addr + off, len, digest,
			dlen);
	ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)c->b->digest,
		       sizeof(c->b->digest));
}

static void wr_read(struct conn *c, uint64_t id, uint32_t off, uint64_t *dst)
{
	*dst = 0xdeaddeaddeaddeadULL;
	wr(c, id);
	ibv_wr_rdma_read(c->qpx, c->info.rkey, c->info.addr + off);
	ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)dst, 8);
}

static void check_digest(struct conn *c, const char *check, const uint8_t *want)
{
	if (memcmp(c->b->digest, want, 4))
		fail("%s: the digest sink has %02x%02x%02x%02x, expected %02x%02x%02x%02x",
		     check, c->b->digest[0], c->b->digest[1], c->b->digest[2],
		     c->b->digest[3], want[0], want[1], want[2], want[3]);
	if (c->b->digest[4] != 0xcc)
		fail("%s: more than the digest's 4 bytes in the sink", check);
}

/* The done message: the server checks these words of its page */
static void done(struct conn *c, int last, unsigned int n,
		 const uint32_t *off, const uint64_t *val)
{
	struct done *d = &c->b->done;
	unsigned int i;

	memset(d, 0, sizeof(*d));
	memcpy(d->tag, "done", 5);
	d->nchk = n;
	d->last = last;
	for (i = 0; i < n; i++) {
		d->chk[i].off = off[i];
		d->chk[i].val = val[i];
	}
	start(c);
	wr(c, 90);
	ibv_wr_send(c->qpx);
	ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)d, sizeof(*d));
	complete(c, "done");
	expect(c, "done", 90, IBV_WC_SEND, IBV_WC_SUCCESS, -1);
}

/* The word at MIX_OFF as mixed_ord() leaves it */
#define MIX_END 0x41ULL

/*
 * CMT-02: twelve requests in one batch, ORD 2 against the server's IRD 2:
 * Reads and atomics share the credits with Flushes, Atomic Writes and a
 * Verify. The requester must hold each request back until a credit is free
 * (the server refuses a third outstanding one with a Terminate). The
 * atomics, the Atomic Writes and the Verify chain on the word at MIX_OFF (0
 * before): each result is the word as every request before it left it. A
 * Read's data may be read after later requests executed (RFC 7306 section
 * 7: only a fence orders an atomic after a Read), so the Reads in the middle
 * read the Atomic Write word of AWRITE-03, which nothing changes, and only
 * the last request reads the chain's word.
 */
static void mixed_ord(struct conn *c)
{
	uint64_t *m = c->b->mix, aw1 = 0x20, aw2 = 0x40;
	uint8_t d[4];
	unsigned int i;

	for (i = 0; i < 8; i++)
		m[i] = 0xdeaddeaddeaddeadULL;
	digest_of((const uint8_t *)&aw1, 8, d);
	start(c);
	wr_read(c, 50, AW_OFF, &m[0]);
	wr(c, 51);
	ibv_wr_atomic_fetch_add(c->qpx, c->info.rkey, c->info.addr + MIX_OFF, 1);
	ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)&m[1], 8);
	wr_flush(c, 52, c->info.rkey, c->info.addr + MIX_OFF, 8,
		 IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	wr(c, 53);
	ibv_wr_atomic_cmp_swp(c->qpx, c->info.rkey, c->info.addr + MIX_OFF, 1,
			      0x10);
	ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)&m[2], 8);
	wr_awrite(c, 54, MIX_OFF, aw1);
	wr_verify(c, 55, MIX_OFF, 8, d, 4);
	wr_read(c, 56, AW_OFF, &m[3]);
	wr(c, 57);
	ibv_wr_atomic_fetch_add(c->qpx, c->info.rkey, c->info.addr + MIX_OFF, 3);
	ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)&m[4], 8);
	wr_awrite(c, 58, MIX_OFF, aw2);
	wr_flush(c, 59, c->info.rkey, 0, 0, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR);
	wr(c, 60);
	ibv_wr_atomic_cmp_swp(c->qpx, c->info.rkey, c->info.addr + MIX_OFF,
			      aw2, MIX_END);
	ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)&m[5], 8);
	wr_read(c, 61, MIX_OFF, &m[6]);
	complete(c, "CMT-02");
	expect(c, "CMT-02", 50, IBV_WC_RDMA_READ, IBV_WC_SUCCESS, 8);
	expect(c, "CMT-02", 51, IBV_WC_FETCH_ADD, IBV_WC_SUCCESS, 8);
	expect(c, "CMT-02", 52, IBV_WC_FLUSH, IBV_WC_SUCCESS, -1);
	expect(c, "CMT-02", 53, IBV_WC_COMP_SWAP, IBV_WC_SUCCESS, 8);
	expect(c, "CMT-02", 54, IBV_WC_ATOMIC_WRITE, IBV_WC_SUCCESS, -1);
	expect(c, "CMT-02", 55, SIWDV_WC_VERIFY, IBV_WC_SUCCESS, 4);
	expect(c, "CMT-02", 56, IBV_WC_RDMA_READ, IBV_WC_SUCCESS, 8);
	expect(c, "CMT-02", 57, IBV_WC_FETCH_ADD, IBV_WC_SUCCESS, 8);
	expect(c, "CMT-02", 58, IBV_WC_ATOMIC_WRITE, IBV_WC_SUCCESS, -1);
	expect(c, "CMT-02", 59, IBV_WC_FLUSH, IBV_WC_SUCCESS, -1);
	expect(c, "CMT-02", 60, IBV_WC_COMP_SWAP, IBV_WC_SUCCESS, 8);
	expect(c, "CMT-02", 61, IBV_WC_RDMA_READ, IBV_WC_SUCCESS, 8);
	check_digest(c, "CMT-02", d);
	{
		const uint64_t want[] = { V_AW, 0, 1, V_AW, aw1, aw2, MIX_END };

		for (i = 0; i < 7; i++)
			if (m[i] != want[i])
				fail("CMT-02: result %u of the mixed batch is %#" PRIx64
				     ", expected %#" PRIx64,
				     i, m[i], want[i]);
	}
	pass("CMT-02", "Reads, atomics, Flushes, Atomic Writes and a Verify: 12 with ORD 2, in order");
}

static void main_connection(const char *addr, const char *port)
{
	struct conn c;
	uint8_t d1[4], d2[4];
	uint64_t *res;
	int i, rv;

	conn_open(&c, addr, port);
	res = c.b->res;

	/* FLUSH-03: a Write, then a Flush of its range, in one batch */
	for (i = 0; i < W_LEN; i++)
		c.b->w[i] = (uint8_t)(i * 7 + 1);
	digest_of(c.b->w, W_LEN, d1);
	start(&c);
	wr_write(&c, 1, W_OFF);
	wr_flush(&c, 2, c.info.rkey, c.info.addr + W_OFF, W_LEN,
		 IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	complete(&c, "FLUSH-03");
	expect(&c, "FLUSH-03", 1, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS, -1);
	expect(&c, "FLUSH-03", 2, IBV_WC_FLUSH, IBV_WC_SUCCESS, -1);
	pass("FLUSH-03", "Write then Flush (global): IBV_WC_FLUSH");

	/* FLUSH-02: the whole region, the range ignored */
	start(&c);
	wr_flush(&c, 3, c.info.rkey, 0xdead0000beefULL, 0x12345678,
		 IBV_FLUSH_GLOBAL, IBV_FLUSH_MR);
	complete(&c, "FLUSH-02");
	expect(&c, "FLUSH-02", 3, IBV_WC_FLUSH, IBV_WC_SUCCESS, -1);
	pass("FLUSH-02", "Flush of the whole region with a garbage range");

	/* AWRITE-03: the 8 bytes land whole; read them back */
	start(&c);
	wr_awrite(&c, 4, AW_OFF, V_AW);
	wr_read(&c, 5, AW_OFF, &res[0]);
	complete(&c, "AWRITE-03");
	expect(&c, "AWRITE-03", 4, IBV_WC_ATOMIC_WRITE, IBV_WC_SUCCESS, -1);
	expect(&c, "AWRITE-03", 5, IBV_WC_RDMA_READ, IBV_WC_SUCCESS, 8);
	if (res[0] != V_AW)
		fail("AWRITE-03: the target has %#" PRIx64 ", expected %#llx",
		     res[0], V_AW);
	pass("AWRITE-03", "IBV_WC_ATOMIC_WRITE, the target's 8 bytes read back");

	/* AWRITE-02: a misaligned target is refused when posted */
	start(&c);
	wr_awrite(&c, 6, AW_OFF + 4, V_CMT1);
	rv = ibv_wr_complete(c.qpx);
	if (rv != EINVAL)
		fail("AWRITE-02: ibv_wr_complete of a misaligned Atomic Write: %d, expected EINVAL",
		     rv);
	pass("AWRITE-02", "a misaligned Atomic Write: ibv_wr_complete() EINVAL");

	/* VERIFY-05: no digest: the responder returns its own */
	start(&c);
	wr_verify(&c, 7, W_OFF, W_LEN, NULL, 0);
	complete(&c, "VERIFY-05");
	expect(&c, "VERIFY-05", 7, SIWDV_WC_VERIFY, IBV_WC_SUCCESS, 4);
	check_digest(&c, "VERIFY-05", d1);
	pass("VERIFY-05", "Verify without a digest: SIWDV_WC_VERIFY, the CRC32c in the sink");

	/* VERIFY-06: Write, Flush, Verify with the matching digest */
	for (i = 0; i < W_LEN; i++)
		c.b->w[i] = (uint8_t)(0xa0 ^ i);
	digest_of(c.b->w, W_LEN, d2);
	start(&c);
	wr_write(&c, 8, W_OFF);
	wr_flush(&c, 9, c.info.rkey, c.info.addr + W_OFF, W_LEN,
		 IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	wr_verify(&c, 10, W_OFF, W_LEN, d2, 4);
	complete(&c, "VERIFY-06");
	expect(&c, "VERIFY-06", 8, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS, -1);
	expect(&c, "VERIFY-06", 9, IBV_WC_FLUSH, IBV_WC_SUCCESS, -1);
	expect(&c, "VERIFY-06", 10, SIWDV_WC_VERIFY, IBV_WC_SUCCESS, 4);
	check_digest(&c, "VERIFY-06", d2);
	pass("VERIFY-06", "Write, Flush, Verify with the matching digest");

	/* ATOM-01: atomics on the same page */
	start(&c);
	wr(&c, 11);
	ibv_wr_atomic_fetch_add(c.qpx, c.info.rkey, c.info.addr + FA_OFF, FA_ADD);
	ibv_wr_set_sge(c.qpx, c.mr->lkey, (uintptr_t)&res[1], 8);
	wr(&c, 12);
	ibv_wr_atomic_cmp_swp(c.qpx, c.info.rkey, c.info.addr + FA_OFF, FA_ADD,
			      CS_SWAP);
	ibv_wr_set_sge(c.qpx, c.mr->lkey, (uintptr_t)&res[2], 8);
	complete(&c, "ATOM-01");
	expect(&c, "ATOM-01", 11, IBV_WC_FETCH_ADD, IBV_WC_SUCCESS, 8);
	expect(&c, "ATOM-01", 12, IBV_WC_COMP_SWAP, IBV_WC_SUCCESS, 8);
	if (res[1] != 0 || res[2] != FA_ADD)
		fail("ATOM-01: fetch-and-add returned %#" PRIx64
		     ", compare-and-swap %#" PRIx64,
		     res[1], res[2]);
	pass("ATOM-01", "fetch-and-add and compare-and-swap");

	/* CMT-02: six requests with ORD 2, in order */
	start(&c);
	wr_flush(&c, 20, c.info.rkey, c.info.addr, MEM, IBV_FLUSH_GLOBAL,
		 IBV_FLUSH_RANGE);
	wr_awrite(&c, 21, CMT_OFF, V_CMT1);
	wr_verify(&c, 22, W_OFF, W_LEN, NULL, 0);
	wr_flush(&c, 23, c.info.rkey, c.info.addr, 0, IBV_FLUSH_GLOBAL,
		 IBV_FLUSH_MR);
	wr_awrite(&c, 24, CMT_OFF, V_CMT2);
	wr_read(&c, 25, CMT_OFF, &res[3]);
	complete(&c, "CMT-02");
	expect(&c, "CMT-02", 20, IBV_WC_FLUSH, IBV_WC_SUCCESS, -1);
	expect(&c, "CMT-02", 21, IBV_WC_ATOMIC_WRITE, IBV_WC_SUCCESS, -1);
	expect(&c, "CMT-02", 22, SIWDV_WC_VERIFY, IBV_WC_SUCCESS, 4);
	expect(&c, "CMT-02", 23, IBV_WC_FLUSH, IBV_WC_SUCCESS, -1);
	expect(&c, "CMT-02", 24, IBV_WC_ATOMIC_WRITE, IBV_WC_SUCCESS, -1);
	expect(&c, "CMT-02", 25, IBV_WC_RDMA_READ, IBV_WC_SUCCESS, 8);
	check_digest(&c, "CMT-02", d2);
	if (res[3] != V_CMT2)
		fail("CMT-02: the Read returned %#" PRIx64, res[3]);
	pass("CMT-02", "Flush, Atomic Write, Verify, Flush, Atomic Write, Read with ORD 2: in order");

	mixed_ord(&c);

	{
		uint32_t off[] = { AW_OFF, FA_OFF, CMT_OFF, MISM_OFF, W_OFF,
				   W_OFF + 56, MIX_OFF };
		uint64_t val[7];

		val[0] = V_AW;
		val[1] = CS_SWAP;
		val[2] = V_CMT2;
		val[3] = 0;
		memcpy(&val[4], c.b->w, 8);
		memcpy(&val[5], c.b->w + 56, 8);
		val[6] = MIX_END;
		done(&c, 0, 7, off, val);
	}
	conn_close(&c, 1);
}

/* A connection whose batch fails: the first completion must be check's */
static void failing(const char *addr, const char *port, const char *check,
		    const char *what, int kind)
{
	uint8_t wrong[4] = { 1, 2, 3, 4 };
	struct conn c;

	conn_open(&c, addr, port);
	start(&c);
	switch (kind) {
	case 0: /* VERIFY-04: a mismatch, an Atomic Write behind it */
		wr_verify(&c, 30, W_OFF, W_LEN, wrong, 4);
		wr_awrite(&c, 31, MISM_OFF, V_MISM);
		complete(&c, check);
		expect(&c, check, 30, SIWDV_WC_VERIFY, IBV_WC_REM_OP_ERR, -1);
		expect(&c, check, 31, IBV_WC_ATOMIC_WRITE, IBV_WC_WR_FLUSH_ERR,
		       -1);
		break;
	case 1: /* FLUSH-04: no Flush right */
		wr_flush(&c, 32, c.info.rkey_noflush, c.info.addr_noflush, 64,
			 IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
		complete(&c, check);
		expect(&c, check, 32, IBV_WC_FLUSH, IBV_WC_REM_ACCESS_ERR, -1);
		break;
	default: /* FLUSH-04: persistence, a right DRAM does not get */
		wr_flush(&c, 33, c.info.rkey, c.info.addr, 64,
			 IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE);
		complete(&c, check);
		expect(&c, check, 33, IBV_WC_FLUSH, IBV_WC_REM_ACCESS_ERR, -1);
		break;
	}
	pass(check, what);
	conn_close(&c, 0);
}

/* An SQE written straight into the ring: it completes with IBV_WC_LOC_QP_OP_ERR */
static void hostile(const char *addr, const char *port, const char *check,
		    const char *what, int kind)
{
	struct siw_sqe sqe = {};
	struct siw_context *ctx;
	struct siw_qp *qp;
	struct conn c;

	conn_open(&c, addr, port);
	ctx = ctx_ibv2siw(c.id->verbs);
	if (ctx->verify_digest_len != 4)
		fail("verify_digest_len %u, expected 4", ctx->verify_digest_len);
	qp = qp_base2siw(c.qp);
	sqe.id = 40 + kind;
	sqe.rkey = c.info.rkey;
	sqe.raddr = c.info.addr + AW_OFF;
	switch (kind) {
	case 0: /* AWRITE-01: an SGE: a length other than 8 */
		sqe.opcode = SIW_OP_ATOMIC_WRITE;
		sqe.num_sge = 1;
		sqe.sge[0].laddr = (uintptr_t)c.b->res;
		sqe.sge[0].length = 4;
		sqe.sge[0].lkey = c.mr->lkey;
		break;
	case 1: /* AWRITE-02: misaligned */
		sqe.opcode = SIW_OP_ATOMIC_WRITE;
		sqe.raddr += 4;
		memcpy(sqe.atomic_write, "rsiwrsiw", 8);
		break;
	default: /* VERIFY-01: a digest of 5 bytes, not verify_digest_len */
		sqe.opcode = SIW_OP_VERIFY;
		sqe.raddr = c.info.addr + W_OFF;
		sqe.verify.length = W_LEN;
		sqe.verify.digest_len = 5;
		break;
	}
	if (raw_post(qp, &sqe, SIW_WQE_SIGNALLED))
		fail("%s: the doorbell: %m", check);
	qp->wr_put = qp->sq_put;
	expect(&c, check, sqe.id, 0, IBV_WC_LOC_QP_OP_ERR, -1);
	pass(check, what);
	conn_close(&c, 0);
}

static int client(const char *addr, const char *port)
{
	struct siwdv_context_attr ca = {};
	struct conn c;

	main_connection(addr, port);
	failing(addr, port, "VERIFY-04",
		"a wrong digest: IBV_WC_REM_OP_ERR, the Atomic Write behind it flushed",
		0);
	failing(addr, port, "FLUSH-04",
		"Flush without the Flush right: IBV_WC_REM_ACCESS_ERR", 1);
	failing(addr, port, "FLUSH-04",
		"Flush to persistence of DRAM: IBV_WC_REM_ACCESS_ERR", 2);
	hostile(addr, port, "AWRITE-01",
		"an Atomic Write SQE with an SGE of 4 bytes: IBV_WC_LOC_QP_OP_ERR", 0);
	hostile(addr, port, "AWRITE-02",
		"an Atomic Write SQE to a misaligned address: IBV_WC_LOC_QP_OP_ERR",
		1);
	hostile(addr, port, "VERIFY-01",
		"a Verify SQE with a 5-byte digest: IBV_WC_LOC_QP_OP_ERR", 2);

	/* The last connection: nothing above changed the page behind our back */
	conn_open(&c, addr, port);
	if (siwdv_query_context(c.id->verbs, &ca, sizeof(ca)))
		fail("siwdv_query_context: %m");
	if (ca.verify_digest_len != 4)
		fail("verify_digest_len %u", ca.verify_digest_len);
	{
		uint32_t off[] = { AW_OFF, FA_OFF, CMT_OFF, MISM_OFF };
		uint64_t val[] = { V_AW, CS_SWAP, V_CMT2, 0 };

		done(&c, 1, 4, off, val);
	}
	pass("VERIFY-04", "the Atomic Write behind the failed Verify was not performed");
	conn_close(&c, 1);
	printf("siw_commit client: all checks passed\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	role = "client";
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	fprintf(stderr, "usage: %s client ADDR PORT\n", argv[0]);
	return 2;
}
#endif
