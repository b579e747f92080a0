// SPDX-License-Identifier: GPL-2.0 or BSD-3-Clause
/*
 * Unit test of rdma-core's siw provider with the patches of
 * patches/rdma-core: the bytes it writes into the send and receive rings and
 * how it reads CQEs, for legacy and extended contexts, without a kernel.
 *
 * The provider's source is compiled into this program (#include "siw.c"),
 * so its static functions run on fake objects: a context with the ABI
 * extensions the test chooses, and QPs whose rings are plain memory and
 * whose doorbell writes to /dev/null. The byte offsets checked here are those
 * of Documentation/infiniband/rsiw-abi.rst, written as numbers on purpose.
 *
 * Built by scripts/rsiw/rdma-core.sh (tests/provider/build.sh) and run in a
 * guest by the VM case provider-abi. Prints one line per failed check and
 * "siw_unit: N passed, N failed"; exits 1 if any check failed.
 */
#include "siw.c"

#include <endian.h>
#include <fcntl.h>
#include <inttypes.h>

static int passed, failed;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			passed++;                                              \
		} else {                                                       \
			failed++;                                              \
			printf("FAIL %s:%d: %s: ", __func__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
		}                                                              \
	} while (0)

#define EQ(a, b)                                                               \
	CHECK((uint64_t)(a) == (uint64_t)(b), "0x%" PRIx64 " != 0x%" PRIx64,   \
	      (uint64_t)(a), (uint64_t)(b))

/* Fixed-width reads at byte offsets of an element (little-endian host) */
static uint64_t u64_at(const void *e, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)e + off, sizeof(v));
	return v;
}

static uint32_t u32_at(const void *e, size_t off)
{
	uint32_t v;

	memcpy(&v, (const char *)e + off, sizeof(v));
	return v;
}

static uint16_t u16_at(const void *e, size_t off)
{
	uint16_t v;

	memcpy(&v, (const char *)e + off, sizeof(v));
	return v;
}

static uint8_t u8_at(const void *e, size_t off)
{
	return ((const uint8_t *)e)[off];
}

static bool zero_from(const void *e, size_t from, size_t to)
{
	size_t i;

	for (i = from; i < to; i++)
		if (u8_at(e, i))
			return false;
	return true;
}

/* The ABI's numbers (Documentation/infiniband/rsiw-abi.rst) */
_Static_assert(sizeof(struct siw_sqe) == 120, "SQE size");
_Static_assert(sizeof(struct siw_cqe) == 32, "CQE size");
_Static_assert(sizeof(struct siw_uresp_alloc_ctx) == 8, "legacy reply size");
_Static_assert(sizeof(struct siw_uresp_alloc_ctx_ext) == 24, "reply size");
_Static_assert(sizeof(struct siw_ureq_alloc_ctx) == 8, "request size");
_Static_assert(SIW_NUM_OPCODES == 12 && SIW_NUM_WC_STATUS == 10, "legacy");
_Static_assert(SIW_OP_WRITE_WITH_IMM == 12 &&
		       SIW_OP_MASKED_FETCH_AND_ADD == 13 &&
		       SIW_OP_MASKED_COMP_AND_SWAP == 14 &&
		       SIW_OP_RECEIVE_RDMA_WITH_IMM == 15 && SIW_OP_FLUSH == 16 &&
		       SIW_OP_ATOMIC_WRITE == 17 && SIW_OP_VERIFY == 18 &&
		       SIW_NUM_OPCODES_EXT == 19,
	       "extended opcodes");
_Static_assert(SIW_WC_REM_OP_ERR == 10, "extended status");
_Static_assert(SIW_WQE_WITH_IMM == 0x80, "CQE flag");
_Static_assert(SIW_CTX_EXT_CQE == 1 && SIW_CTX_EXT_ATOMICS == 2 &&
		       SIW_CTX_EXT_MASKED_ATOMICS == 4 &&
		       SIW_CTX_EXT_WRITE_WITH_IMM == 8 &&
		       SIW_CTX_EXT_SEND_WITH_IMM == 0x10 &&
		       SIW_CTX_EXT_FLUSH_GLOBAL == 0x20 &&
		       SIW_CTX_EXT_FLUSH_PERSISTENT == 0x40 &&
		       SIW_CTX_EXT_ATOMIC_WRITE == 0x80 &&
		       SIW_CTX_EXT_VERIFY == 0x100,
	       "capability bits");
_Static_assert((int)SIWDV_CONTEXT_VERIFY == (int)SIW_CTX_EXT_VERIFY &&
		       (int)SIWDV_CONTEXT_EXTENDED == (int)SIW_CTX_EXT_CQE,
	       "siwdv flags are the ABI's");

#define EXT_ALL SIW_CTX_EXT_PROVIDER
#define NUM_SQE 8

static struct verbs_device fake_vdev = { .ops = &siw_dev_ops };
static int null_fd;

static struct siw_context *fake_ctx(uint64_t ext_caps)
{
	struct siw_context *ctx = calloc(1, sizeof(*ctx));

	ctx->base_ctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->base_ctx.context.device = &fake_vdev.device;
	ctx->base_ctx.context.cmd_fd = null_fd;
	ctx->ext_caps = ext_caps;
	ctx->verify_digest_len = ext_caps & SIW_CTX_EXT_VERIFY ? 32 : 0;
	return ctx;
}

/* A QP as siw_create_qp_common() leaves it, with rings in plain memory */
static struct siw_qp *fake_qp(struct siw_context *ctx, uint64_t send_ops,
			      uint64_t dv_ops)
{
	struct siw_qp *qp = calloc(1, sizeof(*qp));

	qp->base_qp.context = &ctx->base_ctx.context;
	qp->num_sqe = NUM_SQE;
	qp->num_rqe = NUM_SQE;
	qp->sendq = calloc(NUM_SQE, sizeof(struct siw_sqe));
	qp->recvq = calloc(NUM_SQE, sizeof(struct siw_rqe));
	qp->db_req.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
	qp->db_req.hdr.in_words = sizeof(qp->db_req) / 4;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	siw_set_qp_send_ops(qp, send_ops);
	qp->vqp.comp_mask |= VERBS_QP_EX;
	siw_set_dv_send_ops(qp, dv_ops);
	return qp;
}

static void free_qp(struct siw_qp *qp)
{
	free(qp->sendq);
	free(qp->recvq);
	free(qp);
}

static uint16_t sqe_flags(struct siw_qp *qp, uint32_t i)
{
	return u16_at(&qp->sendq[i % NUM_SQE], 8);
}

/* Posts one legacy work request; returns its error */
static int post1(struct siw_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int rv = siw_post_send(&qp->base_qp, wr, &bad);

	if (rv)
		CHECK(bad == wr, "bad_wr not set");
	return rv;
}

static void test_cqe_bounds(void)
{
	struct siw_cqe cqe = {};
	struct ibv_wc wc;
	unsigned int op;

	/* Out of range: never read past the tables (patch 1) */
	cqe.opcode = 200;
	copy_cqe(&cqe, &wc);
	EQ(wc.status, IBV_WC_GENERAL_ERR);
	EQ(wc.vendor_err, 200);
	cqe.opcode = SIW_OP_SEND;
	cqe.status = 300;
	copy_cqe(&cqe, &wc);
	EQ(wc.status, IBV_WC_GENERAL_ERR);
	cqe.status = SIW_NUM_WC_STATUS_EXT;
	copy_cqe(&cqe, &wc);
	EQ(wc.status, IBV_WC_GENERAL_ERR);
	cqe.status = 0;
	cqe.opcode = SIW_NUM_OPCODES_EXT;
	copy_cqe(&cqe, &wc);
	EQ(wc.status, IBV_WC_GENERAL_ERR);
	/* Holes: no user CQE has these */
	cqe.opcode = SIW_OP_READ_RESPONSE;
	copy_cqe(&cqe, &wc);
	EQ(wc.status, IBV_WC_GENERAL_ERR);

	static const struct {
		uint8_t siw;
		int ibv;
	} ops[] = {
		{ 0, IBV_WC_RDMA_WRITE },	{ 1, IBV_WC_RDMA_READ },
		{ 2, IBV_WC_RDMA_READ },	{ 3, IBV_WC_SEND },
		{ 4, IBV_WC_SEND },		{ 5, IBV_WC_SEND },
		{ 6, IBV_WC_FETCH_ADD },	{ 7, IBV_WC_COMP_SWAP },
		{ 8, IBV_WC_RECV },		{ 12, IBV_WC_RDMA_WRITE },
		{ 13, IBV_WC_FETCH_ADD },	{ 14, IBV_WC_COMP_SWAP },
		{ 15, IBV_WC_RECV_RDMA_WITH_IMM }, { 16, IBV_WC_FLUSH },
		{ 17, IBV_WC_ATOMIC_WRITE },	{ 18, SIWDV_WC_VERIFY },
	};
	for (op = 0; op < ARRAY_SIZE(ops); op++) {
		cqe.opcode = ops[op].siw;
		cqe.status = SIW_WC_SUCCESS;
		copy_cqe(&cqe, &wc);
		EQ(wc.opcode, ops[op].ibv);
		EQ(wc.status, IBV_WC_SUCCESS);
	}
	cqe.opcode = SIW_OP_READ;
	cqe.status = 10;
	copy_cqe(&cqe, &wc);
	EQ(wc.status, IBV_WC_REM_OP_ERR);
	cqe.status = 7;
	copy_cqe(&cqe, &wc);
	EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
}

static void test_cqe_imm_inv(void)
{
	uint8_t raw[32] = {};
	struct siw_cqe *cqe = (struct siw_cqe *)raw;
	struct ibv_wc wc;

	/* Receive of a Send with Immediate: flags bit 7, imm at byte 16 */
	raw[8] = SIW_WQE_VALID | 0x80;
	raw[9] = 8;
	raw[12] = 100;
	raw[16] = 0x11;
	raw[17] = 0x22;
	raw[18] = 0x33;
	raw[19] = 0x44;
	copy_cqe(cqe, &wc);
	EQ(wc.opcode, IBV_WC_RECV);
	EQ(wc.wc_flags, IBV_WC_WITH_IMM);
	EQ(wc.imm_data, htobe32(0x11223344));
	EQ(wc.byte_len, 100);

	/* Immediate data after a Write */
	raw[9] = 15;
	copy_cqe(cqe, &wc);
	EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	EQ(wc.wc_flags, IBV_WC_WITH_IMM);
	EQ(wc.imm_data, htobe32(0x11223344));

	/* Send with Invalidate: SIW_WQE_REM_INVAL, the STag at byte 16 */
	raw[8] = SIW_WQE_VALID | SIW_WQE_REM_INVAL;
	raw[9] = 8;
	copy_cqe(cqe, &wc);
	EQ(wc.wc_flags, IBV_WC_WITH_INV);
	EQ(wc.invalidated_rkey, u32_at(raw, 16));

	raw[8] = SIW_WQE_VALID;
	copy_cqe(cqe, &wc);
	EQ(wc.wc_flags, 0);
}

static void test_poll_cq(void)
{
	struct siw_cq cq = {};
	struct siw_cqe ring[4] = {};
	struct ibv_wc wc[4];

	cq.queue = ring;
	cq.num_cqe = 4;
	pthread_spin_init(&cq.lock, PTHREAD_PROCESS_PRIVATE);
	ring[0].id = 7;
	ring[0].opcode = 250;
	ring[0].status = 0xffff;
	ring[0].flags = SIW_WQE_VALID;
	EQ(siw_poll_cq(&cq.base_cq, 4, wc), 1);
	EQ(wc[0].wr_id, 7);
	EQ(wc[0].status, IBV_WC_GENERAL_ERR);
	EQ(ring[0].flags, 0);
}

static struct ibv_sge sge(uint64_t addr, uint32_t len, uint32_t lkey)
{
	return (struct ibv_sge){ .addr = addr, .length = len, .lkey = lkey };
}

static void test_post_send_legacy(void)
{
	struct siw_context *ctx = fake_ctx(0);
	struct siw_qp *qp = fake_qp(ctx, 0, 0);
	struct ibv_sge s[2] = { sge(0x1000, 64, 0x11), sge(0x2000, 8, 0x22) };
	struct ibv_send_wr wr = {};
	const void *e = &qp->sendq[0];
	int op;

	wr.wr_id = 0xabc;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = s;
	wr.num_sge = 2;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = 0x123456789;
	wr.wr.rdma.rkey = 0x4455;
	EQ(post1(qp, &wr), 0);
	EQ(u64_at(e, 0), 0xabc);
	EQ(u16_at(e, 8), SIW_WQE_VALID | SIW_WQE_SIGNALLED);
	EQ(u8_at(e, 10), 2);
	EQ(u8_at(e, 11), 0);
	EQ(u32_at(e, 12), 0x4455);
	EQ(u64_at(e, 16), 0x123456789);
	EQ(u64_at(e, 24), 0x1000);
	EQ(u32_at(e, 32), 64);
	EQ(u32_at(e, 36), 0x11);
	EQ(u64_at(e, 40), 0x2000);

	/* Send with Invalidate: the STag to invalidate, not wr.rdma.rkey */
	e = &qp->sendq[1];
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.invalidate_rkey = 0x7788;
	EQ(post1(qp, &wr), 0);
	EQ(u8_at(e, 11), 5);
	EQ(u32_at(e, 12), 0x7788);

	/* A legacy context posts none of the extensions: EINVAL, slot free */
	for (op = 0; op < 32; op++) {
		if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_SEND ||
		    op == IBV_WR_RDMA_READ || op == IBV_WR_SEND_WITH_INV)
			continue;
		wr.opcode = op;
		EQ(post1(qp, &wr), EINVAL);
		EQ(sqe_flags(qp, 2), 0);
	}
	/* Beyond the stock table's 12 entries (patch 1) */
	wr.opcode = 1000;
	EQ(post1(qp, &wr), EINVAL);

	/* Inline: 80 bytes legacy */
	char data[81];

	memset(data, 'x', sizeof(data));
	s[0] = sge((uintptr_t)data, 80, 0);
	wr.opcode = IBV_WR_SEND;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_INLINE;
	e = &qp->sendq[2];
	EQ(post1(qp, &wr), 0);
	EQ(u16_at(e, 8), SIW_WQE_VALID | SIW_WQE_INLINE);
	EQ(u32_at(e, 32), 80);
	CHECK(!memcmp((const char *)e + 40, data, 80), "inline data");
	s[0].length = 81;
	EQ(post1(qp, &wr), EINVAL);

	/* A Send carries no remote address or key */
	e = &qp->sendq[3];
	wr.send_flags = 0;
	s[0].length = 4;
	EQ(post1(qp, &wr), 0);
	EQ(u32_at(e, 12), 0);
	EQ(u64_at(e, 16), 0);

	/* Receives without SGEs take immediate data */
	struct ibv_recv_wr rwr = { .wr_id = 5 }, *rbad;

	EQ(siw_post_recv(&qp->base_qp, &rwr, &rbad), 0);
	EQ(u16_at(&qp->recvq[0], 8), SIW_WQE_VALID);
	EQ(u8_at(&qp->recvq[0], 10), 0);

	free_qp(qp);
	free(ctx);
}

static void test_post_send_ext(void)
{
	struct siw_context *ctx = fake_ctx(EXT_ALL);
	struct siw_qp *qp = fake_qp(ctx, 0, 0);
	struct ibv_sge s[6];
	struct ibv_send_wr wr = {};
	const void *e;
	char data[81];
	int i;

	for (i = 0; i < 6; i++)
		s[i] = sge(0x1000 * (i + 1), 8, 0x10 + i);

	/* Compare and swap */
	e = &qp->sendq[0];
	wr.wr_id = 1;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.sg_list = s;
	wr.num_sge = 1;
	wr.wr.atomic.remote_addr = 0x8000;
	wr.wr.atomic.rkey = 0x99;
	wr.wr.atomic.compare_add = 0x1111222233334444ull;
	wr.wr.atomic.swap = 0x5555666677778888ull;
	EQ(post1(qp, &wr), 0);
	EQ(u8_at(e, 10), 1);
	EQ(u8_at(e, 11), 7);
	EQ(u32_at(e, 12), 0x99);
	EQ(u64_at(e, 16), 0x8000);
	EQ(u64_at(e, 24), 0x1000);
	EQ(u32_at(e, 32), 8);
	EQ(u32_at(e, 36), 0x10);
	EQ(u64_at(e, 40), 0x1111222233334444ull);
	EQ(u64_at(e, 48), 0x5555666677778888ull);
	CHECK(zero_from(e, 56, 120), "reserved bytes");

	/* Fetch and add: no swap */
	e = &qp->sendq[1];
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	EQ(post1(qp, &wr), 0);
	EQ(u8_at(e, 11), 6);
	EQ(u64_at(e, 40), 0x1111222233334444ull);
	CHECK(zero_from(e, 48, 120), "reserved bytes");

	/* Atomics: one SGE of 8 bytes, an aligned target, no inline */
	wr.num_sge = 2;
	EQ(post1(qp, &wr), EINVAL);
	wr.num_sge = 0;
	EQ(post1(qp, &wr), EINVAL);
	wr.num_sge = 1;
	s[0].length = 4;
	EQ(post1(qp, &wr), EINVAL);
	s[0].length = 8;
	wr.wr.atomic.remote_addr = 0x8004;
	EQ(post1(qp, &wr), EINVAL);
	wr.wr.atomic.remote_addr = 0x8000;
	wr.send_flags = IBV_SEND_INLINE;
	EQ(post1(qp, &wr), EINVAL);
	wr.send_flags = 0;
	EQ(sqe_flags(qp, 2), 0);

	/* Write with Immediate: at most 5 SGEs, imm at byte 116 */
	e = &qp->sendq[2];
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.wr.rdma.remote_addr = 0x9000;
	wr.wr.rdma.rkey = 0x77;
	wr.imm_data = htobe32(0xdeadbeef);
	wr.num_sge = 5;
	EQ(post1(qp, &wr), 0);
	EQ(u8_at(e, 11), 12);
	EQ(u8_at(e, 10), 5);
	EQ(u32_at(e, 12), 0x77);
	EQ(u64_at(e, 16), 0x9000);
	EQ(u64_at(e, 88), 0x5000);
	EQ(u32_at(e, 116), htobe32(0xdeadbeef));
	CHECK(zero_from(e, 104, 116), "sge[5] but imm");
	wr.num_sge = 6;
	EQ(post1(qp, &wr), EINVAL);

	/* Write with Immediate, inline: at most 76 bytes */
	e = &qp->sendq[3];
	memset(data, 'y', sizeof(data));
	s[0] = sge((uintptr_t)data, 76, 0);
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_INLINE;
	EQ(post1(qp, &wr), 0);
	EQ(u8_at(e, 11), 12);
	EQ(u32_at(e, 32), 76);
	CHECK(!memcmp((const char *)e + 40, data, 76), "inline data");
	EQ(u32_at(e, 116), htobe32(0xdeadbeef));
	s[0].length = 77;
	EQ(post1(qp, &wr), EINVAL);

	/* Send with Immediate: the immediate in place of the rkey, all SGEs */
	e = &qp->sendq[4];
	s[0].length = 80;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SOLICITED;
	EQ(post1(qp, &wr), 0);
	EQ(u8_at(e, 11), 4);
	EQ(u16_at(e, 8), SIW_WQE_VALID | SIW_WQE_INLINE | SIW_WQE_SOLICITED);
	EQ(u32_at(e, 12), htobe32(0xdeadbeef));
	EQ(u64_at(e, 16), 0);
	EQ(u32_at(e, 32), 80);
	CHECK(!memcmp((const char *)e + 40, data, 80), "inline data");
	e = &qp->sendq[5];
	for (i = 0; i < 6; i++)
		s[i] = sge(0x1000 * (i + 1), 8, 0x10 + i);
	wr.num_sge = 6;
	wr.send_flags = 0;
	EQ(post1(qp, &wr), 0);
	EQ(u8_at(e, 10), 6);
	EQ(u32_at(e, 12), htobe32(0xdeadbeef));
	EQ(u32_at(e, 116), 0x15);
	wr.num_sge = 7;
	EQ(post1(qp, &wr), EINVAL);

	/* ibv_post_send has no Flush or Atomic Write */
	wr.opcode = IBV_WR_FLUSH;
	EQ(post1(qp, &wr), EINVAL);
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	EQ(post1(qp, &wr), EINVAL);

	free_qp(qp);
	free(ctx);
}

static void test_send_ops(void)
{
	uint64_t base = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND |
			IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND_WITH_INV;
	struct siw_context *ctx = fake_ctx(0);
	struct ibv_qp_init_attr_ex attr = {};

	EQ(siw_send_ops(ctx), base);
	EQ(siw_dv_send_ops(ctx), 0);
	ctx->ext_caps = SIW_CTX_EXT_CQE | SIW_CTX_EXT_ATOMICS;
	EQ(siw_send_ops(ctx), base | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	ctx->ext_caps = SIW_CTX_EXT_CQE | SIW_CTX_EXT_FLUSH_GLOBAL;
	EQ(siw_send_ops(ctx), base | IBV_QP_EX_WITH_FLUSH);
	ctx->ext_caps = EXT_ALL;
	EQ(siw_send_ops(ctx),
	   base | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		   IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
		   IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
		   IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_FLUSH |
		   IBV_QP_EX_WITH_ATOMIC_WRITE);
	EQ(siw_dv_send_ops(ctx),
	   SIWDV_QP_EX_WITH_VERIFY | SIWDV_QP_EX_WITH_MASKED_ATOMICS);

	/* What the context has not got is refused before any command */
	ctx->ext_caps = SIW_CTX_EXT_CQE;
	attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	attr.qp_type = IBV_QPT_RC;
	attr.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
	errno = 0;
	CHECK(!siw_create_qp_ex(&ctx->base_ctx.context, &attr), "created");
	EQ(errno, EOPNOTSUPP);
	attr.send_ops_flags = IBV_QP_EX_WITH_SEND;
	attr.qp_type = IBV_QPT_UD;
	CHECK(!siw_create_qp_ex(&ctx->base_ctx.context, &attr), "created");
	EQ(errno, EOPNOTSUPP);
	attr.qp_type = IBV_QPT_RC;
	attr.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	CHECK(!siw_create_qp_ex(&ctx->base_ctx.context, &attr), "created");
	EQ(errno, EOPNOTSUPP);

	struct siwdv_qp_init_attr dv = {
		.comp_mask = SIWDV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS,
		.send_ops_flags = SIWDV_QP_EX_WITH_VERIFY,
	};

	attr.comp_mask &= ~IBV_QP_INIT_ATTR_CREATE_FLAGS;
	errno = 0;
	CHECK(!siwdv_create_qp(&ctx->base_ctx.context, &attr, &dv), "created");
	EQ(errno, EOPNOTSUPP);

	struct siwdv_context_attr ca;

	ctx->ext_caps = EXT_ALL;
	ctx->verify_digest_len = 32;
	EQ(siwdv_query_context(&ctx->base_ctx.context, &ca, sizeof(ca)), 0);
	EQ(ca.flags, EXT_ALL);
	EQ(ca.verify_digest_len, 32);
	CHECK(siwdv_is_supported(&fake_vdev.device), "not supported");
	free(ctx);
}

static void test_wr_api(void)
{
	struct siw_context *ctx = fake_ctx(EXT_ALL);
	struct siw_qp *qp = fake_qp(ctx, siw_send_ops(ctx), 0);
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	struct ibv_sge s[2] = { sge(0x1000, 8, 0x11), sge(0x2000, 16, 0x22) };
	uint8_t aw[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	char hello[] = "hello";
	const void *e;
	int i;

	CHECK(ibv_qp_to_qp_ex(&qp->base_qp) == qpx, "qp_ex");

	ibv_wr_start(qpx);
	qpx->wr_id = 10;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, 0x55, 0xa000);
	ibv_wr_set_sge_list(qpx, 2, s);
	qpx->wr_id = 11;
	qpx->wr_flags = 0;
	ibv_wr_atomic_cmp_swp(qpx, 0x56, 0xb000, 3, 4);
	ibv_wr_set_sge(qpx, 0x12, 0x3000, 8);
	qpx->wr_id = 12;
	ibv_wr_atomic_fetch_add(qpx, 0x57, 0xb008, 9);
	ibv_wr_set_sge(qpx, 0x13, 0x3008, 8);
	qpx->wr_id = 13;
	ibv_wr_flush(qpx, 0x58, 0xc000, 4096, IBV_FLUSH_GLOBAL,
		     IBV_FLUSH_RANGE);
	qpx->wr_id = 14;
	ibv_wr_flush(qpx, 0x59, 0, 0, IBV_FLUSH_PERSISTENT, IBV_FLUSH_MR);
	qpx->wr_id = 15;
	ibv_wr_atomic_write(qpx, 0x5a, 0xd000, aw);
	qpx->wr_id = 16;
	ibv_wr_send_imm(qpx, htobe32(0xcafe));
	ibv_wr_set_inline_data(qpx, hello, 5);
	qpx->wr_id = 17;
	ibv_wr_rdma_write_imm(qpx, 0x5b, 0xe000, htobe32(0xf00d));
	ibv_wr_set_sge(qpx, 0x14, 0x4000, 0);
	/* Nothing is valid before ibv_wr_complete() */
	for (i = 0; i < 8; i++)
		CHECK(!(sqe_flags(qp, i) & SIW_WQE_VALID), "slot %d valid", i);
	EQ(ibv_wr_complete(qpx), 0);
	EQ(qp->sq_put, 8);
	for (i = 0; i < 8; i++) {
		EQ(sqe_flags(qp, i) & SIW_WQE_VALID, SIW_WQE_VALID);
		EQ(u64_at(&qp->sendq[i], 0), 10 + i);
	}

	e = &qp->sendq[0];
	EQ(u16_at(e, 8), SIW_WQE_VALID | SIW_WQE_SIGNALLED);
	EQ(u8_at(e, 10), 2);
	EQ(u8_at(e, 11), 0);
	EQ(u32_at(e, 12), 0x55);
	EQ(u64_at(e, 16), 0xa000);
	EQ(u64_at(e, 40), 0x2000);
	EQ(u32_at(e, 48), 16);

	e = &qp->sendq[1];
	EQ(u16_at(e, 8), SIW_WQE_VALID);
	EQ(u8_at(e, 11), 7);
	EQ(u8_at(e, 10), 1);
	EQ(u64_at(e, 24), 0x3000);
	EQ(u32_at(e, 32), 8);
	EQ(u32_at(e, 36), 0x12);
	EQ(u64_at(e, 40), 3);
	EQ(u64_at(e, 48), 4);
	CHECK(zero_from(e, 56, 120), "reserved bytes");

	e = &qp->sendq[2];
	EQ(u8_at(e, 11), 6);
	EQ(u64_at(e, 16), 0xb008);
	EQ(u64_at(e, 40), 9);
	CHECK(zero_from(e, 48, 120), "reserved bytes");

	/* Flush: length at 24, the Flush Request's flags at 28 */
	e = &qp->sendq[3];
	EQ(u8_at(e, 11), 16);
	EQ(u8_at(e, 10), 0);
	EQ(u32_at(e, 12), 0x58);
	EQ(u64_at(e, 16), 0xc000);
	EQ(u32_at(e, 24), 4096);
	EQ(u32_at(e, 28), 0x2);
	CHECK(zero_from(e, 32, 120), "reserved bytes");
	e = &qp->sendq[4];
	EQ(u32_at(e, 28), 0x1 | 0x4);

	/* Atomic Write: the 8 bytes at 24, as they are in memory */
	e = &qp->sendq[5];
	EQ(u8_at(e, 11), 17);
	EQ(u32_at(e, 12), 0x5a);
	EQ(u64_at(e, 16), 0xd000);
	CHECK(!memcmp((const char *)e + 24, aw, 8), "atomic write data");
	CHECK(zero_from(e, 32, 120), "reserved bytes");

	e = &qp->sendq[6];
	EQ(u8_at(e, 11), 4);
	EQ(u16_at(e, 8), SIW_WQE_VALID | SIW_WQE_INLINE);
	EQ(u32_at(e, 12), htobe32(0xcafe));
	EQ(u32_at(e, 32), 5);
	CHECK(!memcmp((const char *)e + 40, "hello", 5), "inline data");
	CHECK(zero_from(e, 45, 120), "after the inline data");

	/* A zero length SGE is no SGE */
	e = &qp->sendq[7];
	EQ(u8_at(e, 11), 12);
	EQ(u8_at(e, 10), 0);
	EQ(u32_at(e, 116), htobe32(0xf00d));

	/* The ring is full now: the kernel has not consumed anything */
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	EQ(ibv_wr_complete(qpx), ENOMEM);
	EQ(qp->sq_put, 8);

	free_qp(qp);
	free(ctx);
}

static void test_wr_errors(void)
{
	struct siw_context *ctx = fake_ctx(EXT_ALL);
	struct siw_qp *qp = fake_qp(ctx, siw_send_ops(ctx), 0);
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	struct siwdv_qp_ex *dv = siwdv_qp_ex_from_ibv_qp_ex(qpx);
	char big[100] = {};
	int i;

	/* An error gives every slot of the batch back */
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_flush(qpx, 1, 0, 8, 0, IBV_FLUSH_RANGE);
	EQ(ibv_wr_complete(qpx), EINVAL);
	EQ(qp->sq_put, 0);
	for (i = 0; i < 2; i++)
		EQ(sqe_flags(qp, i), 0);

	ibv_wr_start(qpx);
	ibv_wr_flush(qpx, 1, 0, 8, IBV_FLUSH_GLOBAL, 7);
	EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_flush(qpx, 1, 0, 1ull << 32, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_atomic_write(qpx, 1, 4, big);
	EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_atomic_cmp_swp(qpx, 1, 8, 0, 0);
	ibv_wr_set_sge(qpx, 1, 0x1000, 16);
	EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, big, 81);
	EQ(ibv_wr_complete(qpx), ENOSPC);
	ibv_wr_start(qpx);
	ibv_wr_rdma_write_imm(qpx, 1, 0, 0);
	ibv_wr_set_inline_data(qpx, big, 77);
	EQ(ibv_wr_complete(qpx), ENOSPC);
	ibv_wr_start(qpx);
	ibv_wr_rdma_write_imm(qpx, 1, 0, 0);
	{
		struct ibv_sge six[6] = {};

		ibv_wr_set_sge_list(qpx, 6, six);
	}
	EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_send_imm(qpx, 0);
	ibv_wr_set_inline_data(qpx, big, 80);
	EQ(ibv_wr_complete(qpx), 0);
	EQ(qp->sq_put, 1);

	/* Abort gives the slots back */
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_send(qpx);
	ibv_wr_abort(qpx);
	EQ(qp->sq_put, 1);
	EQ(sqe_flags(qp, 1), 0);
	EQ(sqe_flags(qp, 2), 0);

	/* siwdv operations the QP did not ask for */
	CHECK(dv != NULL, "no siwdv QP");
	ibv_wr_start(qpx);
	siwdv_wr_verify(dv, 1, 0, 8, NULL, 0);
	EQ(ibv_wr_complete(qpx), EOPNOTSUPP);
	ibv_wr_start(qpx);
	siwdv_wr_masked_atomic_fetch_add(dv, 1, 0, 1, 0);
	EQ(ibv_wr_complete(qpx), EOPNOTSUPP);
	EQ(qp->sq_put, 1);
	for (i = 1; i < NUM_SQE; i++)
		EQ(sqe_flags(qp, i), 0);

	free_qp(qp);
	free(ctx);
}

static void test_siwdv(void)
{
	struct siw_context *ctx = fake_ctx(EXT_ALL);
	struct siw_qp *qp = fake_qp(ctx, siw_send_ops(ctx),
				    siw_dv_send_ops(ctx));
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	struct siwdv_qp_ex *dv = siwdv_qp_ex_from_ibv_qp_ex(qpx);
	uint8_t digest[65];
	const void *e;
	int i;

	for (i = 0; i < 65; i++)
		digest[i] = i + 1;

	ibv_wr_start(qpx);
	qpx->wr_id = 20;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	siwdv_wr_verify(dv, 0x61, 0x10000, 4096, digest, 32);
	ibv_wr_set_sge(qpx, 0x62, 0x5000, 64);
	qpx->wr_id = 21;
	siwdv_wr_verify(dv, 0x63, 0x20000, 100, NULL, 0);
	qpx->wr_id = 22;
	siwdv_wr_masked_atomic_cmp_swp(dv, 0x64, 0x30000, 1, 0xff, 2, 0xf0);
	ibv_wr_set_sge(qpx, 0x65, 0x6000, 8);
	qpx->wr_id = 23;
	siwdv_wr_masked_atomic_fetch_add(dv, 0x66, 0x30008, 5, 0x8080);
	ibv_wr_set_sge(qpx, 0x67, 0x6008, 8);
	EQ(ibv_wr_complete(qpx), 0);

	/* Verify: sink SGE at 24, length 40, digest_len 44, digest 48 */
	e = &qp->sendq[0];
	EQ(u16_at(e, 8), SIW_WQE_VALID | SIW_WQE_SIGNALLED);
	EQ(u8_at(e, 10), 1);
	EQ(u8_at(e, 11), 18);
	EQ(u32_at(e, 12), 0x61);
	EQ(u64_at(e, 16), 0x10000);
	EQ(u64_at(e, 24), 0x5000);
	EQ(u32_at(e, 32), 64);
	EQ(u32_at(e, 36), 0x62);
	EQ(u32_at(e, 40), 4096);
	EQ(u8_at(e, 44), 32);
	CHECK(zero_from(e, 45, 48), "reserved bytes");
	CHECK(!memcmp((const char *)e + 48, digest, 32), "digest");
	CHECK(zero_from(e, 80, 120), "reserved bytes");

	e = &qp->sendq[1];
	EQ(u8_at(e, 10), 0);
	EQ(u8_at(e, 11), 18);
	EQ(u32_at(e, 40), 100);
	EQ(u8_at(e, 44), 0);
	CHECK(zero_from(e, 24, 40) && zero_from(e, 44, 120), "reserved bytes");

	/* Masked atomics: masks at 56 and 64 */
	e = &qp->sendq[2];
	EQ(u8_at(e, 11), 14);
	EQ(u64_at(e, 40), 1);
	EQ(u64_at(e, 48), 2);
	EQ(u64_at(e, 56), 0xff);
	EQ(u64_at(e, 64), 0xf0);
	CHECK(zero_from(e, 72, 120), "reserved bytes");
	e = &qp->sendq[3];
	EQ(u8_at(e, 11), 13);
	EQ(u64_at(e, 40), 5);
	EQ(u64_at(e, 48), 0);
	EQ(u64_at(e, 56), 0x8080);
	EQ(u64_at(e, 64), 0);

	ibv_wr_start(qpx);
	siwdv_wr_verify(dv, 1, 0, 8, digest, 65);
	EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	siwdv_wr_verify(dv, 1, 0, 8, digest, 64);
	EQ(ibv_wr_complete(qpx), 0);
	EQ(u8_at(&qp->sendq[4], 44), 64);
	CHECK(!memcmp((const char *)&qp->sendq[4] + 48, digest, 64), "digest");

	free_qp(qp);
	free(ctx);
}

int main(void)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);

	/* Initializes libibverbs' logging (verbs_err) */
	if (l)
		ibv_free_device_list(l);
	null_fd = open("/dev/null", O_WRONLY);
	if (null_fd < 0) {
		perror("/dev/null");
		return 2;
	}
	test_cqe_bounds();
	test_cqe_imm_inv();
	test_poll_cq();
	test_post_send_legacy();
	test_post_send_ext();
	test_send_ops();
	test_wr_api();
	test_wr_errors();
	test_siwdv();
	printf("siw_unit: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
