/* kforge_sandbox.h: the C ABI of libkforge_sandbox.so, through which the Python worker jails
 * its processes with the same code as the native worker (src/kforge/sandbox/jail.h).
 *
 * The Python judge process calls kforge_sandbox_clone() (wrapped in PyOS_BeforeFork /
 * PyOS_AfterFork_*) to start the candidate process as pid 1 of a new pid namespace, then each
 * process calls kforge_sandbox_enter() with the `jail` object the supervisor sent for it.
 *
 * Errors: a function returning int returns 0 on success; the message of the last failure on
 * the calling thread is kforge_sandbox_last_error().
 *
 * Example (Python):
 *   lib = ctypes.CDLL(path)
 *   if lib.kforge_sandbox_enter(json.dumps(jail).encode()) != 0:
 *       raise RuntimeError(lib.kforge_sandbox_last_error().decode())
 *   report = json.loads(lib.kforge_sandbox_last_report().decode())
 */
#ifndef KFORGE_SANDBOX_H_
#define KFORGE_SANDBOX_H_

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KFORGE_SANDBOX_ABI_VERSION 1

int kforge_sandbox_abi_version(void);

/* Applies the jail (a UTF-8 JSON object, see JailSpec::from_json) to the calling process. */
int kforge_sandbox_enter(const char* jail_json);

/* The JSON report of the last successful kforge_sandbox_enter on this thread. */
const char* kforge_sandbox_last_report(void);

/* fork()-like clone into new namespaces (non-zero flags ask for them): the child's pid in
 * the parent, 0 in the child, -1 on failure (errno in the message). */
pid_t kforge_sandbox_clone(int new_pid_ns, int new_mount_ns, int new_net_ns);

/* Whether this process may jail (1) or not (0); the reason is kforge_sandbox_last_error(). */
int kforge_sandbox_can_jail(void);

const char* kforge_sandbox_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KFORGE_SANDBOX_H_ */
