// The kernel library as `kforge bench` reads it: kernels/<op>/manifest.json (what the op is,
// its torch reference, its inputs per size, tolerances, cost per call) and the four version
// files v1_baseline.py .. v4_optimized.py (docs/kernel-library.md).
//
// A version file is self-contained Python whose module docstring starts with
//   """v2_tiling — <English summary>
//   ko: <Korean summary>
// which Phase 2 of the logs quotes. Files are read as data; nothing here runs them.
//
// Each op also has its own pytest files, <op>/tests/ (conftest.py, test_correctness.py,
// test_benchmark.py), which a user runs with pytest alone; the library keeps their source in
// _scaffold/tests/, and `kforge bench --kernels DIR` writes them into an op directory that
// lacks them (docs/kernel-library.md "Per-op tests").
//
// Example:
//   KF_ASSIGN_OR_RETURN(auto root, find_kernel_library());
//   KF_ASSIGN_OR_RETURN(OpManifest m, load_manifest(root / "softmax"));
//   std::vector<KernelVersion> versions = load_versions(root / "softmax");
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::bench {

inline constexpr std::array<std::string_view, 4> kVersionNames = {"v1_baseline", "v2_tiling",
                                                                  "v3_coalesced", "v4_optimized"};
inline constexpr std::array<std::string_view, 3> kSizeNames = {"small", "medium", "large"};
// Size profiles of a manifest: real sizes on a GPU, interpreter-sized ones on the cpu device.
inline constexpr std::array<std::string_view, 2> kSizeProfiles = {"gpu", "cpu"};
inline constexpr std::array<std::string_view, 3> kBenchDTypes = {"float32", "float16", "bfloat16"};

// One argument of the op, in call order. Tensors take the bench's dtype and the size's shape.
struct ManifestArg {
  std::string name;
  std::string type;  // tensor, int, float, str, bool
  Json init;         // tensors: the IOContract init ({"kind": "randn"} by default)
  Json value;        // scalars
  bool is_tensor() const { return type == "tensor"; }
};

struct SizeSpec {
  std::string label;                                   // "4096x4096"
  std::map<std::string, std::vector<int64_t>> shapes;  // tensor argument -> shape
  int64_t elements_moved = 0;                          // read + written, per call
  int64_t flops = 0;                                   // per call
};

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

struct OpManifest {
  std::string op;       // directory name, [a-z][a-z0-9_]*
  std::string title;    // "torch.softmax"
  std::string wrapper;  // "triton_softmax"
  // Phase 1 text: definition, inputs_outputs, complexity, bound ("memory" | "compute"),
  // bound_reason, optional size_mapping.
  Json phase1;
  std::string reference;  // torch expression over the argument names
  std::string call;       // the wrapper call over the argument names
  std::vector<ManifestArg> args;
  std::string default_dtype;
  std::vector<std::string> dtypes;
  std::map<std::string, Tolerance> tolerance;                    // by dtype
  std::map<std::string, std::map<std::string, SizeSpec>> sizes;  // profile -> size -> spec

  bool compute_bound() const { return phase1.value("bound", "") == "compute"; }
};

struct KernelVersion {
  std::string name;    // one of kVersionNames
  std::string origin;  // the file it came from, or "inline"
  std::string source;  // empty when it could not be read
  std::string load_error;
  std::string summary_en;  // from the docstring; empty when it has none
  std::string summary_ko;
};

// The per-op test files, in <op>/tests/ and in the library's _scaffold/tests/.
inline constexpr std::array<std::string_view, 3> kOpTestFiles = {
    "conftest.py", "test_correctness.py", "test_benchmark.py"};

// An op's tests directory as a bench found or made it.
struct OpTests {
  std::filesystem::path dir;                 // <op dir>/tests; empty when the op has none
  std::map<std::string, std::string> files;  // name -> "written", "kept" or "missing"
  std::string note;                          // why there is no directory, or what failed

  Json to_json() const;
};

// <op_dir>/tests as it is, writing nothing (the library's own ops).
OpTests find_op_tests(const std::filesystem::path& op_dir);

// Writes each file of kOpTestFiles that <op_dir>/tests lacks, from <library>/_scaffold/tests,
// and keeps those it has (a user's edits are never overwritten). When <op_dir> has no
// manifest.json, `manifest` (the one the bench uses) is copied to tests/manifest.json, which
// the tests read instead. Failures are reported in `note`, not as errors: the bench goes on.
OpTests ensure_op_tests(const std::filesystem::path& library, const std::filesystem::path& op_dir,
                        const std::filesystem::path& manifest);

// True for an op name that can be a directory of the library: [a-z][a-z0-9_]{0,63}.
bool is_op_name(std::string_view name);

// Validates a manifest; errors are kInvalidArgument naming "<origin>: <field path>".
StatusOr<OpManifest> parse_manifest(const Json& manifest, const std::string& origin);
// <op_dir>/manifest.json; the op name must equal the directory name.
StatusOr<OpManifest> load_manifest(const std::filesystem::path& op_dir);

// The four versions of <op_dir>; a missing or unreadable file is a version with load_error.
std::vector<KernelVersion> load_versions(const std::filesystem::path& op_dir);
// A version given as source text (POST /bench, run_benchmark_suite).
KernelVersion version_from_source(std::string name, std::string source, std::string origin);

// The summaries of a version's module docstring (see the file comment); empty when absent.
void read_summaries(KernelVersion& version);

// The library: $KFORGE_KERNELS, else the nearest directory named `kernels` above the
// executable that holds kernels/<op>/manifest.json files. kNotFound saying how to set it.
StatusOr<std::filesystem::path> find_kernel_library();

// The ops of a library directory (those with a manifest.json), sorted.
std::vector<std::string> library_ops(const std::filesystem::path& library);

}  // namespace kforge::bench
