#include "worker_command.h"

#include <iostream>

#include "kforge/cuda_worker/native_worker_main.h"

namespace kforge::app {

CLI::App* add_worker_command(CLI::App& app, WorkerConfig& c) {
  CLI::App* worker = app.add_subcommand("worker", "Worker processes (started by the server)");
  worker->require_subcommand(1);
  CLI::App* cuda =
      worker->add_subcommand("cuda", "Native CUDA worker: NVRTC + driver API, one job per process");
  cuda->add_option("--device", c.device, "cpu or cuda:N (the server's device name)")
      ->capture_default_str();
  cuda->add_option("--arch", c.arch, "Compile target when there is no GPU (default sm_90a)");
  cuda->add_option("--job", c.job_file,
                   "Run this job spec (JSON) without a server and print the result");
  cuda->add_option("--replay", c.replay_file,
                   "Launch one kernel of this job spec once on its timing inputs and exit (the "
                   "process Nsight Compute profiles for device metrics)");
  cuda->add_option("--role", c.role, "With --replay: candidate or reference")
      ->check(CLI::IsMember({"candidate", "reference"}))
      ->capture_default_str();
  cuda->add_option("--repeat", c.repeat, "With --replay: launches (back to back, then synced)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cuda->add_option("--why-no-gpu", c.why_no_gpu, "Why the server has no GPU (for messages)");
  cuda->add_option("--protocol-fd", c.protocol_fd, "Descriptor of the protocol socket")
      ->capture_default_str();
  return cuda;
}

int run_worker_cuda(const WorkerConfig& c) {
  if (c.device != "cpu" && !c.device.starts_with("cuda:")) {
    std::cerr << "kforge worker cuda: --device must be cpu or cuda:N\n";
    return 2;
  }
  cuda_worker::WorkerRuntimeOptions options{c.device, c.arch, c.why_no_gpu};
  if (!c.replay_file.empty()) {
    Status s = cuda_worker::run_replay_file(options, c.replay_file, c.role, c.repeat);
    if (!s) std::cerr << "kforge worker cuda --replay: " << s.to_string() << '\n';
    return s ? 0 : 1;
  }
  if (c.job_file.empty()) return cuda_worker::run_worker_process(options, c.protocol_fd);
  auto result = cuda_worker::run_job_file(options, c.job_file);
  if (!result.is_ok()) {
    std::cerr << "kforge worker cuda: " << result.status().to_string() << '\n';
    return 2;
  }
  std::cout << result->dump(2) << '\n';
  return 0;
}

}  // namespace kforge::app
