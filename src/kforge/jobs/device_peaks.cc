#include "kforge/jobs/device_peaks.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/worker_protocol/process.h"
#include "kforge/worker_protocol/unique_fd.h"
#include "kforge/workers/worker_env.h"

namespace kforge::jobs {
namespace {

// A cached object is used only when it is one measure-peaks wrote for this GPU.
bool valid_peaks(const Json& j) {
  return j.is_object() && j.value("version", 0) == 1 && j.contains("bandwidth_gb_s") &&
         j["bandwidth_gb_s"].is_number() && j.contains("flop_s") && j["flop_s"].is_object();
}

StatusOr<Json> read_peaks(const std::filesystem::path& path) {
  KF_ASSIGN_OR_RETURN(std::string text, read_file(path));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!valid_peaks(j)) return invalid_argument(path.string() + " is not a peaks file");
  return j;
}

}  // namespace

std::filesystem::path peaks_cache_path(const std::filesystem::path& cache_dir,
                                       const std::string& uuid) {
  return cache_dir / ("peaks-" + uuid + ".json");
}

StatusOr<Json> load_or_measure_peaks(const PeaksOptions& options, const std::string& uuid) {
  const auto path = peaks_cache_path(options.cache_dir, uuid);
  if (auto cached = read_peaks(path); cached.is_ok()) return cached;
  KF_RETURN_IF_ERROR(make_dirs(options.cache_dir));
  const auto tmp = path.string() + ".measuring";
  const auto log_path = options.cache_dir / ("peaks-" + uuid + ".log");
  worker_protocol::UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  worker_protocol::UniqueFd log(
      ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!devnull.valid() || !log.valid()) return errno_error("open " + log_path.string(), errno);
  worker_protocol::LaunchOptions launch;
  launch.argv = {options.python, "-m",     "kforge_worker", "measure-peaks",
                 "--device",     "cuda:0", "--out",         tmp};
  launch.env = workers::base_worker_env(options.extra_env_names);
  launch.env["PYTHONPATH"] = options.worker_path.string();
  launch.env["CUDA_VISIBLE_DEVICES"] = uuid;
  launch.fds = {{0, devnull.get()}, {1, log.get()}, {2, log.get()}};
  KF_LOG_INFO("measuring the peaks of GPU {} (once per data directory; log {})", uuid,
              log_path.string());
  KF_ASSIGN_OR_RETURN(worker_protocol::Process process, worker_protocol::launch_process(launch));
  auto status = process.wait_for(options.timeout);
  if (!status) {
    process.kill_group();
    return Status(ErrorCode::kDeadlineExceeded, "measuring the peaks of " + uuid +
                                                    " took longer than " +
                                                    std::to_string(options.timeout.count()) +
                                                    " s (see " + log_path.string() + ")");
  }
  if (status->exit_code != 0) {
    return Status(ErrorCode::kInternal, "measuring the peaks of " + uuid + " " +
                                            status->describe() + " (see " + log_path.string() +
                                            ")");
  }
  KF_ASSIGN_OR_RETURN(Json peaks, read_peaks(tmp));
  KF_RETURN_IF_ERROR(write_file_atomic(path, peaks.dump(2) + "\n"));
  ::unlink(tmp.c_str());
  return peaks;
}

}  // namespace kforge::jobs
