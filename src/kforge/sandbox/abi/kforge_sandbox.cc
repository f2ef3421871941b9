#include "kforge/sandbox/abi/kforge_sandbox.h"

#include <cerrno>
#include <string>

#include "kforge/common/errno_message.h"
#include "kforge/common/json.h"
#include "kforge/sandbox/jail.h"

namespace {

thread_local std::string g_last_error;
thread_local std::string g_last_report;

int fail(std::string message) {
  g_last_error = std::move(message);
  return -1;
}

}  // namespace

extern "C" {

int kforge_sandbox_abi_version(void) {
  return KFORGE_SANDBOX_ABI_VERSION;
}

int kforge_sandbox_enter(const char* jail_json) {
  if (jail_json == nullptr) return fail("jail: null");
  auto parsed = kforge::parse_json(jail_json);
  if (!parsed.is_ok()) return fail("jail: " + parsed.status().message());
  auto spec = kforge::sandbox::JailSpec::from_json(*parsed);
  if (!spec.is_ok()) return fail("jail." + spec.status().to_string());
  auto report = kforge::sandbox::enter_jail(*spec);
  if (!report.is_ok()) return fail(report.status().message());
  g_last_report = report->dump();
  return 0;
}

const char* kforge_sandbox_last_report(void) {
  return g_last_report.c_str();
}

pid_t kforge_sandbox_clone(int new_pid_ns, int new_mount_ns, int new_net_ns) {
  pid_t pid =
      kforge::sandbox::clone_into_namespaces(new_pid_ns != 0, new_mount_ns != 0, new_net_ns != 0);
  if (pid < 0) fail("clone: " + kforge::errno_message(errno));
  return pid;
}

int kforge_sandbox_can_jail(void) {
  std::string why;
  if (kforge::sandbox::can_jail(&why)) return 1;
  g_last_error = why;
  return 0;
}

const char* kforge_sandbox_last_error(void) {
  return g_last_error.c_str();
}

}  // extern "C"
