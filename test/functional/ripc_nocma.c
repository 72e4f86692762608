/*
 * ripc_nocma PROGRAM [ARGS...]: run PROGRAM where the kernel refuses
 * cross-memory attach, as a container runtime's seccomp profile does: a
 * seccomp filter makes process_vm_readv(2) and process_vm_writev(2) fail
 * with EPERM, then the program is exec'd (same pid; the filter is
 * inherited by everything it starts).  Then libfabric's shm finds no CMA
 * (its own probe fails) and libripc must notice it too, without being
 * told by FI_SHM_DISABLE_CMA (ripc(7), TRANSPORTS).  Used as the wrapper
 * of test/scripts/lifecycle.sh (-w).
 *
 * Exit status 77 (skip) where seccomp filters cannot be installed here.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#if defined(__x86_64__)
#define NOCMA_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NOCMA_ARCH AUDIT_ARCH_AARCH64
#endif

int main(int argc, char **argv)
{
#ifdef NOCMA_ARCH
	struct sock_filter filter[] = {
		/* Another architecture's calling convention: leave alone. */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NOCMA_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1,
			 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & 0xffff)),
	};
	struct sock_fprog prog = {
		.len = sizeof(filter) / sizeof(filter[0]),
		.filter = filter,
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		fprintf(stderr, "ripc_nocma: no seccomp filter here: %s\n",
			strerror(errno));
		return 77;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "ripc_nocma: %s: %s\n", argv[1], strerror(errno));
	return 127;
#else
	(void)argc;
	(void)argv;
	fprintf(stderr, "ripc_nocma: no seccomp filter for this architecture\n");
	return 77;
#endif
}
