// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD shim for rping -V: says where the ping data went wrong, which
 * rping itself does not ("data mismatch!").
 *
 * rping's client fills its buffer with "rdma-ping-<n>: " and the letters
 * from 'A' + n % 58 on, cycling through 'A'..'z', and a final NUL. The server
 * reads it (RDMA Read) and echoes strlen() + 1 bytes of it back (RDMA Write);
 * the client then memcmp()s the two buffers. This shim checks both steps
 * against the pattern:
 *
 *   server  strlen() of the buffer the Read filled, before the Write: bytes
 *           that differ from the pattern were wrong on the Read;
 *   client  memcmp() of the two buffers: bytes of the Write that differ.
 *
 * For each run of wrong bytes it prints the offsets, the first byte, whether
 * the run holds the previous ping's data (stale), and for each
 * RPING_CHECK_CHUNK (default 1428, siw's payload per FPDU at MSS 1448) bytes
 * of it where in the pattern the data belongs (misplaced data). Correct data
 * costs one pass over it. RPING_CHECK_SIZE is rping's -S (the server's buffer
 * may hold a shorter string after a short Read).
 *
 * Built on the host by tests/vm/run (the guest has no compiler).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define PREFIX "rdma-ping-"
#define PREFIX_LEN (sizeof(PREFIX) - 1)

/* The byte rping puts at offset @i of an @n-byte buffer in ping @ping. */
static int expected(size_t i, size_t n, int ping)
{
	char pre[32];
	int cc = snprintf(pre, sizeof(pre), PREFIX "%d: ", ping);
	int c;

	if (i == n - 1)
		return 0;
	if ((int)i < cc)
		return (unsigned char)pre[i];
	c = 'A' + ping % 58 + (int)((i - cc) % 58);
	return c > 'z' ? c - 58 : c;
}

static size_t chunk_size(void)
{
	const char *env = getenv("RPING_CHECK_CHUNK");
	size_t n = env ? strtoul(env, NULL, 10) : 0;

	return n ? n : 1428;
}

/* Where in ping @ping's pattern the @len bytes at @b belong, or -1. */
static ssize_t origin(const unsigned char *b, size_t len, size_t n, int ping)
{
	size_t src, i;

	for (src = 0; src + len <= n; src++) {
		for (i = 0; i < len; i++)
			if (b[i] != expected(src + i, n, ping))
				break;
		if (i == len)
			return src;
	}
	return -1;
}

static void report_run(const char *who, const unsigned char *b, size_t n,
		       int ping, size_t from, size_t to)
{
	size_t chunk = chunk_size(), o, i, stale = 0;

	for (i = from; i < to; i++)
		stale += b[i] == expected(i, n, ping - 1);
	fprintf(stderr,
		"rping-check: %s: ping %d: bytes %zu..%zu wrong (first 0x%02x, expected 0x%02x; %zu of %zu as in ping %d)\n",
		who, ping, from, to - 1, b[from], expected(from, n, ping),
		stale, to - from, ping - 1);
	/*
	 * 16 bytes fix the place in the pattern up to its period: a shift is
	 * known modulo 58 (a whole FPDU of siw, 1428 bytes, is 36).
	 */
	for (o = from; o < to; o = (o / chunk + 1) * chunk) {
		size_t len = o + 16 <= n ? 16 : n - o;
		ssize_t src = origin(b + o, len, n, ping);

		if (src < 0)
			fprintf(stderr, "rping-check: %s:   at %zu: not ping %d data\n",
				who, o, ping);
		else
			fprintf(stderr, "rping-check: %s:   at %zu: ping data shifted by %zu (mod 58)\n",
				who, o, (size_t)((o - src) % 58 + 58) % 58);
	}
}

static int check(const char *who, const unsigned char *b, size_t n, int ping)
{
	size_t i, start = 0;
	int bad = 0, in_run = 0;

	for (i = 0; i <= n; i++) {
		int wrong = i < n && b[i] != expected(i, n, ping);

		if (wrong && !in_run) {
			start = i;
			in_run = 1;
		} else if (!wrong && in_run) {
			if (++bad <= 8)
				report_run(who, b, n, ping, start, i);
			in_run = 0;
		}
	}
	return bad;
}

size_t strlen(const char *s)
{
	const char *env;
	size_t n = 0;

	while (s[n])
		n++;
	if (n > 100 && !strncmp(s, PREFIX, PREFIX_LEN)) {
		size_t size = n + 1;

		env = getenv("RPING_CHECK_SIZE");
		if (env)
			size = strtoul(env, NULL, 10);
		if (size != n + 1)
			fprintf(stderr, "rping-check: server: ping %d: string of %zu bytes in a %zu-byte buffer\n",
				atoi(s + PREFIX_LEN), n, size);
		check("server (Read)", (const unsigned char *)s, size,
		      atoi(s + PREFIX_LEN));
	}
	return n;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *x = a, *y = b;
	size_t i;

	for (i = 0; i < n; i++)
		if (x[i] != y[i])
			break;
	if (i == n)
		return 0;
	/* rping's client: its buffer (a) against the echo the Write brought. */
	if (n > 100 && !strncmp(a, PREFIX, PREFIX_LEN) &&
	    !check("client (Write)", y, n, atoi((const char *)a + PREFIX_LEN)))
		fprintf(stderr, "rping-check: client: the echo matches the pattern, the buffer does not\n");
	return x[i] < y[i] ? -1 : 1;
}
