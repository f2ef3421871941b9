#include "kforge/cuda_worker/ncu_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>

#include "kforge/common/files.h"
#include "kforge/worker_protocol/output_capture.h"
#include "kforge/worker_protocol/process.h"
#include "kforge/worker_protocol/unique_fd.h"

extern char** environ;  // NOLINT: the process environment, passed on to ncu

namespace kforge::cuda_worker {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kStdoutCap = size_t{8} << 20;
constexpr size_t kStderrCap = size_t{16} << 10;

std::map<std::string, std::string> own_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

Json failed_run(const std::vector<std::string>& argv, const std::string& why) {
  return Json{{"command", argv}, {"exit_code", nullptr}, {"stdout", ""}, {"stderr", why}};
}

// Runs argv to completion (or the deadline), capturing stdout and stderr. `home` is ncu's
// HOME (its configuration files): the job's scratch, writable in the jail, where the server's
// own HOME is not.
Json run_captured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                  const std::filesystem::path& home) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return failed_run(argv, "cannot run ncu: pipe failed");
  worker_protocol::UniqueFd out_r(out_pipe[0]);
  worker_protocol::UniqueFd out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return failed_run(argv, "cannot run ncu: pipe failed");
  worker_protocol::UniqueFd err_r(err_pipe[0]);
  worker_protocol::UniqueFd err_w(err_pipe[1]);
  worker_protocol::UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  worker_protocol::LaunchOptions launch;
  launch.argv = argv;
  launch.env = own_environment();
  launch.env["HOME"] = home.string();
  launch.fds = {{0, devnull.get()}, {1, out_w.get()}, {2, err_w.get()}};
  launch.die_with_parent = true;
  auto process = worker_protocol::launch_process(launch);
  out_w.reset();
  err_w.reset();
  if (!process.is_ok()) return failed_run(argv, "cannot run ncu: " + process.status().message());
  worker_protocol::OutputCapture out(kStdoutCap);
  worker_protocol::OutputCapture err(kStderrCap);
  const auto deadline = Clock::now() + timeout;
  bool timed_out = false;
  while (out_r.valid() || err_r.valid()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR) {
      break;
    }
    std::pair<pollfd*, std::pair<worker_protocol::UniqueFd*, worker_protocol::OutputCapture*>>
        streams[] = {{&fds[0], {&out_r, &out}}, {&fds[1], {&err_r, &err}}};
    for (auto& [pfd, target] : streams) {
      if (pfd->fd < 0 || (pfd->revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[65536];
      const ssize_t n = ::read(pfd->fd, buf, sizeof(buf));
      if (n > 0) {
        target.second->append(std::string_view(buf, static_cast<size_t>(n)));
      } else if (n == 0 || errno != EINTR) {
        target.first->reset();
      }
    }
  }
  if (timed_out) {
    process->kill_group();
    (void)process->wait_for(std::chrono::seconds(5));
    return Json{{"command", argv},
                {"exit_code", nullptr},
                {"stdout", out.text()},
                {"stderr", "ncu did not finish within " + std::to_string(timeout.count() / 1000) +
                               " s\n" + err.text()}};
  }
  auto status = process->wait_for(std::chrono::seconds(10));
  Json exit_code = nullptr;
  if (status && status->exit_code) exit_code = *status->exit_code;
  return Json{
      {"command", argv}, {"exit_code", exit_code}, {"stdout", out.text()}, {"stderr", err.text()}};
}

}  // namespace

Json run_device_metrics(const Json& spec, const Json& request, const std::string& device,
                        const std::vector<std::string>& roles) {
  Json runs = Json::object();
  const std::filesystem::path dir =
      std::filesystem::path(spec.value("scratch_dir", std::string("."))) / "device-metrics";
  const auto spec_path = dir / "job.json";
  Json replay_spec = spec;
  replay_spec.erase("device_metrics");
  Status written = make_dirs(dir);
  if (written) written = write_file_atomic(spec_path, replay_spec.dump());
  auto self = self_executable();
  std::vector<std::string> base = {
      request.value("ncu", std::string("ncu")), "--csv", "--page", "raw", "--print-units", "base"};
  for (const auto& section : request.value("sections", Json::array())) {
    if (section.is_string()) {
      base.emplace_back("--section");
      base.push_back(section.get<std::string>());
    }
  }
  for (const char* arg :
       {"--cache-control", "all", "--clock-control", "none", "--target-processes", "all"}) {
    base.emplace_back(arg);
  }
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(request.value("timeout_s", 300.0) * 1000.0));
  for (const auto& role : roles) {
    std::vector<std::string> argv = base;
    for (const std::string& arg :
         {self.is_ok() ? self->string() : std::string("kforge"), std::string("worker"),
          std::string("cuda"), std::string("--device"), device, std::string("--replay"),
          spec_path.string(), std::string("--role"), role}) {
      argv.push_back(arg);
    }
    if (!written) {
      runs[role] = failed_run(argv, "cannot write the replay spec: " + written.message());
    } else if (!self.is_ok()) {
      runs[role] = failed_run(argv, "cannot find this kforge binary: " + self.status().message());
    } else {
      runs[role] = run_captured(argv, timeout, dir);
    }
  }
  return runs;
}

}  // namespace kforge::cuda_worker
