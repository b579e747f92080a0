// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD shim for perftest clients: delays the second rdma_connect()
 * of the process, the first connection of the test proper, by
 * RSIW_CONNECT_DELAY_MS (default 500) milliseconds, and the client's use of
 * a new connection (below).
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
 * It also holds back, by RSIW_ESTABLISHED_DELAY_MS (default 200), the
 * RDMA_CM_EVENT_ESTABLISHED event of a connection this process initiated,
 * i.e. the client's first Send. siw_accept() moves its QP to RTS and sends
 * the MPA Reply before siw_qp_socket_assoc() installs its receive callback;
 * bytes that arrive in between reach siw_cm_llp_data_ready(), which ignores
 * them in SIW_EPSTATE_RDMA_MODE, and stay in the socket until more data
 * comes. perftest's client then waits for an answer to a Send that siw never
 * read (seen with an rsiw client: 40 bytes left in the siw server's Recv-Q).
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
struct rdma_event_channel;

/* The leading fields of librdmacm's struct rdma_cm_event. */
struct rdma_cm_event {
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	int event;
	int status;
};

#define RDMA_CM_EVENT_ESTABLISHED 9

static int connects;

static void delay_ms(const char *var, long ms, const char *what)
{
	const char *env = getenv(var);
	struct timespec ts;

	if (env)
		ms = strtol(env, NULL, 10);
	if (ms <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	fprintf(stderr, "rdma-connect-delay: %ld ms %s\n", ms, what);
	nanosleep(&ts, NULL);
}

int rdma_get_cm_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev)
{
	static int (*real)(struct rdma_event_channel *, struct rdma_cm_event **);
	int ret;

	if (!real) {
		real = (int (*)(struct rdma_event_channel *, struct rdma_cm_event **))
			dlsym(RTLD_NEXT, "rdma_get_cm_event");
		if (!real) {
			fprintf(stderr, "rdma-connect-delay: no rdma_get_cm_event\n");
			abort();
		}
	}
	ret = real(ch, ev);
	if (ret == 0 && connects > 0 && (*ev)->event == RDMA_CM_EVENT_ESTABLISHED)
		delay_ms("RSIW_ESTABLISHED_DELAY_MS", 200, "after ESTABLISHED");
	return ret;
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	static int (*real)(struct rdma_cm_id *, struct rdma_conn_param *);

	if (!real) {
		real = (int (*)(struct rdma_cm_id *, struct rdma_conn_param *))
			dlsym(RTLD_NEXT, "rdma_connect");
		if (!real) {
			fprintf(stderr, "rdma-connect-delay: no rdma_connect\n");
			abort();
		}
	}
	if (++connects == 2)
		delay_ms("RSIW_CONNECT_DELAY_MS", 500, "before the test connection");
	return real(id, param);
}
