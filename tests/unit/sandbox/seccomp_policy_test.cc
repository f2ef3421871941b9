// The jobs' seccomp filter (sandbox/seccomp_policy.h), installed in a forked child (no
// privilege needed: no_new_privs first): socket families a job never needs are
// EAFNOSUPPORT, what torch, Triton and CUDA use still works.
#include "kforge/sandbox/seccomp_policy.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace kforge::sandbox {
namespace {

constexpr int kAfVsock = 40;
constexpr int kAfAlg = 38;
constexpr int kNetlinkRoute = 0;
constexpr int kNetlinkGeneric = 16;

// The errno of socket(family, type, protocol) under the filter (0: it worked), from a child.
int socket_errno_under_filter(const std::string& bpf, long family, int type, int protocol,
                              bool pair = false) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    sock_fprog prog{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                    reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()))};  // NOLINT
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
      ::_exit(255);
    }
    int fds[2];
    const long rc = pair ? ::syscall(SYS_socketpair, family, type, protocol, fds)
                         : ::syscall(SYS_socket, family, type, protocol);
    ::_exit(rc >= 0 ? 0 : errno);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SeccompPolicyTest, OnlyTheSocketFamiliesJobsUseAreAllowed) {
  auto bpf = build_seccomp_bpf({});
  ASSERT_TRUE(bpf.is_ok()) << bpf.status().to_string();
  EXPECT_EQ(socket_errno_under_filter(*bpf, AF_UNIX, SOCK_STREAM, 0), 0);
  EXPECT_EQ(socket_errno_under_filter(*bpf, AF_INET, SOCK_DGRAM, 0), 0);
  EXPECT_EQ(socket_errno_under_filter(*bpf, AF_INET6, SOCK_STREAM, 0), 0);
  EXPECT_EQ(socket_errno_under_filter(*bpf, AF_NETLINK, SOCK_RAW, kNetlinkRoute), 0);
  EXPECT_EQ(socket_errno_under_filter(*bpf, AF_UNIX, SOCK_STREAM, 0, /*pair=*/true), 0);

  EXPECT_EQ(socket_errno_under_filter(*bpf, kAfVsock, SOCK_STREAM, 0), EAFNOSUPPORT);
  EXPECT_EQ(socket_errno_under_filter(*bpf, kAfAlg, SOCK_SEQPACKET, 0), EAFNOSUPPORT);
  EXPECT_EQ(socket_errno_under_filter(*bpf, AF_PACKET, SOCK_RAW, 0), EAFNOSUPPORT);
  EXPECT_EQ(socket_errno_under_filter(*bpf, 63, SOCK_STREAM, 0), EAFNOSUPPORT);
  EXPECT_EQ(socket_errno_under_filter(*bpf, 200, SOCK_STREAM, 0), EAFNOSUPPORT);
  // The kernel reads an int: high bits set must not slip AF_VSOCK past the filter.
  EXPECT_EQ(socket_errno_under_filter(*bpf, (1L << 32) | kAfVsock, SOCK_STREAM, 0), EAFNOSUPPORT);
  EXPECT_EQ(socket_errno_under_filter(*bpf, AF_NETLINK, SOCK_RAW, kNetlinkGeneric),
            EPROTONOSUPPORT);
  EXPECT_EQ(socket_errno_under_filter(*bpf, kAfVsock, SOCK_STREAM, 0, /*pair=*/true), EAFNOSUPPORT);
}

TEST(SeccompPolicyTest, RefusedFamiliesAreNamedForHealth) {
  const auto refused = refused_socket_families();
  auto has = [&](const char* name) {
    return std::find(refused.begin(), refused.end(), name) != refused.end();
  };
  EXPECT_TRUE(has("AF_VSOCK") && has("AF_PACKET") && has("AF_ALG") && has("AF_XDP"));
  EXPECT_FALSE(has("AF_UNIX") || has("AF_INET") || has("AF_INET6") || has("AF_NETLINK"));
}

}  // namespace
}  // namespace kforge::sandbox
