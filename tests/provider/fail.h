/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fail(): report a failed check as "PROG ROLE: FAIL: ..." and exit 1. A
 * test defines PROG (its name) before including this and sets role.
 */
#ifndef RSIW_TESTS_PROVIDER_FAIL_H
#define RSIW_TESTS_PROVIDER_FAIL_H

#include <stdio.h>
#include <stdlib.h>

static const char *role;

#define fail(...)                                                      \
	do {                                                           \
		fprintf(stderr, PROG " %s: FAIL: ", role);             \
		fprintf(stderr, __VA_ARGS__);                          \
		fputc('\n', stderr);                                   \
		exit(1);                                               \
	} while (0)

#endif
