// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD shim for perftest clients: delays the second rdma_connect()
 * of the process, the first connection of the test proper, by
 * RSIW_CONNECT_DELAY_MS (default 500) milliseconds.
 *
 * perftest -R exchanges its parameters over a first rdma_cm connection.
 * Its server then destroys that listener and listens again on the same
 * port, while the client connects as soon as the exchange is over. The
 * client can thus reach the port before the new listener exists (refused:
 * linux-rdma/perftest#93), or, with siw as the server, in the window of
 * siw_create_listen() between listen() and the listening state, where siw
 * drops the connection and later tears its listener down with a
 * use-after-free. rsiw's connect is fast enough to hit that window. The
 * delay lets the server listen first; it changes nothing on the wire.
 *
 * Built on the host by tests/vm/run (the guest has no compiler).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct rdma_cm_id;
struct rdma_conn_param;

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	static int (*real)(struct rdma_cm_id *, struct rdma_conn_param *);
	static int calls;
	const char *env;
	long ms = 500;

	if (!real) {
		real = (int (*)(struct rdma_cm_id *, struct rdma_conn_param *))
			dlsym(RTLD_NEXT, "rdma_connect");
		if (!real) {
			fprintf(stderr, "rdma-connect-delay: no rdma_connect\n");
			abort();
		}
	}
	if (++calls == 2) {
		env = getenv("RSIW_CONNECT_DELAY_MS");
		if (env)
			ms = strtol(env, NULL, 10);
		if (ms > 0) {
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

			fprintf(stderr, "rdma-connect-delay: %ld ms before the test connection\n", ms);
			nanosleep(&ts, NULL);
		}
	}
	return real(id, param);
}
