// SPDX-License-Identifier: GPL-2.0 or BSD-3-Clause
/*
 * What a user context of an RDMA device got of the extended siw ABI, as the
 * patched provider sees it (Documentation/infiniband/rsiw-abi.rst):
 *
 *   siw_ctx DEVICE
 *
 * prints one line of key=value pairs:
 *   ext=0x...         the context's SIW_CTX_EXT_* bits (siwdv_query_context)
 *   digest=N          the Verify digest length
 *   atomic_cap=N      ibv_query_device()'s atomic_cap
 *   cap_ex=0x...      ibv_query_device_ex()'s FLUSH_GLOBAL (bit 38),
 *                     FLUSH_PERSISTENT (39) and ATOMIC_WRITE (40) bits
 *   send_ops=0x...    the IBV_QP_EX_WITH_* bits ibv_create_qp_ex() accepts,
 *                     each tried alone on an RC QP
 *   dv_ops=0x...      the SIWDV_QP_EX_WITH_* bits siwdv_create_qp() accepts
 *   refused=0x...     the bits refused with an errno other than EOPNOTSUPP
 *
 * Exits 1 if the device is not one of the siw provider. Built with the
 * provider by scripts/rsiw/rdma-core.sh, run by the VM case provider-abi.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/siwdv.h>
#include <infiniband/verbs.h>

#define DEV_CAP_BITS ((1ULL << 38) | (1ULL << 39) | (1ULL << 40))

/* A small RC QP on cq that asks for the send operations ops. */
static struct ibv_qp_init_attr_ex qp_attr(struct ibv_pd *pd, struct ibv_cq *cq,
					  uint64_t ops)
{
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = ops,
	};

	return qa;
}

int main(int argc, char **argv)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_device_attr_ex attr = {};
	struct siwdv_context_attr ca = {};
	uint64_t send_ops = 0, dv_ops = 0, refused = 0, bit;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int i, n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
		return 2;
	}
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "no device %s\n", argv[1]);
		return 2;
	}
	if (!siwdv_is_supported(dev)) {
		fprintf(stderr, "%s: not a device of the siw provider\n",
			argv[1]);
		return 1;
	}
	ctx = ibv_open_device(dev);
	if (!ctx) {
		perror("ibv_open_device");
		return 2;
	}
	if (siwdv_query_context(ctx, &ca, sizeof(ca))) {
		perror("siwdv_query_context");
		return 2;
	}
	if (ibv_query_device_ex(ctx, NULL, &attr)) {
		perror("ibv_query_device_ex");
		return 2;
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!pd || !cq) {
		perror("pd/cq");
		return 2;
	}
	for (bit = 1; bit <= IBV_QP_EX_WITH_ATOMIC_WRITE; bit <<= 1) {
		struct ibv_qp_init_attr_ex qa = qp_attr(pd, cq, bit);
		struct ibv_qp *qp = ibv_create_qp_ex(ctx, &qa);

		if (qp) {
			send_ops |= bit;
			ibv_destroy_qp(qp);
		} else if (errno != EOPNOTSUPP) {
			refused |= bit;
		}
	}
	for (bit = SIWDV_QP_EX_WITH_VERIFY;
	     bit <= SIWDV_QP_EX_WITH_MASKED_ATOMICS; bit <<= 1) {
		struct ibv_qp_init_attr_ex qa =
			qp_attr(pd, cq, IBV_QP_EX_WITH_SEND);
		struct siwdv_qp_init_attr dv = {
			.comp_mask = SIWDV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS,
			.send_ops_flags = bit,
		};
		struct ibv_qp *qp = siwdv_create_qp(ctx, &qa, &dv);

		if (qp) {
			dv_ops |= bit;
			ibv_destroy_qp(qp);
		} else if (errno != EOPNOTSUPP) {
			refused |= bit << 32;
		}
	}
	printf("ext=0x%llx digest=%u atomic_cap=%d cap_ex=0x%llx send_ops=0x%llx dv_ops=0x%llx refused=0x%llx\n",
	       (unsigned long long)ca.flags, ca.verify_digest_len,
	       attr.orig_attr.atomic_cap,
	       (unsigned long long)(attr.device_cap_flags_ex & DEV_CAP_BITS),
	       (unsigned long long)send_ops, (unsigned long long)dv_ops,
	       (unsigned long long)refused);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
