// SPDX-License-Identifier: GPL-2.0

#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include <linux/scatterlist.h>
#include <linux/mm.h>

#if IS_ENABLED(CONFIG_RUST_RDMA_ABSTRACTIONS)

__rust_helper struct ib_ucontext *rust_helper_rdma_udata_to_ucontext(struct ib_udata *udata)
{
	return udata ? rdma_udata_to_uverbs_attr_bundle(udata)->context : NULL;
}

/*
 * The user context of the command: NULL until its alloc_ucontext has succeeded (the uverbs
 * file publishes the context only then), so a context under construction is never returned.
 */
__rust_helper struct ib_ucontext *rust_helper_rdma_udata_to_live_ucontext(struct ib_udata *udata)
{
	struct ib_ucontext *uctx;

	if (!udata)
		return NULL;
	uctx = ib_uverbs_get_ucontext(rdma_udata_to_uverbs_attr_bundle(udata));
	return IS_ERR(uctx) ? NULL : uctx;
}

__rust_helper u64 rust_helper_rdma_user_mmap_get_offset(const struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

__rust_helper int rust_helper_ib_is_udata_in_empty(struct ib_udata *udata)
{
	return ib_is_udata_in_empty(udata);
}

__rust_helper int rust_helper_ib_no_udata_io(struct ib_udata *udata)
{
	return ib_no_udata_io(udata);
}

/* Whether ib_umem_get() pinned the pages for writing (a bit field). */
__rust_helper bool rust_helper_ib_umem_writable(const struct ib_umem *umem)
{
	return umem->writable;
}

__rust_helper bool rust_helper_ib_uses_virt_dma(struct ib_device *dev)
{
	return ib_uses_virt_dma(dev);
}

__rust_helper struct page *rust_helper_sg_page_iter_page(struct sg_page_iter *piter)
{
	return sg_page_iter_page(piter);
}

__rust_helper bool rust_helper_rdma_pd_is_kernel(const struct ib_pd *pd)
{
	return !pd->uobject;
}

__rust_helper bool rust_helper_virt_addr_valid(unsigned long addr)
{
	return virt_addr_valid(addr);
}

__rust_helper void rust_helper_get_page(struct page *page)
{
	get_page(page);
}

__rust_helper void rust_helper_put_page(struct page *page)
{
	put_page(page);
}

#endif
