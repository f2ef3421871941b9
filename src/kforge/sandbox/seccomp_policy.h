// The seccomp filter of a jailed job (docs/security.md "Process isolation", its system calls),
// built with libseccomp and exported as a raw BPF program that enter_jail() installs (in the
// Python worker through libkforge_sandbox.so, in the native worker directly).
//
// Default allow, with a deny list of what kernels never need: namespace and mount changes,
// ptrace and cross-process memory access, kernel modules, kexec, bpf, perf_event_open (unless
// profiling is allowed), io_uring, userfaultfd, keyrings, clock and host changes, ... (EPERM);
// clone3 answers ENOSYS (its flags sit behind a pointer, so glibc falls back to clone), and
// clone with any CLONE_NEW* flag is EPERM. socket(2) keeps AF_UNIX, AF_INET, AF_INET6 and
// AF_NETLINK (NETLINK_ROUTE only); every other family (AF_VSOCK, AF_PACKET, AF_ALG, ...) is
// EAFNOSUPPORT, and socketpair(2) is AF_UNIX only. Other architectures and x32 system calls kill
// the process. torch, Triton (cc, ptxas), CUDA, NVRTC, nvcc/load_inline and CuPy need none of the
// denied calls (measured on the GPU host).
#pragma once

#include <string>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::sandbox {

struct SeccompOptions {
  // Nsight Compute / CUPTI profiling through perf_event_open (device metrics).
  bool allow_perf_events = false;
};

// The raw `struct sock_filter` array (a multiple of 8 bytes).
StatusOr<std::string> build_seccomp_bpf(const SeccompOptions& options);

// Names of the system calls the filter denies with EPERM (for docs and tests).
std::vector<std::string> denied_syscalls(const SeccompOptions& options);

// Names of the socket families the filter refuses (EAFNOSUPPORT), e.g. "AF_VSOCK"; families
// the kernel does not name yet are refused too.
std::vector<std::string> refused_socket_families();

}  // namespace kforge::sandbox
