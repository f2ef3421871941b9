// The jail's minimal root file system (jail_spec.h says what it holds; docs/security.md
// "The jail's file system").
//
// build_root() runs in the process being jailed, right after unshare(CLONE_NEWNS), as root:
//   1. every mount made private; every source opened (O_PATH) while the host's view is there;
//      the symlinks on the way to each read-only path recorded;
//   2. a fresh tmpfs mounted on /tmp (this namespace's only) becomes the new root: in it, in
//      path order (parents first), the read-only binds, device binds, binds, hidden paths
//      covered by an empty tmpfs, the private tmpfs, files, symlinks, /sys and a new /proc;
//      directories made on the way are 0711 (searchable, not listable: /root on the way to a
//      venv shows nothing), those holding files, links or devices 0755;
//   3. pivot_root into it, the old root detached, the new root remounted read-only.
// A read-only bind is read-only all the way down where the kernel has mount_setattr (5.12+).
// Errors name the step and the path.
#pragma once

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/sandbox/jail_spec.h"

namespace kforge::sandbox {

// Builds and enters the root of `spec`; adds {"mounts": N, "missing": [...], "hidden": [...]}
// (read-only paths absent on this host, or skipped because they are hidden) to `report`.
Status build_root(const JailSpec& spec, Json& report);

}  // namespace kforge::sandbox
