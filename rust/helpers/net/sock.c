// SPDX-License-Identifier: GPL-2.0

#include <linux/tcp.h>
#include <net/ipv6.h>
#include <net/sock.h>
#include <net/tcp.h>

#ifdef CONFIG_INET

__rust_helper unsigned int rust_helper_skb_headlen(const struct sk_buff *skb)
{
	return skb_headlen(skb);
}

__rust_helper bool rust_helper_skb_frags_readable(const struct sk_buff *skb)
{
	return skb_frags_readable(skb);
}

__rust_helper struct skb_shared_info *rust_helper_skb_shinfo(const struct sk_buff *skb)
{
	return skb_shinfo(skb);
}

__rust_helper struct page *rust_helper_skb_frag_page(const skb_frag_t *frag)
{
	return skb_frag_page(frag);
}

__rust_helper bool rust_helper_skb_has_frag_list(const struct sk_buff *skb)
{
	return skb_has_frag_list(skb);
}

__rust_helper unsigned char *rust_helper_skb_data(const struct sk_buff *skb)
{
	return skb->data;
}

/* The skb of @skb's fragment list after @iter, the first if @iter is NULL (skb_walk_frags()). */
__rust_helper struct sk_buff *rust_helper_skb_walk_frags_next(const struct sk_buff *skb,
							      const struct sk_buff *iter)
{
	return iter ? iter->next : skb_shinfo(skb)->frag_list;
}

__rust_helper void rust_helper_lock_sock(struct sock *sk)
{
	lock_sock(sk);
}

__rust_helper void rust_helper_sock_hold(struct sock *sk)
{
	sock_hold(sk);
}

__rust_helper void rust_helper_sock_put(struct sock *sk)
{
	sock_put(sk);
}

__rust_helper void rust_helper_sk_callback_read_lock_bh(struct sock *sk)
{
	read_lock_bh(&sk->sk_callback_lock);
}

__rust_helper void rust_helper_sk_callback_read_unlock_bh(struct sock *sk)
{
	read_unlock_bh(&sk->sk_callback_lock);
}

__rust_helper void rust_helper_sk_callback_write_lock_bh(struct sock *sk)
{
	write_lock_bh(&sk->sk_callback_lock);
}

__rust_helper void rust_helper_sk_callback_write_unlock_bh(struct sock *sk)
{
	write_unlock_bh(&sk->sk_callback_lock);
}

/* Caller holds sk_callback_lock (read or write). */
__rust_helper void *rust_helper_sk_user_data_locked(struct sock *sk)
{
	return (void *)((uintptr_t)rcu_dereference_raw(__sk_user_data(sk)) &
			SK_USER_DATA_PTRMASK);
}

/*
 * Caller holds sk_callback_lock. Returns sk_user_data if it was set with
 * SK_USER_DATA_NOCOPY and no other flag, as rust_helper_sk_set_user_data_nocopy()
 * sets it, and NULL otherwise (not set, or set by a BPF sockmap or reuseport array).
 */
__rust_helper void *rust_helper_sk_user_data_nocopy_locked(struct sock *sk)
{
	uintptr_t v = (uintptr_t)rcu_dereference_raw(__sk_user_data(sk));

	if ((v & ~SK_USER_DATA_PTRMASK) != SK_USER_DATA_NOCOPY)
		return NULL;
	return (void *)(v & SK_USER_DATA_PTRMASK);
}

/* Caller holds sk_callback_lock for writing; ptr is at least 4-byte aligned. */
__rust_helper void rust_helper_sk_set_user_data_nocopy(struct sock *sk, void *ptr)
{
	__rcu_assign_sk_user_data_with_flags(sk, ptr, ptr ? SK_USER_DATA_NOCOPY : 0);
}

/*
 * Field accessors. Rust must not use bindgen's offsets of struct sock fields:
 * they differ from the C layout for fields after sk_data_ready (observed in
 * 7.3 with this config: sk_state_change at 0x448 in the bindings, 0x488 in C).
 */
__rust_helper void rust_helper_sk_callbacks_get(struct sock *sk,
						void (**cbs)(struct sock *sk))
{
	cbs[0] = READ_ONCE(sk->sk_data_ready);
	cbs[1] = READ_ONCE(sk->sk_write_space);
	cbs[2] = READ_ONCE(sk->sk_state_change);
	cbs[3] = READ_ONCE(sk->sk_error_report);
}

/* Caller holds sk_callback_lock for writing. */
__rust_helper void rust_helper_sk_callbacks_set(struct sock *sk,
						void (*const *cbs)(struct sock *sk))
{
	WRITE_ONCE(sk->sk_data_ready, cbs[0]);
	WRITE_ONCE(sk->sk_write_space, cbs[1]);
	WRITE_ONCE(sk->sk_state_change, cbs[2]);
	WRITE_ONCE(sk->sk_error_report, cbs[3]);
}

__rust_helper u8 rust_helper_sk_state_read(const struct sock *sk)
{
	return READ_ONCE(sk->sk_state);
}

__rust_helper int rust_helper_sk_err_read(const struct sock *sk)
{
	return READ_ONCE(sk->sk_err);
}

__rust_helper u16 rust_helper_sk_family_read(const struct sock *sk)
{
	return sk->sk_family;
}

__rust_helper struct sock *rust_helper_socket_sk(const struct socket *sock)
{
	return sock->sk;
}

/*
 * struct msghdr and sockptr_t are built in C for the same reason (bitfields,
 * nested unions).
 */
__rust_helper int rust_helper_kernel_sendmsg_kvec(struct socket *sock,
						  struct kvec *vec, size_t num,
						  size_t size, unsigned int flags)
{
	struct msghdr msg = { .msg_flags = flags };

	return kernel_sendmsg(sock, &msg, vec, num, size);
}

/* Caller holds the socket lock. */
__rust_helper int rust_helper_tcp_sendmsg_kvec_locked(struct sock *sk,
						      const struct kvec *vec,
						      size_t num, size_t size,
						      unsigned int flags)
{
	struct msghdr msg = { .msg_flags = flags };

	iov_iter_kvec(&msg.msg_iter, ITER_SOURCE, vec, num, size);
	return tcp_sendmsg_locked(sk, &msg, size);
}

/*
 * From sk_data_ready: the caller holds the socket's spinlock
 * (bh_lock_sock(), as tcp_v4_rcv() does around tcp_v4_do_rcv()). Sends only
 * if no task owns the socket, which gives the caller the socket to itself,
 * as lock_sock() would (-EBUSY otherwise: the backlog is being processed in
 * release_sock(), by the owner). Atomic context: allocations must not sleep,
 * and current->task_frag belongs to whichever task the softirq interrupted,
 * so the socket's own page fragment is used. Never waits (MSG_DONTWAIT).
 */
__rust_helper int rust_helper_tcp_sendmsg_kvec_bh(struct sock *sk,
						  const struct kvec *vec,
						  size_t num, size_t size)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
	gfp_t gfp = sk->sk_allocation;
	bool task_frag = sk->sk_use_task_frag;
	int ret;

	if (sock_owned_by_user_nocheck(sk))
		return -EBUSY;
	sk->sk_allocation = GFP_ATOMIC;
	sk->sk_use_task_frag = false;
	iov_iter_kvec(&msg.msg_iter, ITER_SOURCE, vec, num, size);
	ret = tcp_sendmsg_locked(sk, &msg, size);
	sk->sk_use_task_frag = task_frag;
	sk->sk_allocation = gfp;
	return ret;
}

/*
 * Caller holds the socket lock. flags carries MSG_SPLICE_PAGES to send the
 * pages by reference, or MSG_ZEROCOPY with ubuf (which the caller holds a
 * reference on) to send them by reference with a completion; without either
 * TCP copies their bytes.
 */
__rust_helper int rust_helper_tcp_sendmsg_bvec_locked(struct sock *sk,
						      const struct bio_vec *bvec,
						      size_t num, size_t size,
						      unsigned int flags,
						      struct ubuf_info *ubuf)
{
	struct msghdr msg = { .msg_flags = flags, .msg_ubuf = ubuf };

	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bvec, num, size);
	return tcp_sendmsg_locked(sk, &msg, size);
}

__rust_helper int rust_helper_sock_setsockopt_int(struct socket *sock,
						  int level, int optname,
						  int val)
{
	return sock_setsockopt(sock, level, optname, KERNEL_SOCKPTR(&val),
			       sizeof(val));
}

__rust_helper int rust_helper_sk_stream_wspace(const struct sock *sk)
{
	return sk_stream_wspace(sk);
}

__rust_helper int rust_helper_sk_stream_min_wspace(const struct sock *sk)
{
	return sk_stream_min_wspace(sk);
}

__rust_helper u32 rust_helper_tcp_sk_mss_cache(const struct sock *sk)
{
	return READ_ONCE(tcp_sk(sk)->mss_cache);
}

__rust_helper int rust_helper_tcp_inq(struct sock *sk)
{
	return tcp_inq(sk);
}

__rust_helper u32 rust_helper_tcp_sk_gso_segs(const struct sock *sk)
{
	return READ_ONCE(tcp_sk(sk)->gso_segs);
}

__rust_helper int rust_helper_ip6_sock_set_v6only(struct sock *sk)
{
	return ip6_sock_set_v6only(sk);
}

/*
 * For a socket on the memory reclaim path (as in nvme-tcp, drbd or the sunrpc
 * transports): its buffers are allocated with gfp. Under the socket lock, as
 * TCP reads it under it.
 */
__rust_helper void rust_helper_sk_set_allocation(struct sock *sk, gfp_t gfp)
{
	lock_sock(sk);
	WRITE_ONCE(sk->sk_allocation, gfp);
	release_sock(sk);
}

__rust_helper gfp_t rust_helper_sk_allocation_read(const struct sock *sk)
{
	return READ_ONCE(sk->sk_allocation);
}

__rust_helper bool rust_helper_sk_use_task_frag_read(const struct sock *sk)
{
	return READ_ONCE(sk->sk_use_task_frag);
}

__rust_helper void rust_helper_sk_clear_nospace(struct sock *sk)
{
	struct socket *sock = READ_ONCE(sk->sk_socket);

	if (sock)
		clear_bit(SOCK_NOSPACE, &sock->flags);
}

/*
 * sock_lock_init_class_and_name() with an explicit owner module (the macro
 * uses THIS_MODULE, which would be the kernel here). Only for a socket that
 * nobody else can reach yet: unbound and closed. Returns false otherwise.
 */
__rust_helper bool rust_helper_sock_reclassify(struct sock *sk,
					       struct module *owner,
					       const char *sname,
					       struct lock_class_key *skey,
					       const char *name,
					       struct lock_class_key *key)
{
#ifdef CONFIG_DEBUG_LOCK_ALLOC
	if (!sock_allow_reclassification(sk) || sk->sk_state != TCP_CLOSE ||
	    inet_sk(sk)->inet_num)
		return false;
#if IS_ENABLED(CONFIG_PROVE_LOCKING) && IS_ENABLED(CONFIG_MODULES)
	if (sk->sk_owner)
		return false;
#endif
	sk_owner_set(sk, owner);
	sk->sk_lock.owned = 0;
	init_waitqueue_head(&sk->sk_lock.wq);
	spin_lock_init(&sk->sk_lock.slock);
	debug_check_no_locks_freed((void *)&sk->sk_lock, sizeof(sk->sk_lock));
	lockdep_set_class_and_name(&sk->sk_lock.slock, skey, sname);
	lockdep_init_map(&sk->sk_lock.dep_map, name, key, 0);
#endif
	return true;
}

#endif
