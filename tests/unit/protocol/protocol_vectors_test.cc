// The worker contract's shared vectors (tests/protocol/README.md), read by the C++ side:
// job specs (model/job_spec.h), timing statistics (cuda/timing_stats.h), tolerances
// (cuda/host_compare.h), error kinds (model/error_kind.h), result documents
// (cuda_worker/job_result.h). tests/python/test_protocol_vectors.py reads the same files with
// the Python worker's code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/cuda/host_compare.h"
#include "kforge/cuda/timing_stats.h"
#include "kforge/cuda_worker/job_result.h"
#include "kforge/frontends/mcp/kernel_tool_schemas.h"
#include "kforge/model/error_kind.h"
#include "kforge/model/job_spec.h"
#include "kforge/model/kernel_spec.h"
#include "kforge/model/serialize.h"

namespace kforge {
namespace {

const std::filesystem::path kVectors =
    std::filesystem::path(KFORGE_TEST_SOURCE_DIR) / "tests" / "protocol";

Json load(const std::string& name) {
  auto text = read_file(kVectors / name);
  EXPECT_TRUE(text.is_ok()) << name << ": " << text.status().to_string();
  if (!text.is_ok()) return Json();
  auto j = parse_json(*text);
  EXPECT_TRUE(j.is_ok()) << name;
  return j.is_ok() ? *j : Json();
}

std::vector<std::filesystem::path> accepted_specs() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(kVectors / "specs")) {
    if (e.path().filename().string().starts_with("accepted_")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "Infinity" stands for +inf in the vectors (JSON has none).
double number(const Json& j) {
  if (j.is_string() && j.get<std::string>() == "Infinity") {
    return std::numeric_limits<double>::infinity();
  }
  return j.get<double>();
}

void expect_close(double expected, double actual, const std::string& what) {
  if (std::isinf(expected)) {
    EXPECT_EQ(expected, actual) << what;
    return;
  }
  EXPECT_NEAR(expected, actual, 1e-12 * std::max(1.0, std::fabs(expected))) << what;
}

model::TimingOptions timing_options(const Json& j) {
  model::TimingOptions t;
  t.max_trials = j["max_trials"];
  t.min_trials = j["min_trials"];
  t.warmup_calls = j["warmup_calls"];
  t.warmup_ms = j["warmup_ms"];
  t.budget_ms = j["budget_ms"];
  t.rse_target = j["rse_target"];
  t.cuda_graph = j["cuda_graph"];
  t.l2_flush = j["l2_flush"];
  return t;
}

// What a worker reads from a spec, in the vectors' `expect` shape.
Json what_was_read(const model::JobSpec& spec) {
  const model::JobRequest& r = spec.request;
  Json args = Json::array();
  Json inline_data = Json::object();
  if (r.kernel.io) {
    for (const model::ArgSpec& a : r.kernel.io->args) {
      args.push_back(a.name);
      if (a.tensor_spec && a.tensor_spec->data) {
        const auto& bytes = a.tensor_spec->data->bytes;
        EXPECT_NE(bytes, nullptr) << a.name << ": the parser keeps the decoded bytes";
        if (bytes == nullptr) continue;
        inline_data[a.name] = {{"nbytes", bytes->size()}, {"sha256", sha256_hex(*bytes)}};
      }
    }
  }
  return {{"kind", model::to_string(r.kind)},
          {"kernel_type", model::to_string(r.kernel.kernel_type)},
          {"reference_kernel_type",
           r.reference ? Json(model::to_string(r.reference->kernel_type)) : Json()},
          {"num_correct_trials", r.num_correct_trials},
          {"measure_performance", r.measure_performance},
          {"timing", model::to_json(r.timing)},
          {"atol", r.atol ? Json(*r.atol) : Json()},
          {"rtol", r.rtol ? Json(*r.rtol) : Json()},
          {"seed", *r.seed},
          {"device", spec.device},
          {"timeout_s", r.timeout_s},
          {"arg_names", args},
          {"inline_data", inline_data}};
}

TEST(ProtocolVectorsTest, AcceptedSpecsParseToWhatTheyDeclareAndAreAFixedPoint) {
  const auto files = accepted_specs();
  ASSERT_GE(files.size(), 4u);
  for (const auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    const Json vector = load("specs/" + path.filename().string());
    auto spec = model::parse_job_spec(vector["spec"]);
    ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
    EXPECT_EQ(what_was_read(*spec), vector["expect"]);
    // The canonical form: what the server sends is what it would send again.
    EXPECT_EQ(model::to_json(*spec), vector["spec"]);
  }
}

TEST(ProtocolVectorsTest, DefaultsAreTheServersOwn) {
  const Json v = load("defaults.json");
  const model::JobRequest defaults;
  EXPECT_EQ(v["num_correct_trials"], defaults.num_correct_trials);
  EXPECT_EQ(v["measure_performance"], defaults.measure_performance);
  EXPECT_EQ(v["timeout_s"], defaults.timeout_s);
  EXPECT_EQ(v["timing"], model::to_json(defaults.timing));
}

TEST(ProtocolVectorsTest, RejectedSpecsNameTheField) {
  const Json vectors = load("specs/rejected.json");
  ASSERT_GE(vectors["cases"].size(), 20u);
  for (const Json& c : vectors["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto spec = model::parse_job_spec(c["spec"]);
    ASSERT_FALSE(spec.is_ok());
    EXPECT_EQ(spec.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_TRUE(spec.status().field_path().starts_with(c["field"].get<std::string>()))
        << spec.status().to_string();
    if (c.contains("message")) {
      EXPECT_NE(spec.status().message().find(c["message"].get<std::string>()), std::string::npos)
          << spec.status().to_string();
    }
  }
}

TEST(ProtocolVectorsTest, ErrorKindsAreTheListedOnes) {
  const Json vectors = load("error_kinds.json");
  std::vector<std::string> ours;
  for (model::ErrorKind k : model::kErrorKinds) {
    ours.emplace_back(model::to_string(k));
    EXPECT_EQ(model::error_kind_from(model::to_string(k)), k);
  }
  EXPECT_EQ(Json(ours), vectors["error_kinds"]);
  EXPECT_FALSE(model::error_kind_from("oom").has_value());
}

// Each vocabulary of the request is the vector's list, in order, and every name parses back
// to what it names (the MCP tools' enums and /health's available_kernel_types are these
// lists themselves).
TEST(ProtocolVectorsTest, VocabulariesAreTheListedOnes) {
  const Json v = load("vocabulary.json");
  EXPECT_EQ(Json(model::kernel_type_names()), v["kernel_types"]);
  EXPECT_EQ(Json(model::dtype_names()), v["dtypes"]);
  EXPECT_EQ(Json(model::arg_type_names()), v["arg_types"]);
  EXPECT_EQ(Json(model::arg_role_names()), v["arg_roles"]);
  EXPECT_EQ(Json(model::init_kind_names()), v["init_kinds"]);
  for (std::string_view n : model::kernel_type_names()) {
    EXPECT_EQ(model::to_string(*model::kernel_type_from(n)), n);
  }
  for (std::string_view n : model::dtype_names())
    EXPECT_EQ(model::to_string(*model::dtype_from(n)), n);
  for (std::string_view n : model::arg_type_names()) {
    EXPECT_EQ(model::to_string(*model::arg_type_from(n)), n);
  }
  for (std::string_view n : model::arg_role_names()) {
    EXPECT_EQ(model::to_string(*model::arg_role_from(n)), n);
  }
  for (std::string_view n : model::init_kind_names()) {
    EXPECT_EQ(model::to_string(*model::init_kind_from(n)), n);
  }
  for (const Json& n : v["python_worker_kernel_types"]) {
    EXPECT_TRUE(model::kernel_type_from(n.get<std::string>()).has_value()) << n;
  }
}

TEST(ProtocolVectorsTest, McpToolSchemasListTheVocabularies) {
  namespace mcp = frontends::mcp;
  const Json v = load("vocabulary.json");
  const Json& evaluate = mcp::kernel_tool_input_schema(mcp::KernelTool::kEvaluate)["properties"];
  EXPECT_EQ(evaluate["kernel_type"]["enum"], v["kernel_types"]);
  EXPECT_EQ(evaluate["reference_kernel_type"]["enum"], v["kernel_types"]);
  const Json& arg = evaluate["io_contract"]["properties"]["args"]["items"]["properties"];
  EXPECT_EQ(arg["type"]["enum"], v["arg_types"]);
  EXPECT_EQ(arg["role"]["enum"], v["arg_roles"]);
  EXPECT_EQ(arg["tensor_spec"]["properties"]["dtype"]["enum"], v["dtypes"]);
  EXPECT_EQ(arg["tensor_spec"]["properties"]["init"]["properties"]["kind"]["enum"],
            v["init_kinds"]);
  EXPECT_EQ(mcp::kernel_type_schema()["enum"], v["kernel_types"]);
}

TEST(ProtocolVectorsTest, TimingStatistics) {
  const Json v = load("timing.json");
  for (const Json& c : v["stats"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const cuda::TimingStats s =
        cuda::compute_stats(c["samples"].get<std::vector<double>>(), "cuda_event");
    const Json got = s.to_json();
    for (const auto& [key, want] : c["stats"].items()) {
      expect_close(number(want), got[key].get<double>(), key);
    }
  }
  for (const Json& c : v["relative_standard_error"]) {
    expect_close(number(c["rse"]),
                 cuda::relative_standard_error(c["samples"].get<std::vector<double>>()),
                 c["samples"].dump());
  }
  for (const Json& c : v["stop_reason"]) {
    const std::string reason =
        cuda::stop_reason(c["samples"].get<std::vector<double>>(), timing_options(c["options"]),
                          c["elapsed_ms"].get<double>());
    EXPECT_EQ(reason, c["stop_reason"].is_null() ? "" : c["stop_reason"].get<std::string>())
        << c["name"];
  }
  for (const Json& c : v["spin_us_for"]) {
    expect_close(c["spin_us"], cuda::spin_us_for(c["enqueue_ms"].get<double>()), c.dump());
  }
  for (const Json& c : v["next_spin_us"]) {
    expect_close(
        c["next_spin_us"],
        cuda::next_spin_us(c["spin_us"].get<double>(), c["observed_enqueue_ms"].get<double>()),
        c.dump());
  }
  for (const Json& c : v["without_window_overhead"]) {
    const Json got = cuda::without_window_overhead(
                         cuda::compute_stats(c["samples"].get<std::vector<double>>(), "cuda_event"),
                         c["overhead_ms"].get<double>())
                         .to_json();
    for (const auto& [key, want] : c["stats"].items()) {
      expect_close(want.get<double>(), got[key].get<double>(), key);
    }
  }
  for (const Json& c : v["launch_not_hidden"]) {
    EXPECT_EQ(!cuda::launch_not_hidden_message(c["uncovered"], c["trials"], 0.02).empty(),
              c["flagged"].get<bool>())
        << c.dump();
  }
  for (const Json& c : v["stream_skew"]) {
    EXPECT_EQ(!cuda::stream_skew_message(c["sync_median_ms"], c["event_median_ms"]).empty(),
              c["flagged"].get<bool>())
        << c.dump();
  }
}

TEST(ProtocolVectorsTest, DefaultTolerancesAndOverrides) {
  const Json v = load("tolerances.json");
  ASSERT_FALSE(v["cases"].empty());
  for (const Json& c : v["cases"]) {
    auto dtype = model::dtype_from(c["dtype"].get<std::string>());
    ASSERT_TRUE(dtype.has_value()) << c["dtype"];
    auto opt = [](const Json& j) {
      return j.is_null() ? std::nullopt : std::optional<double>(j.get<double>());
    };
    const cuda::Tolerance t = cuda::resolve_tolerance(*dtype, opt(c["atol"]), opt(c["rtol"]));
    EXPECT_EQ(t.atol, c["expect"]["atol"].get<double>()) << c.dump();
    EXPECT_EQ(t.rtol, c["expect"]["rtol"].get<double>()) << c.dump();
  }
}

TEST(ProtocolVectorsTest, ResultDocuments) {
  const Json v = load("results.json");
  const Json fresh = cuda_worker::JobResult().to_json();
  std::set<std::string> allowed;
  for (const Json& k : v["always"]) {
    EXPECT_TRUE(fresh.contains(k.get<std::string>())) << k;
    allowed.insert(k.get<std::string>());
  }
  for (const Json& k : v["when_set"]) {
    EXPECT_FALSE(fresh.contains(k.get<std::string>())) << k;
    allowed.insert(k.get<std::string>());
  }
  for (const auto& [key, value] : fresh.items()) {
    EXPECT_TRUE(allowed.contains(key)) << "a field the vectors do not list: " << key;
  }
  for (const auto& [key, want] : v["fresh"].items())
    EXPECT_EQ(fresh[key], want) << key;

  for (const Json& c : v["fail_cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    cuda_worker::JobResult r;
    for (const Json& f : c["fails"]) {
      auto kind = model::error_kind_from(f[0].get<std::string>());
      ASSERT_TRUE(kind.has_value());
      r.fail(*kind, f[1]);
    }
    const Json got = r.to_json();
    for (const auto& [key, want] : c["expect"].items())
      EXPECT_EQ(got[key], want) << key;
    for (const Json& key : c["absent"])
      EXPECT_FALSE(got.contains(key.get<std::string>())) << key;
  }
  for (const Json& c : v["check_cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    cuda_worker::JobResult r;
    for (const Json& ch : c["checks"])
      r.add_check(ch[0], ch[1], ch[2], ch[3]);
    const Json got = r.to_json();
    EXPECT_EQ(got["checks"], c["expect_checks"]);
    EXPECT_EQ(got["honesty"], c["expect_honesty"]);
  }
}

}  // namespace
}  // namespace kforge
