/* SPDX-License-Identifier: GPL-2.0 */
/*
 * raw_post(): a send queue element written straight into a QP's ring, as a
 * hostile or buggy user could write it, bypassing the provider's checks.
 * Include after the provider's siw.h.
 */
#ifndef RSIW_TESTS_PROVIDER_RING_H
#define RSIW_TESTS_PROVIDER_RING_H

#include <stdint.h>
#include <string.h>

/*
 * Writes sqe (its flags replaced by flags | SIW_WQE_VALID) into the next
 * slot of qp's send queue and rings the doorbell; returns siw_db()'s result.
 */
static int raw_post(struct siw_qp *qp, const struct siw_sqe *sqe,
		    uint16_t flags)
{
	const uint8_t *b = (const uint8_t *)sqe;
	struct siw_sqe *slot = &qp->sendq[qp->sq_put % qp->num_sqe];

	/* Everything but the flags, then the flags with VALID: the element */
	memcpy((uint8_t *)slot + 16, b + 16, sizeof(*sqe) - 16);
	memcpy(slot, b, 8);
	slot->num_sge = sqe->num_sge;
	slot->opcode = sqe->opcode;
	slot->rkey = sqe->rkey;
	__atomic_store_n(&slot->flags, (uint16_t)(flags | SIW_WQE_VALID),
			 __ATOMIC_RELEASE);
	qp->sq_put++;
	return siw_db(qp);
}

#endif
