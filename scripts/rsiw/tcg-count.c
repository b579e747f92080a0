// SPDX-License-Identifier: GPL-2.0
/*
 * tcg-count: a QEMU TCG plugin that counts executed translation blocks by
 * guest address, a callgrind for a whole guest kernel: exact, repeatable
 * instruction counts that do not depend on how busy the host is.
 *
 * Every translated block in the guest kernel's half of the address space
 * gets a per-vCPU counter, incremented inline each time the block starts.
 * User space is counted as a whole. Writing a line to the control FIFO
 * (DIR/ctl.<qemu pid>) dumps all counters to DIR/dump.<qemu pid>.<n>:
 * "vaddr n_insns executions last" per block (last: the first bytes of its
 * last instruction, in hex; then its simulated TLB misses, 0 without tlb=1),
 * then "user tbs insns" and, with tlb=1, "tlb MODE SIZE accesses
 * victim-hits misses" lines. Two dumps
 * bracket a window; scripts/rsiw/tcg-count.py subtracts and resolves them.
 *
 *   gcc -O2 -shared -fPIC -o tcg-count.so scripts/rsiw/tcg-count.c -lpthread
 *   RSIW_QEMU_ARGS="-plugin /path/tcg-count.so,dir=/tmp/cnt" scripts/rsiw/vm.py run ...
 *
 * The plugin API is declared here (QEMU 10.0, API version 2 and later) so
 * that building it needs no QEMU headers.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_scoreboard;
typedef struct {
	struct qemu_plugin_scoreboard *score;
	size_t offset;
} qemu_plugin_u64;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64, QEMU_PLUGIN_INLINE_STORE_U64 };
typedef void (*tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 2;

extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb_t cb);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn;
extern struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
							size_t idx);
extern size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest,
				    size_t len);
extern struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size);
extern void *qemu_plugin_scoreboard_find(struct qemu_plugin_scoreboard *score,
					 unsigned int vcpu_index);
extern void qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(struct qemu_plugin_tb *tb,
							       enum qemu_plugin_op op,
							       qemu_plugin_u64 entry,
							       uint64_t imm);

extern void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, vcpu_udata_cb_t cb,
						 int flags, void *userdata);

typedef uint32_t qemu_plugin_meminfo_t;
typedef void (*mem_cb_t)(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr,
			 void *udata);
extern void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, mem_cb_t cb,
					     int flags, int rw, void *userdata);

#define MAX_TBS (1u << 21)
#define MAX_TRACE_PCS 16
#define TRACE_LEN (1u << 20)
#define KERNEL_BASE 0xffff800000000000ull

/* Counter 0: user TB executions, 1: user instructions, 2..: kernel TBs. */
struct rec {
	uint64_t vaddr;
	uint32_t n_insns;
	/* The first bytes of the block's last instruction: how it ends. */
	uint8_t last[4];
};

static struct qemu_plugin_scoreboard *score;
static struct rec *recs;
static uint32_t n_recs = 2;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char dir[512];
static int max_vcpus = 1;
/* count=0: timestamps only (trace=), no counters: less overhead on the timeline. */
static int counting = 1;

/*
 * trace=PC:PC:...: a host CLOCK_MONOTONIC timestamp each time a block starting at one of
 * these guest addresses runs, to lay out where the time of a round trip goes across two
 * VMs (both QEMUs read the same clock). Written by the "trace" command.
 */
static uint64_t trace_pc[MAX_TRACE_PCS];
static int n_trace_pc;
/*
 * tlb=1: simulate QEMU's softmmu TLB (direct-mapped, 8-entry victim TLB)
 * for data accesses, kernel and user mode apart, at three sizes; count
 * accesses and misses, and misses per kernel block (256 entries).
 */
static int tlb_on;
#define NSZ 3
static const unsigned tlb_bits[NSZ] = { 6, 8, 10 };
struct simtlb {
	uint64_t e[1024];
	uint64_t v[8];
	unsigned vi;
	uint64_t acc, miss, vhit;
};
static struct simtlb stlb[2][NSZ];
static uint64_t *tbmiss;
/* Data accesses per kernel block: a rep-prefixed string instruction counts once per
 * execution as an instruction but once per element here. */
static uint64_t *tbacc;

static int tlb_access(struct simtlb *t, unsigned bits, uint64_t page)
{
	unsigned idx = page & ((1u << bits) - 1);
	uint64_t tag = page + 1;

	t->acc++;
	if (t->e[idx] == tag)
		return 0;
	for (int k = 0; k < 8; k++)
		if (t->v[k] == tag) {
			t->v[k] = t->e[idx];
			t->e[idx] = tag;
			t->vhit++;
			return 0;
		}
	t->v[t->vi++ % 8] = t->e[idx];
	t->e[idx] = tag;
	t->miss++;
	return 1;
}

static void mem_cb(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
	uint32_t i = (uintptr_t)udata;
	int k = i ? 1 : 0;
	uint64_t page = vaddr >> 12;

	if (i)
		tbacc[i]++;
	for (int s = 0; s < NSZ; s++)
		if (tlb_access(&stlb[k][s], tlb_bits[s], page) && s == 1 && i)
			tbmiss[i]++;
}

static struct tev {
	uint64_t ns;
	uint64_t idx;
} *trace;
static uint64_t trace_n;

static void trace_cb(unsigned int vcpu, void *udata)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	trace[trace_n % TRACE_LEN] = (struct tev){
		(uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec, (uintptr_t)udata };
	trace_n++;
}

static qemu_plugin_u64 entry(uint32_t i)
{
	return (qemu_plugin_u64){ score, (size_t)i * sizeof(uint64_t) };
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	size_t n = qemu_plugin_tb_n_insns(tb);
	uint32_t i;

	for (int k = 0; k < n_trace_pc; k++)
		if (va == trace_pc[k])
			qemu_plugin_register_vcpu_tb_exec_cb(tb, trace_cb, 0, (void *)(uintptr_t)k);
	if (!counting)
		return;
	if (va < KERNEL_BASE) {
		if (tlb_on)
			for (size_t q = 0; q < n; q++)
				qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, q),
								 mem_cb, 0, 3, (void *)0);
		qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
			tb, QEMU_PLUGIN_INLINE_ADD_U64, entry(0), 1);
		qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
			tb, QEMU_PLUGIN_INLINE_ADD_U64, entry(1), n);
		return;
	}
	pthread_mutex_lock(&lock);
	i = n_recs < MAX_TBS ? n_recs++ : 0;
	if (i) {
		recs[i].vaddr = va;
		recs[i].n_insns = n;
		memset(recs[i].last, 0, sizeof(recs[i].last));
		if (n)
			qemu_plugin_insn_data(qemu_plugin_tb_get_insn(tb, n - 1), recs[i].last,
					      sizeof(recs[i].last));
	}
	pthread_mutex_unlock(&lock);
	if (i)
		qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
			tb, QEMU_PLUGIN_INLINE_ADD_U64, entry(i), 1);
	if (i && tlb_on)
		for (size_t q = 0; q < n; q++)
			qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, q), mem_cb, 0, 3,
							 (void *)(uintptr_t)i);
}

static void dump(int seq)
{
	char path[600];
	FILE *f;
	uint32_t n, i;
	int v;

	snprintf(path, sizeof(path), "%s/dump.%d.%d", dir, (int)getpid(), seq);
	f = fopen(path, "w");
	if (!f)
		return;
	pthread_mutex_lock(&lock);
	n = n_recs;
	pthread_mutex_unlock(&lock);
	for (i = 2; i < n; i++) {
		uint64_t c = 0;

		for (v = 0; v < max_vcpus; v++)
			c += ((uint64_t *)qemu_plugin_scoreboard_find(score, v))[i];
		if (c)
			fprintf(f, "%llx %u %llu %02x%02x%02x%02x %llu %llu\n",
				(unsigned long long)recs[i].vaddr, recs[i].n_insns,
				(unsigned long long)c, recs[i].last[0], recs[i].last[1],
				recs[i].last[2], recs[i].last[3],
				(unsigned long long)(tbmiss ? tbmiss[i] : 0),
				(unsigned long long)(tbacc ? tbacc[i] : 0));
	}
	{
		uint64_t t = 0, in = 0;

		for (v = 0; v < max_vcpus; v++) {
			uint64_t *s = qemu_plugin_scoreboard_find(score, v);

			t += s[0];
			in += s[1];
		}
		fprintf(f, "user %llu %llu\n", (unsigned long long)t, (unsigned long long)in);
		fprintf(f, "records %u\n", n);
		for (int k = 0; k < 2 && tlb_on; k++)
			for (int z = 0; z < NSZ; z++)
				fprintf(f, "tlb %s %u %llu %llu %llu\n", k ? "kernel" : "user",
					1u << tlb_bits[z], (unsigned long long)stlb[k][z].acc,
					(unsigned long long)stlb[k][z].vhit,
					(unsigned long long)stlb[k][z].miss);
	}
	fclose(f);
	/* The reader polls for the .done file. */
	strcat(path, ".done");
	f = fopen(path, "w");
	if (f)
		fclose(f);
}

static void dump_trace(void)
{
	char path[600];
	uint64_t i, n = trace_n, from = n > TRACE_LEN ? n - TRACE_LEN : 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/trace.%d", dir, (int)getpid());
	f = fopen(path, "w");
	if (!f)
		return;
	for (i = from; i < n; i++)
		fprintf(f, "%llu %llu\n", (unsigned long long)trace[i % TRACE_LEN].ns,
			(unsigned long long)trace[i % TRACE_LEN].idx);
	fclose(f);
	strcat(path, ".done");
	f = fopen(path, "w");
	if (f)
		fclose(f);
}

static void *ctl_thread(void *arg)
{
	char path[600], line[64];
	int seq = 0;

	snprintf(path, sizeof(path), "%s/ctl.%d", dir, (int)getpid());
	unlink(path);
	if (mkfifo(path, 0600))
		return NULL;
	for (;;) {
		FILE *f = fopen(path, "r");

		if (!f)
			return NULL;
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "trace", 5))
				dump_trace();
			else
				dump(seq++);
		}
		fclose(f);
	}
	return NULL;
}

__attribute__((visibility("default"))) int
qemu_plugin_install(qemu_plugin_id_t id, const void *info, int argc, char **argv)
{
	pthread_t t;
	int i;

	strcpy(dir, "/tmp");
	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "dir=", 4))
			snprintf(dir, sizeof(dir), "%s", argv[i] + 4);
		else if (!strncmp(argv[i], "vcpus=", 6))
			max_vcpus = atoi(argv[i] + 6);
		else if (!strncmp(argv[i], "tlb=", 4))
			tlb_on = atoi(argv[i] + 4);
		else if (!strncmp(argv[i], "count=", 6))
			counting = atoi(argv[i] + 6);
		else if (!strncmp(argv[i], "trace=", 6)) {
			char *p = argv[i] + 6;

			while (*p && n_trace_pc < MAX_TRACE_PCS) {
				trace_pc[n_trace_pc++] = strtoull(p, &p, 16);
				if (*p == ':')
					p++;
				else
					break;
			}
		}
	}
	recs = calloc(MAX_TBS, sizeof(*recs));
	trace = calloc(TRACE_LEN, sizeof(*trace));
	score = qemu_plugin_scoreboard_new(MAX_TBS * sizeof(uint64_t));
	if (tlb_on) {
		tbmiss = calloc(MAX_TBS, sizeof(*tbmiss));
		tbacc = calloc(MAX_TBS, sizeof(*tbacc));
	}
	if (!recs || !score || !trace || (tlb_on && (!tbmiss || !tbacc)))
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	if (pthread_create(&t, NULL, ctl_thread, NULL))
		return -1;
	pthread_detach(t);
	return 0;
}
