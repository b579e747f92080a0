// SPDX-License-Identifier: GPL-2.0 or BSD-3-Clause
/*
 * RDMA Flush to persistence on persistent memory (draft-talpey-rdma-commit-02,
 * issue 37), rsiw to rsiw through the patched siw provider:
 *
 *   siw_pmem server ADDR PORT DAX   registers a devdax mapping, serves one
 *                                   connection
 *   siw_pmem client ADDR PORT DEV   the requester; reads DEV's counters
 *   siw_pmem bench-server ADDR PORT DAX
 *   siw_pmem bench ADDR PORT ITERS  make bench's figures (scripts/rsiw/bench.sh,
 *                                   the case bench-pmem): see bench() below
 *
 * Both run in one VM (the case commit-pmem: an emulated NVDIMM, a devdax
 * namespace, one rsiw device on a veth pair, so the client reads the
 * responder's counters in sysfs). Checks, named after the spec map:
 *
 *   server:
 *     CMT-03     a registration of DRAM with IBV_ACCESS_FLUSH_PERSISTENT
 *                fails with EINVAL;
 *     CMT-03     the devdax mapping (MAP_SHARED, REGION bytes) registers
 *                with IBV_ACCESS_FLUSH_PERSISTENT | _FLUSH_GLOBAL and
 *                remote write and read;
 *   client, each Flush completing with IBV_WC_FLUSH, and the responder's
 *   counters (ports/1/hw_counters: flush_executed, flush_persistent,
 *   flush_writeback_bytes, flush_deferred) read before and after:
 *     FLUSH-08   a Write of W_LEN bytes at W_OFF and a Flush to persistence
 *                of them: one persistent Flush, and the whole cache lines
 *                covering them written back (WB_RANGE bytes);
 *     FLUSH-02   a Flush to persistence of the whole region (IBV_FLUSH_MR)
 *                with a garbage range: REGION bytes written back, by the
 *                connection's work item (deferred: more than rsiw writes
 *                back in its RX path, 64 KiB);
 *     FLUSH-05   Flushes to persistence of 64 KiB of whole lines (written
 *                back in the RX path) and of 64 KiB one byte later (a line
 *                more: deferred);
 *     FLUSH-08   a Flush to global visibility only: one Flush, nothing
 *                written back;
 *     FLUSH-03   Writes of a second pattern and a persistent Flush in one
 *                batch: the Flush completes after them, and a Read of the
 *                range returns them;
 *     AWRITE-04  a Write, a deferred Flush (the whole region), an Atomic
 *                Write and a Read in one batch: RX stops at the Flush and
 *                goes on after its write-back, all complete in order and
 *                the Read returns the Write and the Atomic Write;
 *   server, after the client's done message: the mapping holds both
 *   patterns, and so does a second mapping of the device.
 *
 * Built with the provider by tests/provider/build.sh (public headers only).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <infiniband/verbs.h>

#define PROG "siw_pmem"
#include "fail.h"
#include "cm.h"
#include "qpx.h"

#define REGION (4UL << 20) /* two devdax alignments of 2 MiB */
#define LINE 64
#define W_OFF (4096 + 30) /* not line-aligned: 30..130 of a page */
#define W_LEN 100
#define WB_RANGE 192 /* the lines of [W_OFF, W_OFF + W_LEN): 0..192 */
#define W2_OFF (REGION - 8192 - 5)
#define W2_LEN 3000
#define INLINE_MAX 65536 /* rsiw's FLUSH_INLINE_MAX */
#define B_OFF (1UL << 20) /* line-aligned: INLINE_MAX bytes are that many of lines */
#define W3_OFF (2UL << 20)
#define W3_LEN 256

struct info {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint32_t pad;
};

struct done {
	char tag[8]; /* "done" */
};

static uint8_t pattern(uint64_t off, int which)
{
	return (uint8_t)(off * 7 + 3 + which * 101);
}

static void pass(const char *check, const char *what)
{
	printf(PROG " %s: PASS %s: %s\n", role, check, what);
}

/* Whether the mapping holds the client's two patterns */
static void check_data(const uint8_t *m, const char *what)
{
	uint64_t i;

	for (i = 0; i < W_LEN; i++)
		if (m[W_OFF + i] != pattern(i, 0))
			fail("%s: byte %" PRIu64 " of the first Write is %#x", what,
			     i, m[W_OFF + i]);
	for (i = 0; i < W2_LEN; i++)
		if (m[W2_OFF + i] != pattern(i, 1))
			fail("%s: byte %" PRIu64 " of the second Writes is %#x",
			     what, i, m[W2_OFF + i]);
}

static int server(const char *addr, const char *port, const char *dax,
		  int bench)
{
	struct rdma_cm_id *lid, *id;
	struct ibv_mr *mr, *dmr, *rmr, *imr;
	struct rdma_conn_param p = rc_param(4);
	struct done d = {};
	struct info info;
	struct ibv_wc wc;
	uint8_t *m, *m2, *dram;
	int fd, n, access;

	fd = open(dax, O_RDWR);
	if (fd < 0)
		fail("open %s: %m", dax);
	m = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap %s: %m", dax);
	memset(m, 0, REGION);

	lid = rc_endpoint(addr, port, 1, 4, 1);
	if (rdma_listen(lid, 1))
		fail("rdma_listen: %m");
	printf(PROG " server: listening\n");
	if (rdma_get_request(lid, &id))
		fail("rdma_get_request: %m");

	access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_FLUSH_GLOBAL |
		 IBV_ACCESS_FLUSH_PERSISTENT;
	/* CMT-03: DRAM is not persistent memory */
	dram = aligned_alloc(4096, 65536);
	if (!dram)
		fail("aligned_alloc");
	memset(dram, 1, 65536);
	errno = 0;
	dmr = ibv_reg_mr(id->pd, dram, 65536, access);
	if (dmr)
		fail("CMT-03: DRAM registered with IBV_ACCESS_FLUSH_PERSISTENT");
	if (errno != EINVAL)
		fail("CMT-03: DRAM with IBV_ACCESS_FLUSH_PERSISTENT: %m, expected EINVAL");
	pass("CMT-03", "DRAM with IBV_ACCESS_FLUSH_PERSISTENT: EINVAL");
	mr = ibv_reg_mr(id->pd, m, REGION, access);
	if (!mr)
		fail("CMT-03: devdax with IBV_ACCESS_FLUSH_PERSISTENT: %m");
	pass("CMT-03", "devdax with IBV_ACCESS_FLUSH_PERSISTENT registered");

	rmr = rdma_reg_msgs(id, &d, sizeof(d));
	info = (struct info){ (uintptr_t)m, REGION, mr->rkey, 0 };
	imr = rdma_reg_msgs(id, &info, sizeof(info));
	if (!rmr || !imr)
		fail("rdma_reg_msgs: %m");
	if (rdma_post_recv(id, NULL, &d, sizeof(d), rmr))
		fail("rdma_post_recv: %m");
	if (rdma_accept(id, &p))
		fail("rdma_accept: %m");
	if (rdma_post_send(id, NULL, &info, sizeof(info), imr, 0))
		fail("rdma_post_send: %m");
	n = rdma_get_send_comp(id, &wc);
	if (n != 1 || wc.status != IBV_WC_SUCCESS)
		fail("sending the region's key: %d %s", n,
		     n == 1 ? ibv_wc_status_str(wc.status) : "");
	n = rdma_get_recv_comp(id, &wc);
	if (n != 1 || wc.status != IBV_WC_SUCCESS || memcmp(d.tag, "done", 5))
		fail("no done message: %d %s", n,
		     n == 1 ? ibv_wc_status_str(wc.status) : "");
	if (bench) {
		rc_close(id, lid, (struct ibv_mr *[]){ imr, rmr, mr }, 3);
		munmap(m, REGION);
		close(fd);
		printf(PROG " server: bench served\n");
		return 0;
	}
	check_data(m, "the registered mapping");
	/* A mapping of its own sees the same persistent memory */
	m2 = mmap(NULL, REGION, PROT_READ, MAP_SHARED, fd, 0);
	if (m2 == MAP_FAILED)
		fail("second mmap of %s: %m", dax);
	check_data(m2, "a second mapping");
	pass("FLUSH-03", "the devdax memory holds every Write");
	rc_close(id, lid, (struct ibv_mr *[]){ imr, rmr, mr }, 3);
	munmap(m2, REGION);
	munmap(m, REGION);
	close(fd);
	printf(PROG " server: all checks passed\n");
	return 0;
}

/* --- the client ------------------------------------------------------------ */

struct counters {
	uint64_t executed, persistent, bytes, deferred;
};

static const char *dev_name;

static uint64_t counter(const char *name)
{
	char path[256];
	unsigned long long v;
	FILE *f;

	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev_name, name);
	f = fopen(path, "r");
	if (!f)
		fail("%s: %m", path);
	if (fscanf(f, "%llu", &v) != 1)
		fail("%s: no number", path);
	fclose(f);
	return v;
}

/* ib_core caches the counters for 10 ms: read them after that */
static struct counters read_counters(void)
{
	struct counters c;

	poll(NULL, 0, 50);
	c.executed = counter("flush_executed");
	c.persistent = counter("flush_persistent");
	c.bytes = counter("flush_writeback_bytes");
	c.deferred = counter("flush_deferred");
	return c;
}

static void expect_delta(const char *check, struct counters a,
			 struct counters b, uint64_t executed,
			 uint64_t persistent, uint64_t bytes, uint64_t deferred)
{
	if (b.executed - a.executed != executed ||
	    b.persistent - a.persistent != persistent ||
	    b.bytes - a.bytes != bytes || b.deferred - a.deferred != deferred)
		fail("%s: counters moved by %" PRIu64 " Flushes, %" PRIu64
		     " persistent, %" PRIu64 " bytes written back, %" PRIu64
		     " deferred; expected %" PRIu64 ", %" PRIu64 ", %" PRIu64
		     ", %" PRIu64,
		     check, b.executed - a.executed, b.persistent - a.persistent,
		     b.bytes - a.bytes, b.deferred - a.deferred, executed,
		     persistent, bytes, deferred);
}

struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	struct info info;
	struct {
		struct info info;
		uint8_t w[W_LEN];
		uint8_t w2[W2_LEN];
		uint8_t back[W2_LEN];
		uint8_t w3[W3_LEN];
		uint8_t back3[W3_LEN + 8];
		struct done done;
	} *b;
};

static void poll_wc(struct conn *c, struct ibv_wc *wc)
{
	cq_next(c->cq, wc, 30);
}

static void expect(struct conn *c, const char *check, uint64_t wr_id,
		   int opcode)
{
	struct ibv_wc wc;

	poll_wc(c, &wc);
	if (wc.wr_id != wr_id || wc.status != IBV_WC_SUCCESS ||
	    (int)wc.opcode != opcode)
		fail("%s: completion %" PRIu64 " opcode %d status %s; expected %" PRIu64
		     " opcode %d, success",
		     check, wc.wr_id, wc.opcode, ibv_wc_status_str(wc.status),
		     wr_id, opcode);
}

static void wr(struct conn *c, uint64_t id)
{
	qpx_wr(c->qpx, id);
}

static void complete(struct conn *c, const char *check)
{
	qpx_complete(c->qpx, check);
}

/*
 * One Flush alone (wr_id id) of len bytes at addr, and its completion; the
 * counters must move by that Flush, persistent (0 or 1) of them to
 * persistence, bytes written back and deferred (0 or 1). *ctr: the counters
 * before, then after.
 */
static void flush_one(struct conn *c, const char *check, uint64_t id,
		      uint64_t addr, size_t len, uint8_t type, uint8_t level,
		      struct counters *ctr, uint64_t persistent, uint64_t bytes,
		      uint64_t deferred)
{
	struct counters after;

	ibv_wr_start(c->qpx);
	wr(c, id);
	ibv_wr_flush(c->qpx, c->info.rkey, addr, len, type, level);
	complete(c, check);
	expect(c, check, id, IBV_WC_FLUSH);
	after = read_counters();
	expect_delta(check, *ctr, after, 1, persistent, bytes, deferred);
	*ctr = after;
}

static void conn_open(struct conn *c, const char *addr, const char *port)
{
	struct rdma_conn_param p = rc_param(4);
	struct ibv_qp_init_attr_ex qa;

	memset(c, 0, sizeof(*c));
	qpx_prepare(addr, port,
		    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
			    IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_FLUSH |
			    IBV_QP_EX_WITH_ATOMIC_WRITE,
		    &c->id, &c->pd, &c->cq, &qa);
	c->qp = ibv_create_qp_ex(c->id->verbs, &qa);
	if (!c->qp)
		fail("ibv_create_qp_ex with Flush: %m");
	c->qpx = ibv_qp_to_qp_ex(c->qp);
	if (!c->qpx)
		fail("no ibv_qp_ex");
	c->b = qpx_zalloc(sizeof(*c->b));
	c->mr = qpx_connect(c->id, c->qp, c->pd, c->cq, c->b, sizeof(*c->b),
			    &c->b->info, sizeof(c->b->info), &p, 30);
	c->info = c->b->info;
	if (c->info.len != REGION)
		fail("the server's region has %" PRIu64 " bytes", c->info.len);
}

/*
 * The end of a client: the done message (the server checks its memory, then
 * disconnects), and the teardown of everything conn_open() made.
 */
static void conn_close(struct conn *c)
{
	memcpy(c->b->done.tag, "done", 5);
	ibv_wr_start(c->qpx);
	wr(c, 9);
	ibv_wr_send(c->qpx);
	ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)&c->b->done, sizeof(c->b->done));
	complete(c, "done");
	expect(c, "done", 9, IBV_WC_SEND);
	rdma_disconnect(c->id);
	qpx_teardown(c->id, c->qp, c->mr, c->cq, c->pd);
	free(c->b);
}

static int client(const char *addr, const char *port, const char *dev)
{
	struct counters a, b;
	struct conn c;
	uint64_t i;

	dev_name = dev;
	conn_open(&c, addr, port);
	for (i = 0; i < W_LEN; i++)
		c.b->w[i] = pattern(i, 0);
	for (i = 0; i < W2_LEN; i++)
		c.b->w2[i] = pattern(i, 1);

	/* A Write, then a Flush to persistence of its bytes */
	a = read_counters();
	ibv_wr_start(c.qpx);
	wr(&c, 1);
	ibv_wr_rdma_write(c.qpx, c.info.rkey, c.info.addr + W_OFF);
	ibv_wr_set_sge(c.qpx, c.mr->lkey, (uintptr_t)c.b->w, W_LEN);
	wr(&c, 2);
	ibv_wr_flush(c.qpx, c.info.rkey, c.info.addr + W_OFF, W_LEN,
		     IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE);
	complete(&c, "FLUSH-08");
	expect(&c, "FLUSH-08", 1, IBV_WC_RDMA_WRITE);
	expect(&c, "FLUSH-08", 2, IBV_WC_FLUSH);
	b = read_counters();
	expect_delta("FLUSH-08", a, b, 1, 1, WB_RANGE, 0);
	pass("FLUSH-08", "Write, Flush to persistence of 100 bytes: their 3 cache lines written back");

	/* The whole region, the range ignored */
	flush_one(&c, "FLUSH-02", 3, 0xdead0000beefULL, 17, IBV_FLUSH_PERSISTENT,
		  IBV_FLUSH_MR, &b, 1, REGION, 1);
	pass("FLUSH-02", "Flush to persistence of the whole region: all of it written back, deferred");

	/* The RX path's limit: 64 KiB of lines there, a line more deferred */
	flush_one(&c, "FLUSH-05", 20, c.info.addr + B_OFF, INLINE_MAX,
		  IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE, &b, 1, INLINE_MAX, 0);
	flush_one(&c, "FLUSH-05", 21, c.info.addr + B_OFF + 1, INLINE_MAX,
		  IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE, &b, 1, INLINE_MAX + LINE, 1);
	pass("FLUSH-05", "64 KiB of cache lines written back in the RX path, a line more deferred");

	/* Global visibility only: nothing written back */
	flush_one(&c, "FLUSH-08", 4, c.info.addr + W_OFF, W_LEN, IBV_FLUSH_GLOBAL,
		  IBV_FLUSH_RANGE, &b, 0, 0, 0);
	pass("FLUSH-08", "Flush to global visibility: nothing written back");

	/* Writes and a persistent Flush in one batch, then a Read */
	a = b;
	ibv_wr_start(c.qpx);
	wr(&c, 5);
	ibv_wr_rdma_write(c.qpx, c.info.rkey, c.info.addr + W2_OFF);
	ibv_wr_set_sge(c.qpx, c.mr->lkey, (uintptr_t)c.b->w2, W2_LEN / 2);
	wr(&c, 6);
	ibv_wr_rdma_write(c.qpx, c.info.rkey, c.info.addr + W2_OFF + W2_LEN / 2);
	ibv_wr_set_sge(c.qpx, c.mr->lkey, (uintptr_t)c.b->w2 + W2_LEN / 2,
		       W2_LEN - W2_LEN / 2);
	wr(&c, 7);
	ibv_wr_flush(c.qpx, c.info.rkey, c.info.addr + W2_OFF, W2_LEN,
		     IBV_FLUSH_PERSISTENT | IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	wr(&c, 8);
	ibv_wr_rdma_read(c.qpx, c.info.rkey, c.info.addr + W2_OFF);
	ibv_wr_set_sge(c.qpx, c.mr->lkey, (uintptr_t)c.b->back, W2_LEN);
	complete(&c, "FLUSH-03");
	expect(&c, "FLUSH-03", 5, IBV_WC_RDMA_WRITE);
	expect(&c, "FLUSH-03", 6, IBV_WC_RDMA_WRITE);
	expect(&c, "FLUSH-03", 7, IBV_WC_FLUSH);
	expect(&c, "FLUSH-03", 8, IBV_WC_RDMA_READ);
	if (memcmp(c.b->back, c.b->w2, W2_LEN))
		fail("FLUSH-03: the Read does not return the Writes");
	b = read_counters();
	/* W2_OFF is 5 bytes before a page boundary, 59 bytes into its line */
	expect_delta("FLUSH-03", a, b, 1, 1,
		     ((W2_OFF + W2_LEN + LINE - 1) / LINE - W2_OFF / LINE) * LINE, 0);
	pass("FLUSH-03", "Writes, a Flush to persistence and a Read in one batch, in order");

	/*
	 * A deferred Flush in a batch: RX stops at it until the work item wrote
	 * the region back, then executes what follows, in order
	 */
	for (i = 0; i < W3_LEN; i++)
		c.b->w3[i] = pattern(i, 2);
	a = b;
	ibv_wr_start(c.qpx);
	wr(&c, 30);
	ibv_wr_rdma_write(c.qpx, c.info.rkey, c.info.addr + W3_OFF);
	ibv_wr_set_sge(c.qpx, c.mr->lkey, (uintptr_t)c.b->w3, W3_LEN);
	wr(&c, 31);
	ibv_wr_flush(c.qpx, c.info.rkey, 0, 0, IBV_FLUSH_PERSISTENT,
		     IBV_FLUSH_MR);
	wr(&c, 32);
	ibv_wr_atomic_write(c.qpx, c.info.rkey, c.info.addr + W3_OFF + W3_LEN,
			    "rsiwpmem");
	wr(&c, 33);
	ibv_wr_rdma_read(c.qpx, c.info.rkey, c.info.addr + W3_OFF);
	ibv_wr_set_sge(c.qpx, c.mr->lkey, (uintptr_t)c.b->back3, W3_LEN + 8);
	complete(&c, "AWRITE-04");
	expect(&c, "AWRITE-04", 30, IBV_WC_RDMA_WRITE);
	expect(&c, "AWRITE-04", 31, IBV_WC_FLUSH);
	expect(&c, "AWRITE-04", 32, IBV_WC_ATOMIC_WRITE);
	expect(&c, "AWRITE-04", 33, IBV_WC_RDMA_READ);
	if (memcmp(c.b->back3, c.b->w3, W3_LEN) ||
	    memcmp(c.b->back3 + W3_LEN, "rsiwpmem", 8))
		fail("AWRITE-04: the Read does not return the Write and the Atomic Write");
	b = read_counters();
	expect_delta("AWRITE-04", a, b, 1, 1, REGION, 1);
	pass("AWRITE-04", "Write, deferred Flush, Atomic Write and Read in one batch, in order");

	conn_close(&c);
	printf(PROG " client: all checks passed\n");
	return 0;
}

/* --- make bench ------------------------------------------------------------ */

#define B_AREA (3UL << 20) /* the bench's bytes: past the checks' */
#define B_LEN 64
#define AW_BATCH 8 /* Atomic Writes posted at once for the rate */

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Prints "siw_pmem bench: NAME median_us mean_us" of n samples */
static void report(const char *name, double *t, int n)
{
	double sum = 0;
	int i;

	for (i = 0; i < n; i++)
		sum += t[i];
	qsort(t, n, sizeof(*t), cmp_double);
	printf(PROG " bench: %s %.1f %.1f\n", name, t[n / 2], sum / n);
}

/*
 * One latency sample of kind k: a Write of B_LEN bytes and a Flush to
 * persistence of them (0), a Write and a Flush to global visibility (1), a
 * Write and a 1-byte Read of its range (2, the Read-after-Write idiom a
 * Flush replaces), an Atomic Write alone (3). Posted as one batch; timed
 * to the last completion.
 */
static double sample(struct conn *c, int k)
{
	uint64_t dst = c->info.addr + B_AREA;
	double t0 = now_us();
	int n = 2;

	ibv_wr_start(c->qpx);
	if (k != 3) {
		wr(c, 1);
		ibv_wr_rdma_write(c->qpx, c->info.rkey, dst);
		ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)c->b->w, B_LEN);
	}
	wr(c, 2);
	switch (k) {
	case 0:
		ibv_wr_flush(c->qpx, c->info.rkey, dst, B_LEN,
			     IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE);
		break;
	case 1:
		ibv_wr_flush(c->qpx, c->info.rkey, dst, B_LEN,
			     IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
		break;
	case 2:
		ibv_wr_rdma_read(c->qpx, c->info.rkey, dst);
		ibv_wr_set_sge(c->qpx, c->mr->lkey, (uintptr_t)c->b->back, 1);
		break;
	default:
		ibv_wr_atomic_write(c->qpx, c->info.rkey, dst, "rsiwpmem");
		n = 1;
		break;
	}
	complete(c, "bench");
	while (n--) {
		struct ibv_wc wc;

		poll_wc(c, &wc);
		if (wc.status != IBV_WC_SUCCESS)
			fail("bench: completion %" PRIu64 ": %s", wc.wr_id,
			     ibv_wc_status_str(wc.status));
	}
	return now_us() - t0;
}

/*
 * make bench's figures on persistent memory, rsiw to rsiw: the median and
 * mean latency of each kind of sample() over iters samples (after 50 not
 * counted), then the Atomic Write rate with AW_BATCH posted at once (the
 * requester keeps them within ORD).
 */
static int bench(const char *addr, const char *port, int iters)
{
	static const char *const names[] = {
		"write64+flush_persistent", "write64+flush_global",
		"write64+read1", "atomic_write",
	};
	struct conn c;
	double *t, t0, dt;
	int k, i, j;

	t = calloc(iters, sizeof(*t));
	if (!t)
		fail("calloc");
	conn_open(&c, addr, port);
	memset(c.b->w, 0x5a, B_LEN);
	for (k = 0; k < 4; k++) {
		for (i = 0; i < 50; i++)
			sample(&c, k);
		for (i = 0; i < iters; i++)
			t[i] = sample(&c, k);
		report(names[k], t, iters);
	}
	t0 = now_us();
	for (i = 0; i < iters; i += AW_BATCH) {
		ibv_wr_start(c.qpx);
		for (j = 0; j < AW_BATCH; j++) {
			wr(&c, j);
			ibv_wr_atomic_write(c.qpx, c.info.rkey,
					    c.info.addr + B_AREA + 8 * j, "rsiwpmem");
		}
		complete(&c, "bench");
		for (j = 0; j < AW_BATCH; j++) {
			struct ibv_wc wc;

			poll_wc(&c, &wc);
			if (wc.status != IBV_WC_SUCCESS)
				fail("bench: Atomic Write: %s",
				     ibv_wc_status_str(wc.status));
		}
	}
	dt = now_us() - t0;
	printf(PROG " bench: atomic_write_rate %.0f\n", i / dt * 1e6);
	conn_close(&c);
	free(t);
	printf(PROG " bench: done\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && !strcmp(argv[1], "server")) {
		role = "server";
		return server(argv[2], argv[3], argv[4], 0);
	}
	if (argc == 5 && !strcmp(argv[1], "bench-server")) {
		role = "server";
		return server(argv[2], argv[3], argv[4], 1);
	}
	if (argc == 5 && !strcmp(argv[1], "client")) {
		role = "client";
		return client(argv[2], argv[3], argv[4]);
	}
	if (argc == 5 && !strcmp(argv[1], "bench")) {
		role = "bench";
		return bench(argv[2], argv[3], atoi(argv[4]) > 0 ? atoi(argv[4]) : 1000);
	}
	fprintf(stderr,
		"usage: %s server|bench-server ADDR PORT DAX | client ADDR PORT DEV | bench ADDR PORT ITERS\n",
		argv[0]);
	return 2;
}
