// SPDX-License-Identifier: GPL-2.0

#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#if IS_ENABLED(CONFIG_RUST_RDMA_ABSTRACTIONS)

__rust_helper struct ib_ucontext *rust_helper_rdma_udata_to_ucontext(struct ib_udata *udata)
{
	return udata ? rdma_udata_to_uverbs_attr_bundle(udata)->context : NULL;
}

__rust_helper int rust_helper_ib_is_udata_in_empty(struct ib_udata *udata)
{
	return ib_is_udata_in_empty(udata);
}

__rust_helper int rust_helper_ib_no_udata_io(struct ib_udata *udata)
{
	return ib_no_udata_io(udata);
}

#endif
