#include "kforge/workers/root_plan.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/workers/host_query.h"

namespace kforge::workers {
namespace {

namespace fs = std::filesystem;

// The distribution's programs, libraries and headers; the loader's cache; the alternatives'
// links. /bin, /sbin, /lib, /lib64 are symlinks into /usr on merged-/usr systems (the jail
// makes them again) and directories elsewhere.
constexpr const char* kSystemPaths[] = {
    "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/libexec",     "/usr/include",
    "/bin",     "/sbin",     "/lib",     "/lib64",     "/etc/ld.so.cache", "/etc/alternatives"};

// Library file name prefixes of the CUDA driver (libcuda.so.1, libnvidia-ml.so.1,
// libnvidia-ptxjitcompiler.so.1, ...).
constexpr const char* kDriverLibraries[] = {"libcuda.so", "libnvidia-"};

bool is_under(const fs::path& path, const fs::path& dir) {
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path real = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : real;
}

std::string env_or(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it != env.end()) return it->second;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only; kforge unsets only before threads start
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

class Builder {
 public:
  Builder(RootPlan& plan, const fs::path& data_dir)
      : plan_(plan), data_dir_(canonical_or_self(data_dir)) {}

  // Adds `path` if it exists; `from` names where it came from, for errors.
  Status add(const fs::path& path, const char* why, const std::string& from) {
    if (path.empty() || !path.is_absolute()) return Status::ok();
    std::error_code ec;
    if (!fs::exists(path, ec)) return Status::ok();
    const fs::path real = canonical_or_self(path);
    if (real == "/") {
      return invalid_argument(from + " names " + path.string() +
                              ": the jail would show jobs the host's whole file system");
    }
    if (!data_dir_.empty() && (is_under(data_dir_, real) || is_under(real, data_dir_))) {
      return invalid_argument(
          from + " names " + path.string() + ", and the data directory " + data_dir_.string() +
          (is_under(real, data_dir_) ? " holds it" : " lies in it") +
          ": jobs see that path read-only, and must never see the data directory; move "
          "--data-dir elsewhere");
    }
    std::string p = path.lexically_normal().string();
    if (p.size() > 1 && p.back() == '/') p.pop_back();
    const bool known = std::any_of(plan_.read_only.begin(), plan_.read_only.end(),
                                   [&](const RootEntry& e) { return e.path == p; });
    if (!known) plan_.read_only.push_back({p, why});
    return Status::ok();
  }

 private:
  RootPlan& plan_;
  fs::path data_dir_;
};

Status add_python(Builder& b, RootPlan& plan, const RootPlanOptions& o) {
  if (o.python.empty()) return Status::ok();
  const std::string program = find_program(o.python);
  KF_RETURN_IF_ERROR(b.add(program, "python", "the workers' Python"));
  if (!o.ask_host) return Status::ok();
  auto layout = python_layout(o.python, o.worker_env, std::chrono::seconds(30));
  if (!layout.is_ok()) {
    plan.python_error = layout.status().message();
    KF_LOG_WARN("sandbox: {}; jailed Python jobs will not find it", plan.python_error);
    return Status::ok();
  }
  const std::string from = "the workers' Python (" + o.python + ")";
  KF_RETURN_IF_ERROR(b.add(layout->executable, "python", from + ": sys.executable"));
  if (layout->is_venv) KF_RETURN_IF_ERROR(b.add(layout->prefix, "python", from + ": its venv"));
  for (const auto& dir : layout->directories) {
    KF_RETURN_IF_ERROR(b.add(dir, "python", from));
  }
  // The worker package's directory is on sys.path (PYTHONPATH): only the package is shown.
  const fs::path worker_path = canonical_or_self(o.worker_package.parent_path());
  for (const auto& entry : layout->sys_path) {
    if (canonical_or_self(entry) == worker_path) continue;
    KF_RETURN_IF_ERROR(b.add(entry, "python", from + ": sys.path"));
  }
  return Status::ok();
}

Status add_cuda(Builder& b, RootPlan& plan, const RootPlanOptions& o) {
  const std::string library_path = env_or(o.worker_env, "LD_LIBRARY_PATH");
  if (o.ask_host) {
    for (const auto& dir : loader_directories(
             {std::begin(kDriverLibraries), std::end(kDriverLibraries)}, library_path)) {
      KF_RETURN_IF_ERROR(b.add(dir, "cuda", "the CUDA driver's libraries"));
      std::error_code ec;
      if (plan.libcuda_dir.empty() && fs::exists(fs::path(dir) / "libcuda.so.1", ec)) {
        plan.libcuda_dir = dir;
      }
    }
  }
  if (!o.nvrtc_library.empty()) {
    const fs::path lib_dir = fs::path(o.nvrtc_library).parent_path();
    KF_RETURN_IF_ERROR(b.add(lib_dir, "cuda", "NVRTC (" + o.nvrtc_library + ")"));
    KF_RETURN_IF_ERROR(b.add(lib_dir.parent_path() / "include", "cuda", "NVRTC's headers"));
  }
  for (const char* name : {"CUDA_HOME", "CUDA_PATH"}) {
    KF_RETURN_IF_ERROR(b.add(env_or(o.worker_env, name), "cuda", std::string("$") + name));
  }
  KF_RETURN_IF_ERROR(b.add("/usr/local/cuda", "cuda", "the CUDA toolkit"));
  KF_RETURN_IF_ERROR(
      b.add(env_or({}, "KFORGE_CUDA_INCLUDE"), "cuda", "KFORGE_CUDA_INCLUDE (CUDA headers)"));
  std::stringstream dirs(library_path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    KF_RETURN_IF_ERROR(b.add(dir, "cuda", "LD_LIBRARY_PATH"));
  }
  return Status::ok();
}

Status add_toolchain(Builder& b, const std::string& command, const std::string& from) {
  // "$CC" may carry flags ("gcc -m64"): the program is its first word.
  const std::string program = find_program(command.substr(0, command.find(' ')));
  if (program.empty()) return Status::ok();
  std::error_code ec;
  const fs::path real = fs::canonical(program, ec);
  if (ec) return Status::ok();
  const fs::path dir = real.parent_path();
  const fs::path prefix = dir.filename() == "bin" ? dir.parent_path() : dir;
  if (prefix == "/usr" || prefix == "/" || prefix.empty()) {
    return b.add(real, "compiler", from);  // in the system directories already
  }
  return b.add(prefix, "compiler", from + " (" + real.string() + ")");
}

// The host's C and C++ compilers (Triton builds its launchers with $CC or cc at a kernel's
// first launch; torch's load_inline runs $CXX and nvcc's host compiler): a compiler outside
// the system directories is shown with its whole installation (its prefix above bin/, where
// its own libexec/, lib/ and include/ are). Seen on an H200 host: CC=/opt/gcc/bin/gcc.
Status add_compilers(Builder& b, const RootPlanOptions& o) {
  for (const char* name : {"CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN"}) {
    const std::string value = env_or(o.worker_env, name);
    if (value.empty()) continue;
    KF_RETURN_IF_ERROR(add_toolchain(b, value, std::string("$") + name));
  }
  for (const char* program : {"cc", "c++", "gcc", "g++"}) {
    KF_RETURN_IF_ERROR(add_toolchain(b, program, std::string("the compiler ") + program));
  }
  return Status::ok();
}

// /usr/local/cuda/bin/ncu is a script that launches <toolkit>/nsight-compute-*/ncu, or one
// under /opt/nvidia/nsight-compute: the toolkit above bin/, and where each nsight-compute entry
// of it leads (a package install links it to /opt/nvidia/nsight-compute/<version>).
Status add_ncu(Builder& b, const std::string& ncu) {
  if (ncu.empty()) return Status::ok();
  std::error_code ec;
  const fs::path dir = fs::canonical(ncu, ec).parent_path();
  if (ec) return Status::ok();
  const fs::path prefix = dir.filename() == "bin" ? dir.parent_path() : dir;
  const std::string from = "--ncu " + ncu;
  KF_RETURN_IF_ERROR(b.add(prefix, "ncu", from));
  for (const auto& entry : fs::directory_iterator(prefix, ec)) {
    if (!entry.path().filename().string().starts_with("nsight-compute")) continue;
    KF_RETURN_IF_ERROR(b.add(canonical_or_self(entry.path()), "ncu", from));
  }
  return b.add("/opt/nvidia/nsight-compute", "ncu", from);
}

}  // namespace

std::vector<std::string> RootPlan::read_only_paths() const {
  std::vector<std::string> out;
  out.reserve(read_only.size());
  for (const auto& e : read_only)
    out.push_back(e.path);
  return out;
}

Json RootPlan::describe() const {
  Json why = Json::object();
  for (const auto& e : read_only)
    why[e.path] = e.why;
  Json files = Json::array();
  for (const auto& [path, content] : root_files())
    files.push_back(path);
  Json j = {{"kind", "minimal"},
            {"read_only", read_only_paths()},
            {"why", why},
            {"files", files},
            {"devices", job_devices(-1)},
            {"gpu_devices", "the driver's control nodes and the job's own /dev/nvidiaN"}};
  if (!libcuda_dir.empty()) j["libcuda_dir"] = libcuda_dir;
  if (!python_error.empty()) j["python_error"] = python_error;
  return j;
}

StatusOr<RootPlan> plan_root(const RootPlanOptions& o) {
  RootPlan plan;
  Builder b(plan, o.data_dir);
  for (const char* path : kSystemPaths) {
    KF_RETURN_IF_ERROR(b.add(path, "system", "the system"));
  }
  KF_RETURN_IF_ERROR(add_python(b, plan, o));
  KF_RETURN_IF_ERROR(b.add(o.worker_package, "kforge", "the worker package"));
  if (!o.worker_package.empty()) {
    plan.listable.push_back(o.worker_package.lexically_normal().parent_path().string());
  }
  for (const auto& file : o.kforge_files) {
    KF_RETURN_IF_ERROR(b.add(file, "kforge", "kforge's own files"));
  }
  KF_RETURN_IF_ERROR(add_cuda(b, plan, o));
  KF_RETURN_IF_ERROR(add_compilers(b, o));
  for (const auto& path : o.extra) {
    if (!fs::path(path).is_absolute()) {
      return invalid_argument("--jail-read-only " + path + ": must be an absolute path");
    }
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return invalid_argument("--jail-read-only " + path + ": no such path");
    }
    KF_RETURN_IF_ERROR(b.add(path, "operator", "--jail-read-only"));
  }
  KF_RETURN_IF_ERROR(add_ncu(b, o.ncu));
  return plan;
}

std::vector<std::string> job_devices(int gpu_minor) {
  std::vector<std::string> out = {"/dev/null",   "/dev/zero",    "/dev/full",
                                  "/dev/random", "/dev/urandom", "/dev/tty"};
  if (gpu_minor == -1) return out;  // the cpu device: nothing of a GPU
  for (const char* node :
       {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-caps"}) {
    out.emplace_back(node);
  }
  if (gpu_minor >= 0) {
    out.push_back("/dev/nvidia" + std::to_string(gpu_minor));
    return out;
  }
  static const std::regex kNode("nvidia[0-9]+");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev", ec)) {
    if (std::regex_match(entry.path().filename().string(), kNode)) {
      out.push_back(entry.path().string());
    }
  }
  return out;
}

std::map<std::string, std::string> root_files() {
  return {{"/etc/hosts",
           "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
           "127.0.1.1\tkforge-job\n"},
          {"/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n"}};
}

std::map<std::string, std::string> root_links() {
  return {{"/dev/fd", "/proc/self/fd"},
          {"/dev/stdin", "/proc/self/fd/0"},
          {"/dev/stdout", "/proc/self/fd/1"},
          {"/dev/stderr", "/proc/self/fd/2"}};
}

}  // namespace kforge::workers
