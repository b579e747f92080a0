// SPDX-License-Identifier: GPL-2.0 or BSD-3-Clause
/*
 * RFC 7306 atomics and immediate data between two processes over rdma_cm,
 * every result and completion field checked (Documentation/infiniband/
 * rsiw-abi.rst), through ibv_post_send() as perftest posts:
 *
 *   siw_ext server ADDR PORT
 *   siw_ext client ADDR PORT [legacy]
 *
 * The server registers a buffer with every remote right (its first word
 * INIT), posts receives, accepts, and sends the buffer's address and rkey.
 * The client then, in order:
 *
 *   1. compare-and-swap INIT -> SWAP: returns INIT;
 *   2. fetch-and-add ADD: returns SWAP;
 *   3. compare-and-swap with a compare value that does not match: returns
 *      SWAP + ADD and changes nothing;
 *   4. Write with Immediate of 16 bytes at offset 64, immediate IMM_W;
 *   5. Send with Immediate of 8 bytes, immediate IMM_S;
 *   6. Write with Immediate of length 0 (the immediate alone), IMM_0;
 *   7. a Send of 8 bytes, "siw_ext!".
 *
 * The client checks each send completion's status and opcode and the
 * values the atomics returned; the server checks each receive completion
 * (opcode, IBV_WC_WITH_IMM, imm_data in network order, byte_len), the data,
 * and at the end the buffer: SWAP + ADD in the first word, the Write's 16
 * bytes at 64. Exit status 0 if all is as expected.
 *
 * "legacy": the client is a process of the stock provider (a legacy
 * context): it posts only the plain Send (7); the server's buffer is then
 * checked to be unchanged. Run with the server in the patched provider's VM
 * to show that a legacy context's peer is not affected.
 *
 *   siw_ext server ADDR PORT legacy-target
 *   siw_ext client ADDR PORT imm-to-legacy
 *
 * A QP of a legacy context takes no Immediate Data (its CQ could not show
 * it): the server, a process of the stock provider, expects its QP to fail
 * (the receive after the client's hello is flushed); the client, of the
 * patched provider, sends a Write with Immediate and then an RDMA Read,
 * which must not succeed (the server's Terminate ends the connection).
 *
 * Built with the provider by tests/provider/build.sh; run by the VM case
 * ext-user.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define INIT 0x0102030405060708ULL
#define SWAP 0x1111111111111111ULL
#define ADD 0x5ULL
#define IMM_W 0x11223344U
#define IMM_S 0x55667788U
#define IMM_0 0x99aabbccU
#define MEM 4096
#define WOFF 64

#define PROG "siw_ext"
#include "fail.h"
#include "cm.h"

struct info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t pad;
};

static const uint8_t wdata[16] = "0123456789abcdef";
static const uint8_t sdata[8] = { 's', 'e', 'n', 'd', 'i', 'm', 'm', '!' };
static const uint8_t ddata[8] = { 's', 'i', 'w', '_', 'e', 'x', 't', '!' };

static void recv_wc(struct rdma_cm_id *id, struct ibv_wc *wc)
{
	int n = rdma_get_recv_comp(id, wc);

	if (n != 1)
		fail("rdma_get_recv_comp: %d %m", n);
	if (wc->status != IBV_WC_SUCCESS)
		fail("receive %" PRIu64 ": status %s", wc->wr_id,
		     ibv_wc_status_str(wc->status));
}

static void send_wc(struct rdma_cm_id *id, uint64_t wr_id,
		    enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc;
	int n = rdma_get_send_comp(id, &wc);

	if (n != 1)
		fail("rdma_get_send_comp: %d %m", n);
	if (wc.status != IBV_WC_SUCCESS)
		fail("work request %" PRIu64 ": status %s", wc.wr_id,
		     ibv_wc_status_str(wc.status));
	if (wc.wr_id != wr_id || wc.opcode != opcode)
		fail("work request %" PRIu64 " opcode %d, expected %" PRIu64
		     " opcode %d",
		     wc.wr_id, wc.opcode, wr_id, opcode);
}

/* Checks a receive completion; imm is compared only with IBV_WC_WITH_IMM */
static void expect_recv(struct rdma_cm_id *id, enum ibv_wc_opcode opcode,
			int with_imm, uint32_t imm, uint32_t len)
{
	struct ibv_wc wc;

	recv_wc(id, &wc);
	if (wc.opcode != opcode)
		fail("receive %" PRIu64 ": opcode %d, expected %d", wc.wr_id,
		     wc.opcode, opcode);
	if (!!(wc.wc_flags & IBV_WC_WITH_IMM) != with_imm)
		fail("receive %" PRIu64 ": wc_flags %#x", wc.wr_id,
		     wc.wc_flags);
	if (with_imm && wc.imm_data != htonl(imm))
		fail("receive %" PRIu64 ": imm_data %#x, expected %#x (network order)",
		     wc.wr_id, ntohl(wc.imm_data), imm);
	if (wc.byte_len != len)
		fail("receive %" PRIu64 ": byte_len %u, expected %u", wc.wr_id,
		     wc.byte_len, len);
}

static int server(const char *addr, const char *port, int target)
{
	struct rdma_cm_id *lid, *id;
	struct rdma_conn_param p = rc_param(1);
	struct ibv_mr *mr, *rmr, *imr;
	uint8_t *mem, rbuf[8][16] = {};
	struct info info;
	uint64_t word;
	int i, legacy;

	lid = rc_endpoint(addr, port, 1, 16, 1);
	if (rdma_listen(lid, 1))
		fail("rdma_listen: %m");
	printf("siw_ext server: listening\n");
	fflush(stdout);
	if (rdma_get_request(lid, &id))
		fail("rdma_get_request: %m");
	mem = calloc(1, MEM);
	if (!mem)
		fail("calloc");
	memcpy(mem, &(uint64_t){ INIT }, 8);
	mr = ibv_reg_mr(id->pd, mem, MEM,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		fail("ibv_reg_mr with remote atomic access: %m");
	rmr = rdma_reg_msgs(id, rbuf, sizeof(rbuf));
	info.addr = (uintptr_t)mem;
	info.rkey = mr->rkey;
	info.pad = 0;
	imr = rdma_reg_msgs(id, &info, sizeof(info));
	if (!rmr || !imr)
		fail("rdma_reg_msgs: %m");
	for (i = 0; i < 8; i++)
		if (rdma_post_recv(id, (void *)(uintptr_t)i, rbuf[i],
				   sizeof(rbuf[i]), rmr))
			fail("rdma_post_recv: %m");
	if (rdma_accept(id, &p))
		fail("rdma_accept: %m");
	if (rdma_post_send(id, NULL, &info, sizeof(info), imr, 0))
		fail("rdma_post_send: %m");
	send_wc(id, 0, IBV_WC_SEND);

	/* The first receive tells the client's kind: a legacy one sends "legacy!!" */
	{
		struct ibv_wc wc;

		recv_wc(id, &wc);
		legacy = wc.byte_len == 8 &&
			 !memcmp(rbuf[wc.wr_id], "legacy!!", 8);
		if (!legacy && (wc.byte_len != 8 ||
				memcmp(rbuf[wc.wr_id], "extended", 8)))
			fail("the client's hello: %u bytes", wc.byte_len);
	}
	if (target) {
		struct ibv_wc wc;
		int n = rdma_get_recv_comp(id, &wc);

		if (n != 1)
			fail("rdma_get_recv_comp: %d %m", n);
		if (wc.status == IBV_WC_SUCCESS)
			fail("a receive completed (opcode %d, %u bytes) after Immediate Data",
			     wc.opcode, wc.byte_len);
		printf("siw_ext server: the QP took no Immediate Data: receive %s\n",
		       ibv_wc_status_str(wc.status));
		rdma_disconnect(id);
		return 0;
	}
	if (!legacy) {
		expect_recv(id, IBV_WC_RECV_RDMA_WITH_IMM, 1, IMM_W,
			    sizeof(wdata));
		expect_recv(id, IBV_WC_RECV, 1, IMM_S, sizeof(sdata));
		if (memcmp(rbuf[2], sdata, sizeof(sdata)))
			fail("the Send with Immediate's data");
		expect_recv(id, IBV_WC_RECV_RDMA_WITH_IMM, 1, IMM_0, 0);
	}
	expect_recv(id, IBV_WC_RECV, 0, 0, sizeof(ddata));
	if (memcmp(rbuf[legacy ? 1 : 4], ddata, sizeof(ddata)))
		fail("the last Send's data");
	memcpy(&word, mem, 8);
	if (word != (legacy ? INIT : SWAP + ADD))
		fail("the word is %#" PRIx64 ", expected %#llx", word,
		     legacy ? INIT : SWAP + ADD);
	if (!legacy && memcmp(mem + WOFF, wdata, sizeof(wdata)))
		fail("the Write with Immediate's data");
	printf("siw_ext server: %s client: all completions, the word (%#" PRIx64
	       ") and the data as expected\n",
	       legacy ? "legacy" : "extended", word);
	rc_close(id, lid, (struct ibv_mr *[]){ imr, rmr, mr }, 3);
	free(mem);
	return 0;
}

static void post(struct rdma_cm_id *id, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	wr->send_flags |= IBV_SEND_SIGNALED;
	if (ibv_post_send(id->qp, wr, &bad))
		fail("ibv_post_send of work request %" PRIu64 ": %m",
		     wr->wr_id);
}

static void atomic(struct rdma_cm_id *id, struct ibv_mr *mr, uint64_t *res,
		   const struct info *info, uint64_t wr_id,
		   enum ibv_wr_opcode op, uint64_t compare_add, uint64_t swap,
		   uint64_t want)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)res, .length = 8, .lkey = mr->lkey
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op
	};

	*res = 0xdeadbeefdeadbeefULL;
	wr.wr.atomic.remote_addr = info->addr;
	wr.wr.atomic.rkey = info->rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	post(id, &wr);
	send_wc(id, wr_id, op == IBV_WR_ATOMIC_CMP_AND_SWP ?
				   IBV_WC_COMP_SWAP :
				   IBV_WC_FETCH_ADD);
	if (*res != want)
		fail("atomic %" PRIu64 " returned %#" PRIx64
		     ", expected %#" PRIx64,
		     wr_id, *res, want);
}

static int client(const char *addr, const char *port, int legacy,
		  int imm_to_legacy)
{
	struct rdma_conn_param p = rc_param(1);
	struct rdma_cm_id *id = rc_endpoint(addr, port, 0, 16, 1);
	struct ibv_mr *mr;
	struct {
		struct info info;
		uint64_t res;
		uint8_t w[16], s[8], d[8];
		char hello[8];
	} *b;
	struct ibv_sge sge;
	struct ibv_send_wr wr;

	b = calloc(1, sizeof(*b));
	if (!b)
		fail("calloc");
	mr = ibv_reg_mr(id->pd, b, sizeof(*b), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		fail("ibv_reg_mr: %m");
	memcpy(b->w, wdata, sizeof(wdata));
	memcpy(b->s, sdata, sizeof(sdata));
	memcpy(b->d, ddata, sizeof(ddata));
	memcpy(b->hello, legacy || imm_to_legacy ? "legacy!!" : "extended", 8);
	if (rdma_post_recv(id, NULL, &b->info, sizeof(b->info), mr))
		fail("rdma_post_recv: %m");
	if (rdma_connect(id, &p))
		fail("rdma_connect: %m");
	{
		struct ibv_wc wc;

		recv_wc(id, &wc);
		if (wc.byte_len != sizeof(b->info))
			fail("the server's buffer: %u bytes", wc.byte_len);
	}
	if (rdma_post_send(id, (void *)1, b->hello, 8, mr, 0))
		fail("rdma_post_send: %m");
	send_wc(id, 1, IBV_WC_SEND);

	if (imm_to_legacy) {
		struct ibv_wc wc;
		int n;

		sge = (struct ibv_sge){ (uintptr_t)b->w, sizeof(b->w),
					mr->lkey };
		wr = (struct ibv_send_wr){ .wr_id = 20, .sg_list = &sge,
					   .num_sge = 1,
					   .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					   .imm_data = htonl(IMM_W) };
		wr.wr.rdma.remote_addr = b->info.addr + WOFF;
		wr.wr.rdma.rkey = b->info.rkey;
		post(id, &wr);
		sge = (struct ibv_sge){ (uintptr_t)&b->res, 8, mr->lkey };
		wr = (struct ibv_send_wr){ .wr_id = 21, .sg_list = &sge,
					   .num_sge = 1,
					   .opcode = IBV_WR_RDMA_READ };
		wr.wr.rdma.remote_addr = b->info.addr;
		wr.wr.rdma.rkey = b->info.rkey;
		post(id, &wr);
		/* The Write itself may complete before the Terminate arrives */
		do {
			n = rdma_get_send_comp(id, &wc);
			if (n != 1)
				fail("rdma_get_send_comp: %d %m", n);
		} while (wc.wr_id != 21);
		if (wc.status == IBV_WC_SUCCESS)
			fail("the Read after Immediate Data to a legacy QP succeeded");
		printf("siw_ext client: the legacy QP refused Immediate Data: Read %s\n",
		       ibv_wc_status_str(wc.status));
		rdma_destroy_ep(id);
		return 0;
	}
	if (!legacy) {
		atomic(id, mr, &b->res, &b->info, 10,
		       IBV_WR_ATOMIC_CMP_AND_SWP, INIT, SWAP, INIT);
		atomic(id, mr, &b->res, &b->info, 11,
		       IBV_WR_ATOMIC_FETCH_AND_ADD, ADD, 0, SWAP);
		atomic(id, mr, &b->res, &b->info, 12,
		       IBV_WR_ATOMIC_CMP_AND_SWP, INIT, 0, SWAP + ADD);

		sge = (struct ibv_sge){ (uintptr_t)b->w, sizeof(b->w),
					mr->lkey };
		wr = (struct ibv_send_wr){ .wr_id = 13, .sg_list = &sge,
					   .num_sge = 1,
					   .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					   .imm_data = htonl(IMM_W) };
		wr.wr.rdma.remote_addr = b->info.addr + WOFF;
		wr.wr.rdma.rkey = b->info.rkey;
		post(id, &wr);
		send_wc(id, 13, IBV_WC_RDMA_WRITE);

		sge = (struct ibv_sge){ (uintptr_t)b->s, sizeof(b->s),
					mr->lkey };
		wr = (struct ibv_send_wr){ .wr_id = 14, .sg_list = &sge,
					   .num_sge = 1,
					   .opcode = IBV_WR_SEND_WITH_IMM,
					   .imm_data = htonl(IMM_S) };
		post(id, &wr);
		send_wc(id, 14, IBV_WC_SEND);

		wr = (struct ibv_send_wr){ .wr_id = 15, .num_sge = 0,
					   .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					   .imm_data = htonl(IMM_0) };
		wr.wr.rdma.remote_addr = b->info.addr + WOFF;
		wr.wr.rdma.rkey = b->info.rkey;
		post(id, &wr);
		send_wc(id, 15, IBV_WC_RDMA_WRITE);
	}
	if (rdma_post_send(id, (void *)16, b->d, sizeof(b->d), mr, 0))
		fail("rdma_post_send: %m");
	send_wc(id, 16, IBV_WC_SEND);
	printf("siw_ext client: %s: all completions and results as expected\n",
	       legacy ? "legacy" : "extended");
	/* The server disconnects once it has checked everything */
	{
		struct rdma_cm_event *ev;

		if (rdma_get_cm_event(id->channel, &ev) == 0)
			rdma_ack_cm_event(ev);
	}
	ibv_dereg_mr(mr);
	rdma_destroy_ep(id);
	free(b);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 4 && !strcmp(argv[1], "server")) {
		role = "server";
		return server(argv[2], argv[3],
			      argc > 4 && !strcmp(argv[4], "legacy-target"));
	}
	if (argc >= 4 && !strcmp(argv[1], "client")) {
		role = "client";
		return client(argv[2], argv[3],
			      argc > 4 && !strcmp(argv[4], "legacy"),
			      argc > 4 && !strcmp(argv[4], "imm-to-legacy"));
	}
	fprintf(stderr,
		"usage: %s server ADDR PORT [legacy-target] | client ADDR PORT [legacy|imm-to-legacy]\n",
		argv[0]);
	return 2;
}
