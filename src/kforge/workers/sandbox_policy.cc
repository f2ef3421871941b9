#include "kforge/workers/sandbox_policy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>

#include "kforge/common/base64.h"
#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/sandbox/jail.h"
#include "kforge/sandbox/seccomp_policy.h"

namespace kforge::workers {
namespace {

namespace fs = std::filesystem;

Status make_owned_dir(const fs::path& dir, uid_t uid, gid_t gid, mode_t mode) {
  KF_RETURN_IF_ERROR(make_dirs(dir));
  if (::chown(dir.c_str(), uid, gid) != 0) return errno_error("chown " + dir.string(), errno);
  if (::chmod(dir.c_str(), mode) != 0) return errno_error("chmod " + dir.string(), errno);
  return Status::ok();
}

}  // namespace

ChildSandbox::~ChildSandbox() {
  cgroup.reset();  // kills what is left, removes the cgroup
  if (!scratch.empty()) {
    if (Status s = remove_tree(scratch); !s) {
      KF_LOG_WARN("could not remove scratch {}: {}", scratch.string(), s.message());
    }
  }
}

int nvidia_device_minor(const std::string& pci_bus_id) {
  if (pci_bus_id.empty()) return kUnknownGpuMinor;
  std::string lower = pci_bus_id;
  for (char& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::ifstream in("/proc/driver/nvidia/gpus/" + lower + "/information");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("Device Minor:")) {
      try {
        return std::stoi(line.substr(13));
      } catch (...) {
        return kUnknownGpuMinor;
      }
    }
  }
  return kUnknownGpuMinor;
}

namespace {

// Directories every jail mounts a private, empty tmpfs on (with the process's scratch).
constexpr std::array<const char*, 2> kPrivateTmpfs = {"/tmp", "/dev/shm"};
// The file systems no job sees, besides the data directory.
constexpr const char* kCgroupMount = "/sys/fs/cgroup";

// The kernel caches below a process's cache directory: the environment variable pointing a
// tool at each (the cuda C ABI's cache, "cuda", is the job spec's cache_dir/cuda instead).
constexpr std::array<std::pair<const char*, const char*>, 5> kCacheEnv = {{
    {"TORCHINDUCTOR_CACHE_DIR", "torchinductor"},
    {"TRITON_CACHE_DIR", "triton"},
    {"TORCH_EXTENSIONS_DIR", "torch_extensions"},
    {"CUPY_CACHE_DIR", "cupy"},
    {"CUDA_CACHE_PATH", "cuda_jit"},
}};

}  // namespace

StatusOr<std::shared_ptr<SandboxPolicy>> SandboxPolicy::create(SandboxOptions options) {
  if (options.mode != "auto" && options.mode != "required" && options.mode != "off") {
    return invalid_argument("must be auto, required or off, got '" + options.mode + "'",
                            "--sandbox");
  }
  if (options.kernel_cache != "isolated" && options.kernel_cache != "shared") {
    return invalid_argument("must be isolated or shared, got '" + options.kernel_cache + "'",
                            "--kernel-cache");
  }
  auto policy = std::shared_ptr<SandboxPolicy>(new SandboxPolicy(std::move(options)));
  SandboxPolicy& p = *policy;
  const auto& o = p.options_;
  if (o.mode == "off") {
    p.why_not_ = "disabled (--sandbox off)";
  } else if (std::string why; !sandbox::can_jail(&why)) {
    if (o.mode == "required") return unavailable("--sandbox required, but " + why);
    p.why_not_ = why;
  } else {
    sandbox::SeccompOptions seccomp;
    seccomp.allow_perf_events = o.allow_perf_events;
    KF_ASSIGN_OR_RETURN(p.seccomp_bpf_, sandbox::build_seccomp_bpf(seccomp));
    RootPlanOptions root = o.root;
    root.data_dir = o.data_dir;
    KF_ASSIGN_OR_RETURN(p.root_, plan_root(root));
    p.jailing_ = true;
  }
  if (o.mode != "off") {
    sandbox::CgroupOptions co;
    co.instance = "kforge-" + std::to_string(::getpid());
    auto tree = sandbox::make_cgroup_tree(co);
    if (tree.is_ok()) {
      p.cgroups_ = std::move(tree).value();
    } else {
      p.cgroups_error_ = tree.status().message();
      if (o.mode == "required" && p.jailing_) {
        return unavailable("--sandbox required, but cgroups: " + p.cgroups_error_);
      }
      KF_LOG_WARN("sandbox: no per-job cgroups ({}): memory is watched per process group",
                  p.cgroups_error_);
    }
  }
  p.memory_bytes_ = o.memory_bytes > 0 ? o.memory_bytes : sandbox::default_job_memory_bytes();
  p.tmp_bytes_ = o.tmp_bytes > 0 ? o.tmp_bytes : static_cast<uint64_t>(p.memory_bytes_) / 4;

  // Directories: the data directory is searchable but not listable; caches the jobs share
  // belong to their group. Its ancestors need not let job uids pass (a data directory under
  // root's 0700 home is fine): a jail reaches what it uses of it only through the binds and
  // private tmpfs mounts of its minimal root, made as root before its uid changes.
  KF_RETURN_IF_ERROR(make_dirs(o.data_dir / "scratch"));
  if (p.jailing_) {
    KF_RETURN_IF_ERROR(make_owned_dir(o.data_dir, 0, 0, 0711));
    KF_RETURN_IF_ERROR(make_owned_dir(o.data_dir / "scratch", 0, 0, 0711));
    KF_RETURN_IF_ERROR(make_owned_dir(o.data_dir / "cache", 0, 0, 0711));
    KF_RETURN_IF_ERROR(make_owned_dir(o.data_dir / "cache" / "triton", 0, 0, 0755));
    KF_RETURN_IF_ERROR(make_owned_dir(p.judge_cache_dir(), 0, o.judge_gid, 02770));
    KF_RETURN_IF_ERROR(make_owned_dir(p.candidate_cache_dir(), 0, o.candidate_gid, 02770));
    // The server's alone: a judge gets its batch's file staged (reference_staging.h).
    KF_RETURN_IF_ERROR(make_owned_dir(p.reference_cache_dir(), 0, 0, 0700));
    std::vector<std::string> subs = {"cuda"};
    for (const auto& [env, sub] : kCacheEnv)
      subs.emplace_back(sub);
    for (const auto& sub : subs) {
      KF_RETURN_IF_ERROR(make_owned_dir(p.judge_cache_dir() / sub, 0, o.judge_gid, 02770));
      KF_RETURN_IF_ERROR(make_owned_dir(p.candidate_cache_dir() / sub, 0, o.candidate_gid, 02770));
    }
    for (const char* sub : {"cuda", "cuda_jit"}) {
      KF_RETURN_IF_ERROR(make_owned_dir(o.data_dir / "cache" / sub, 0, o.native_gid, 02770));
    }
  }
  if (!o.cupy_cache_dir.empty()) {
    if (o.kernel_cache != "shared") {
      KF_LOG_WARN(
          "--cupy-cache-dir {} is unused: with --kernel-cache isolated every job has "
          "its own CuPy cache (docs/security.md)",
          o.cupy_cache_dir.string());
    } else if (p.jailing_) {
      KF_RETURN_IF_ERROR(make_owned_dir(o.cupy_cache_dir, 0, o.candidate_gid, 02770));
    } else {
      KF_RETURN_IF_ERROR(make_dirs(o.cupy_cache_dir));
    }
  }
  KF_LOG_INFO("sandbox: mode={} jailing={}{} cgroups={} job memory limit {} MiB, pids {}", o.mode,
              p.jailing_, p.jailing_ ? "" : " (" + p.why_not_ + ")",
              p.cgroups_ ? p.cgroups_->describe().value("version", "?") : "none",
              p.memory_bytes_ >> 20, o.pids_max);
  return policy;
}

SandboxPolicy::~SandboxPolicy() = default;

Json SandboxPolicy::describe() const {
  Json j = {{"mode", options_.mode},
            {"jailing", jailing_},
            {"kernel_cache", options_.kernel_cache},
            {"memory_limit_bytes", memory_bytes_},
            {"pids_max", options_.pids_max},
            {"uid_range", {options_.uid_base, options_.uid_base + options_.uid_count - 1}},
            {"seccomp", Json(nullptr)}};
  if (jailing_) {
    sandbox::SeccompOptions seccomp;
    seccomp.allow_perf_events = options_.allow_perf_events;
    Json denied = sandbox::denied_syscalls(seccomp);
    for (const auto& family : sandbox::refused_socket_families())
      denied.push_back("socket(" + family + ")");
    j["seccomp"] = denied;
    j["socket_families"] = {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK (NETLINK_ROUTE)"};
    Json root = root_.describe();
    root["writable"] = {{"/tmp", tmp_bytes_}, {"/dev/shm", tmp_bytes_}, {"scratch", tmp_bytes_}};
    root["hidden"] = {options_.data_dir.string(), kCgroupMount};
    j["root"] = root;
  }
  if (!why_not_.empty()) j["why_not"] = why_not_;
  j["cgroups"] = cgroups_ ? cgroups_->describe() : Json{{"error", cgroups_error_}};
  return j;
}

uid_t SandboxPolicy::next_uid() const {
  uint32_t n = next_uid_.fetch_add(1) % options_.uid_count;
  return options_.uid_base + n;
}

Json SandboxPolicy::base_jail(const std::string& role, int gpu_minor, const fs::path& scratch,
                              uid_t uid, gid_t gid) const {
  sandbox::JailSpec spec;
  spec.role = role;
  spec.read_only = root_.read_only_paths();
  spec.listable = root_.listable;
  spec.devices = job_devices(gpu_minor);
  spec.files = root_files();
  spec.links = root_links();
  std::error_code ec;
  const fs::path data = fs::weakly_canonical(options_.data_dir, ec);
  spec.hide = {(ec ? options_.data_dir : data).string(), kCgroupMount};
  for (const char* dir : kPrivateTmpfs)
    spec.tmpfs.push_back({dir, tmp_bytes_, 01777, std::nullopt, std::nullopt});
  spec.tmpfs.push_back({scratch.string(), tmp_bytes_, 0700, uid, gid});
  spec.uid = uid;
  spec.gid = gid;
  spec.chdir = scratch.string();
  spec.rlimits = {{"core", 0},
                  {"fsize", options_.file_size_bytes},
                  {"nofile", options_.open_files},
                  {"nproc", static_cast<uint64_t>(std::max<int64_t>(options_.pids_max, 64))}};
  spec.seccomp_bpf = seccomp_bpf_;
  return spec.to_json();
}

StatusOr<std::unique_ptr<ChildSandbox>> SandboxPolicy::make_scratch(const std::string& name) const {
  auto child = std::make_unique<ChildSandbox>();
  child->scratch = options_.data_dir / "scratch" / name;
  KF_RETURN_IF_ERROR(remove_tree(child->scratch));
  KF_RETURN_IF_ERROR(make_dirs(child->scratch));
  child->memory_limit_bytes = memory_bytes_;
  return child;
}

Status SandboxPolicy::attach(ChildSandbox& child, const std::string& name, pid_t pid) const {
  if (!cgroups_) return Status::ok();
  sandbox::CgroupLimits limits{memory_bytes_, options_.pids_max};
  KF_ASSIGN_OR_RETURN(child.cgroup, cgroups_->create_job(name, limits));
  return child.cgroup->attach(pid);
}

// The environment that points a process's kernel caches (Triton, torch extensions, CuPy,
// the CUDA JIT; the cuda C ABI's cache is the job spec's cache_dir/cuda) below `cache`.
Json SandboxPolicy::cache_env(const fs::path& home, const fs::path& cache) const {
  // Job uids have no passwd entry: getpass.getuser() (torch.compile's inductor) reads USER.
  Json env = {{"HOME", home.string()},
              {"USER", "kforge-job"},
              {"LOGNAME", "kforge-job"},
              {"TMPDIR", "/tmp"}};
  for (const auto& [name, sub] : kCacheEnv)
    env[name] = (cache / sub).string();
  // Triton finds libcuda with /sbin/ldconfig -p unless told where it is; the jail's root has
  // the directory, and saying so spares a process per launcher build.
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only; kforge unsets only before threads start
  if (!root_.libcuda_dir.empty() && std::getenv("TRITON_LIBCUDA_PATH") == nullptr) {
    env["TRITON_LIBCUDA_PATH"] = root_.libcuda_dir;
  }
  return env;
}

StatusOr<std::unique_ptr<ChildSandbox>> SandboxPolicy::prepare_python_child(const std::string& name,
                                                                            pid_t pid,
                                                                            int gpu_minor) const {
  KF_ASSIGN_OR_RETURN(auto child, make_scratch(name));
  child->judge_dir = child->scratch / "judge";
  child->candidate_dir = child->scratch / "candidate";
  const bool shared = options_.kernel_cache == "shared";
  // Kernel caches: private to the process (isolated), or one per role for the whole server
  // (shared; judges and candidates never share one). The zygote's warm cache is a read-only
  // layer under both (process/triton_cache.py).
  child->judge_cache = shared ? judge_cache_dir() : child->judge_dir / ".cache";
  child->candidate_cache = shared ? candidate_cache_dir() : child->candidate_dir / ".cache";
  const auto zygote_triton = options_.data_dir / "cache" / "triton";
  Json candidate_env = cache_env(child->candidate_dir, child->candidate_cache);
  const bool own_cupy_dir = shared && !options_.cupy_cache_dir.empty();
  if (own_cupy_dir) candidate_env["CUPY_CACHE_DIR"] = options_.cupy_cache_dir.string();
  Json message = {
      {"type", "sandbox"},
      {"enabled", jailing_},
      {"dirs", {{"judge", child->judge_dir}, {"candidate", child->candidate_dir}}},
      {"caches", {{"judge", child->judge_cache}, {"candidate", child->candidate_cache}}},
      {"kernel_cache", options_.kernel_cache},
      {"read_only_caches", {{"triton", zygote_triton.string()}}},
      {"env",
       {{"judge", cache_env(child->judge_dir, child->judge_cache)}, {"candidate", candidate_env}}},
      {"limits", {{"memory_bytes", memory_bytes_}, {"pids_max", options_.pids_max}}},
      {"cgroup", cgroups_ ? Json(name) : Json(nullptr)}};
  if (jailing_) {
    const uid_t judge_uid = next_uid();
    const uid_t candidate_uid = next_uid();
    KF_RETURN_IF_ERROR(make_owned_dir(child->judge_dir, judge_uid, options_.judge_gid, 0700));
    KF_RETURN_IF_ERROR(make_owned_dir(child->candidate_dir, candidate_uid, candidate_uid, 0700));
    // The one place of its scratch a judge shares with the server: where the supervisor
    // stages a batch's reference file for its job (reference_staging.h).
    const auto staging = child->judge_dir / "reference";
    KF_RETURN_IF_ERROR(make_owned_dir(staging, judge_uid, options_.judge_gid, 0700));
    // Their scratch directories are private tmpfs in their jails (the host directories stay
    // empty but for the judge's reference staging); what they share with anything else is
    // bound, read-only but for that staging directory and the shared kernel caches.
    Json judge = base_jail("judge", gpu_minor, child->judge_dir, judge_uid, options_.judge_gid);
    judge["groups"] = {options_.judge_gid};
    judge["umask"] = 007;  // what it writes to a shared judges' cache, other judges read
    judge["binds"] = {{{"source", zygote_triton}, {"target", zygote_triton}, {"writable", false}},
                      {{"source", staging}, {"target", staging}, {"writable", true}}};
    const gid_t candidate_gid = shared ? options_.candidate_gid : candidate_uid;
    Json candidate =
        base_jail("candidate", gpu_minor, child->candidate_dir, candidate_uid, candidate_gid);
    candidate["groups"] = Json::array();
    candidate["binds"] = {
        {{"source", zygote_triton}, {"target", zygote_triton}, {"writable", false}}};
    if (shared) {
      judge["binds"].push_back(
          {{"source", judge_cache_dir()}, {"target", judge_cache_dir()}, {"writable", true}});
      candidate["groups"] = {options_.candidate_gid};
      candidate["umask"] = 007;
      candidate["binds"].push_back({{"source", candidate_cache_dir()},
                                    {"target", candidate_cache_dir()},
                                    {"writable", true}});
      if (own_cupy_dir) {
        candidate["binds"].push_back({{"source", options_.cupy_cache_dir},
                                      {"target", options_.cupy_cache_dir},
                                      {"writable", true}});
      }
    }
    message["judge"] = judge;
    message["candidate"] = candidate;
  } else {
    KF_RETURN_IF_ERROR(make_dirs(reference_cache_dir()));
    KF_RETURN_IF_ERROR(make_dirs(child->judge_dir));
    KF_RETURN_IF_ERROR(make_dirs(child->candidate_dir));
    message["why_not"] = why_not_;
  }
  child->message = std::move(message);
  KF_RETURN_IF_ERROR(attach(*child, name, pid));
  return child;
}

StatusOr<std::unique_ptr<ChildSandbox>> SandboxPolicy::prepare_native_child(const std::string& name,
                                                                            pid_t pid,
                                                                            int gpu_minor) const {
  KF_ASSIGN_OR_RETURN(auto child, make_scratch(name));
  child->judge_dir = child->scratch;
  Json message = {{"type", "sandbox"},
                  {"enabled", jailing_},
                  {"dirs", {{"scratch", child->scratch}}},
                  {"limits", {{"memory_bytes", memory_bytes_}, {"pids_max", options_.pids_max}}},
                  {"cgroup", cgroups_ ? Json(name) : Json(nullptr)}};
  if (jailing_) {
    const uid_t uid = next_uid();
    KF_RETURN_IF_ERROR(make_owned_dir(child->scratch, uid, options_.native_gid, 0700));
    Json jail = base_jail("native", gpu_minor, child->scratch, uid, options_.native_gid);
    jail["groups"] = {options_.native_gid};
    jail["umask"] = 007;  // its compile-cache entries are read by the next processes
    // The native worker is already pid 1 of its own pid namespace (the supervisor cloned it
    // there), so its /proc shows only itself.
    const auto cache = native_cache_dir();
    jail["binds"] = {
        {{"source", cache / "cuda"}, {"target", cache / "cuda"}, {"writable", true}},
        {{"source", cache / "cuda_jit"}, {"target", cache / "cuda_jit"}, {"writable", true}}};
    message["jail"] = jail;
  } else {
    message["why_not"] = why_not_;
  }
  child->message = std::move(message);
  KF_RETURN_IF_ERROR(attach(*child, name, pid));
  return child;
}

}  // namespace kforge::workers
