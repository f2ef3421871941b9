// What the jails show of the host (workers/root_plan.h), planned without asking the host
// (no interpreter or ldconfig is run): the system's directories, kforge's own files, never
// the data directory; the device nodes of a job by its GPU.
#include "kforge/workers/root_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace kforge::workers {
namespace {

namespace fs = std::filesystem;

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

RootPlanOptions options_in(const fs::path& dir) {
  RootPlanOptions o;
  o.ask_host = false;
  o.worker_package = fs::path(KFORGE_TEST_SOURCE_DIR) / "python" / "kforge_worker";
  o.kforge_files = {"/usr/bin/env"};
  o.data_dir = dir / "data";
  return o;
}

TEST(SandboxRootPlanTest, ShowsTheSystemAndKforgesOwnFilesOnly) {
  const fs::path dir = fs::temp_directory_path() / ("kforge-root-plan-" + std::to_string(getpid()));
  auto plan = plan_root(options_in(dir));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const auto paths = plan->read_only_paths();
  EXPECT_TRUE(has(paths, "/usr/lib"));
  EXPECT_TRUE(has(paths, "/usr/bin"));
  EXPECT_TRUE(has(paths, (fs::path(KFORGE_TEST_SOURCE_DIR) / "python" / "kforge_worker").string()));
  for (const char* never : {"/", "/etc", "/home", "/root", "/var", "/run", "/tmp"}) {
    EXPECT_FALSE(has(paths, never)) << never;
  }
  EXPECT_FALSE(has(paths, KFORGE_TEST_SOURCE_DIR));  // the checkout: only the package
  const Json described = plan->describe();
  EXPECT_EQ(described["kind"], "minimal");
  EXPECT_EQ(described["why"]["/usr/lib"], "system");
}

TEST(SandboxRootPlanTest, ACompilerOutsideTheSystemIsShownWithItsInstallation) {
  // As on the GPU host: CC=/opt/gcc/bin/gcc, which Triton and load_inline run in the jail.
  const fs::path dir = fs::temp_directory_path() / ("kforge-root-cc-" + std::to_string(getpid()));
  fs::create_directories(dir / "gcc" / "bin");
  fs::create_directories(dir / "gcc" / "libexec");
  { std::ofstream(dir / "gcc" / "bin" / "gcc") << "#!/bin/sh\n"; }
  fs::permissions(dir / "gcc" / "bin" / "gcc", fs::perms::owner_all);
  RootPlanOptions o = options_in(dir);
  o.worker_env["CC"] = (dir / "gcc" / "bin" / "gcc").string() + " -m64";
  auto plan = plan_root(o);
  fs::remove_all(dir);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const auto paths = plan->read_only_paths();
  EXPECT_TRUE(
      has(paths, (fs::canonical(fs::temp_directory_path()) / dir.filename() / "gcc").string()) ||
      has(paths, (dir / "gcc").string()));
  EXPECT_FALSE(has(paths, "/usr"));  // a compiler in /usr/bin adds only itself
}

TEST(SandboxRootPlanTest, TheOperatorsPathsAreShownAndCheckedLikeTheRest) {
  const fs::path dir = fs::temp_directory_path() / ("kforge-root-op-" + std::to_string(getpid()));
  fs::create_directories(dir / "data");
  fs::create_directories(dir / "tools");
  RootPlanOptions o = options_in(dir);
  o.extra = {(dir / "tools").string()};
  auto plan = plan_root(o);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(plan->describe()["why"][(dir / "tools").string()], "operator");
  o.extra = {"relative/tools"};
  EXPECT_NE(plan_root(o).status().message().find("absolute"), std::string::npos);
  o.extra = {(dir / "missing").string()};
  EXPECT_NE(plan_root(o).status().message().find("no such path"), std::string::npos);
  o.extra = {dir.string()};  // holds the data directory
  EXPECT_NE(plan_root(o).status().message().find("data directory"), std::string::npos);
  fs::remove_all(dir);
}

TEST(SandboxRootPlanTest, APathHoldingTheDataDirectoryIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("kforge-root-plan-" + std::to_string(getpid()));
  fs::create_directories(dir / "data");
  RootPlanOptions o = options_in(dir);
  o.ncu = (dir / "ncu").string();  // --ncu in the directory that holds the data directory
  { std::ofstream(dir / "ncu") << "#!/bin/sh\n"; }
  auto plan = plan_root(o);
  fs::remove_all(dir);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("--ncu"), std::string::npos) << plan.status().message();
  EXPECT_NE(plan.status().message().find("data directory"), std::string::npos);
}

TEST(SandboxRootPlanTest, NcuIsShownWithTheNsightComputeItsScriptLaunches) {
  // As a package install lays it out: <toolkit>/bin/ncu runs <toolkit>/nsight-compute-<v>/ncu,
  // a link to /opt/nvidia/nsight-compute/<v>.
  const fs::path dir = fs::temp_directory_path() / ("kforge-root-ncu-" + std::to_string(getpid()));
  fs::create_directories(dir / "toolkit" / "bin");
  fs::create_directories(dir / "nsight" / "2025.3.1");
  { std::ofstream(dir / "toolkit" / "bin" / "ncu") << "#!/bin/sh\n"; }
  fs::create_directory_symlink(dir / "nsight" / "2025.3.1",
                               dir / "toolkit" / "nsight-compute-2025.3.1");
  RootPlanOptions o = options_in(dir);
  o.ncu = (dir / "toolkit" / "bin" / "ncu").string();
  auto plan = plan_root(o);
  const fs::path real = fs::canonical(dir);
  fs::remove_all(dir);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const auto paths = plan->read_only_paths();
  EXPECT_TRUE(has(paths, (real / "toolkit").string()));
  EXPECT_TRUE(has(paths, (real / "nsight" / "2025.3.1").string()));
  EXPECT_FALSE(has(paths, (real / "nsight").string()));
}

TEST(SandboxRootPlanTest, AJobSeesOnlyItsOwnGpu) {
  const auto cpu = job_devices(-1);
  EXPECT_TRUE(has(cpu, "/dev/null") && has(cpu, "/dev/urandom"));
  EXPECT_FALSE(std::any_of(cpu.begin(), cpu.end(),
                           [](const std::string& d) { return d.starts_with("/dev/nvidia"); }));
  const auto gpu1 = job_devices(1);
  EXPECT_TRUE(has(gpu1, "/dev/nvidia1") && has(gpu1, "/dev/nvidiactl") &&
              has(gpu1, "/dev/nvidia-uvm") && has(gpu1, "/dev/nvidia-uvm-tools"));
  EXPECT_FALSE(has(gpu1, "/dev/nvidia0"));
  EXPECT_FALSE(root_files().contains("/etc/passwd"));
  EXPECT_TRUE(root_files().contains("/etc/hosts"));
}

}  // namespace
}  // namespace kforge::workers
