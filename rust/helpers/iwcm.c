// SPDX-License-Identifier: GPL-2.0

#include <linux/sched/signal.h>
#include <rdma/iw_cm.h>
#include <rdma/restrack.h>

#if IS_ENABLED(CONFIG_INFINIBAND)

/*
 * Accessors for struct iw_cm_id. Rust does not rely on the bindings' layout
 * of these structures (see rust/helpers/net/sock.c for why).
 */
__rust_helper void rust_helper_iw_cm_id_add_ref(struct iw_cm_id *id)
{
	id->add_ref(id);
}

__rust_helper void rust_helper_iw_cm_id_rem_ref(struct iw_cm_id *id)
{
	id->rem_ref(id);
}

/* which: 0 local, 1 remote, 2 mapped local, 3 mapped remote. */
__rust_helper const struct sockaddr_storage *
rust_helper_iw_cm_id_addr(const struct iw_cm_id *id, int which)
{
	switch (which) {
	case 0:
		return &id->local_addr;
	case 1:
		return &id->remote_addr;
	case 2:
		return &id->m_local_addr;
	default:
		return &id->m_remote_addr;
	}
}

__rust_helper bool rust_helper_iw_cm_id_afonly(const struct iw_cm_id *id)
{
	return id->afonly;
}

__rust_helper bool rust_helper_iw_cm_id_user(const struct iw_cm_id *id)
{
	return id->user;
}

/*
 * Whether @qp is a user QP that the calling process created: its restrack
 * entry holds the creating task until the QP is destroyed.
 */
__rust_helper bool rust_helper_ib_qp_of_current(const struct ib_qp *qp)
{
	return qp->uobject && qp->res.task &&
	       same_thread_group(qp->res.task, current);
}

__rust_helper int rust_helper_iw_cm_id_tos(const struct iw_cm_id *id)
{
	return id->tos_set ? id->tos : -1;
}

__rust_helper struct ib_device *
rust_helper_iw_cm_id_device(const struct iw_cm_id *id)
{
	return id->device;
}

__rust_helper unsigned long rust_helper_iw_cm_id_provider_data(struct iw_cm_id *id)
{
	return (unsigned long)READ_ONCE(id->provider_data);
}

__rust_helper void rust_helper_iw_cm_id_set_provider_data(struct iw_cm_id *id,
							  unsigned long v)
{
	WRITE_ONCE(id->provider_data, (void *)v);
}

__rust_helper int rust_helper_iw_cm_id_event(struct iw_cm_id *id,
					     enum iw_cm_event_type type,
					     int status,
					     const struct sockaddr_storage *laddr,
					     const struct sockaddr_storage *raddr,
					     const void *pdata, u8 pdata_len,
					     unsigned long provider_data,
					     u8 ird, u8 ord)
{
	struct iw_cm_event ev = {
		.event = type,
		.status = status,
		.private_data = (void *)pdata,
		.private_data_len = pdata_len,
		.provider_data = (void *)provider_data,
		.ird = ird,
		.ord = ord,
	};

	if (laddr)
		ev.local_addr = *laddr;
	if (raddr)
		ev.remote_addr = *raddr;
	return id->event_handler(id, &ev);
}

__rust_helper const void *
rust_helper_iw_cm_conn_param_pdata(const struct iw_cm_conn_param *p, u16 *len)
{
	*len = p->private_data ? p->private_data_len : 0;
	return p->private_data;
}

__rust_helper void rust_helper_iw_cm_conn_param_get(const struct iw_cm_conn_param *p,
						    u32 *ird, u32 *ord, u32 *qpn)
{
	*ird = p->ird;
	*ord = p->ord;
	*qpn = p->qpn;
}

#endif
