// Reading and writing cgroup files, and the two ways a cgroup's processes are ended, shared
// by the job cgroups (cgroup.h) and their removal (cgroup_reaper.h). Works alike on a cgroup v2
// directory, a hybrid host's unified directory and a v1 memory/pids directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::sandbox {

Status cgroup_write(const std::filesystem::path& file, std::string_view text);
std::string cgroup_read(const std::filesystem::path& file);
// The first word of `file` as a number; 0 for "max", a missing file or garbage.
int64_t cgroup_read_int(const std::filesystem::path& file);
// The value of `key` in "key value" lines (memory.events, pids.events, memory.oom_control).
int64_t cgroup_read_keyed(const std::filesystem::path& file, std::string_view key);
// The processes in `dir` (its cgroup.procs).
std::vector<pid_t> cgroup_members(const std::filesystem::path& dir);
// This process's cgroup path in hierarchy `controller` ("" = the v2 / unified hierarchy).
std::string own_cgroup_path(std::string_view controller);

// SIGKILL to every process in `dir`: cgroup.kill where the kernel has it (v2 and the unified
// tree, 5.14+; forks racing it die at birth), else a signal to each member listed now.
void kill_cgroup_members(const std::filesystem::path& dir);
// Whether `dir` is empty of processes by `deadline` (polled).
bool wait_cgroup_empty(const std::filesystem::path& dir,
                       std::chrono::steady_clock::time_point deadline);
// One rmdir of `dir`: true when it is gone (removed now, or already). A cgroup can be
// removed once the kernel has reaped its last process and it has no child cgroup.
bool remove_cgroup_once(const std::filesystem::path& dir);

}  // namespace kforge::sandbox
