// SPDX-License-Identifier: GPL-2.0

#include <asm/barrier.h>
#include <linux/cache.h>
#include <linux/io.h>
#include <linux/libnvdimm.h>
#include <linux/mm.h>
#include <linux/sched.h>

/* Not named after arch_wb_cache_pmem(): that is a function or a static inline by architecture. */
__rust_helper void rust_helper_pmem_write_back(void *addr, size_t size)
{
	arch_wb_cache_pmem(addr, size);
}

__rust_helper void rust_helper_pmem_wmb(void)
{
	pmem_wmb();
}

__rust_helper phys_addr_t rust_helper_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}

__rust_helper int rust_helper_pmem_line_size(void)
{
	return cache_line_size();
}

__rust_helper void rust_helper_cond_resched(void)
{
	cond_resched();
}
