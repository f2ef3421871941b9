// Real NVRTC, no GPU: the library comes from the CUDA 13 wheels that scripts/setup.sh
// installs into the venv (the same wheels whose headers the build uses), so these tests run
// on CI. KFORGE_NVRTC_LIB overrides the location.
#include "kforge/cuda/nvrtc_compiler.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "kforge/common/files.h"
#include "kforge/cuda/compile_request.h"
#include "kforge/model/parse.h"

namespace kforge::cuda {
namespace {

namespace fs = std::filesystem;

const char* const kVectorAdd = R"(
extern "C" __global__ void vector_add(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + y[i] * SCALE;
}
)";

const char* const kTemplated = R"(
#include <cuda_fp16.h>
namespace ops {
template <int TILE>
__global__ void scale(__half* data, int n) {
  int i = blockIdx.x * TILE + threadIdx.x;
  if (i < n) data[i] = __hmul(data[i], __float2half(2.0f));
}
}  // namespace ops
)";

std::shared_ptr<const NvrtcApi> load_nvrtc() {
  NvrtcApi::Options options;
  const fs::path wheel_lib = fs::path(KFORGE_TEST_CUDA_INCLUDE_DIR).parent_path() / "lib";
  if (fs::exists(wheel_lib / "libnvrtc.so.13")) options.search_dirs.push_back(wheel_lib);
  auto api = NvrtcApi::load(options);
  EXPECT_TRUE(api.is_ok()) << "NVRTC must be available (scripts/setup.sh installs it): "
                           << api.status().to_string();
  return api.is_ok() ? *api : nullptr;
}

class NvrtcCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nvrtc_ = load_nvrtc();
    ASSERT_NE(nvrtc_, nullptr);
    cache_dir_ = fs::temp_directory_path() /
                 ("kforge-nvrtc-test-" + std::to_string(::getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(cache_dir_);
  }
  void TearDown() override { fs::remove_all(cache_dir_); }

  std::unique_ptr<NvrtcCompiler> compiler(bool with_cache = true) {
    auto c = NvrtcCompiler::create({nvrtc_, with_cache ? cache_dir_ : fs::path()});
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return std::move(c).value();
  }

  static CompileRequest vector_add(std::vector<std::string> options = {"-DSCALE=1.0f"},
                                   std::string arch = "sm_90a") {
    return {kVectorAdd, "vector_add", std::move(options), std::move(arch)};
  }

  std::shared_ptr<const NvrtcApi> nvrtc_;
  fs::path cache_dir_;
};

TEST_F(NvrtcCompilerTest, ReportsVersionArchitecturesAndHeaders) {
  EXPECT_FALSE(nvrtc_->version().empty());
  EXPECT_NE(std::find(nvrtc_->supported_archs().begin(), nvrtc_->supported_archs().end(), 90),
            nvrtc_->supported_archs().end());
  ASSERT_FALSE(nvrtc_->include_dir().empty());
  EXPECT_TRUE(fs::exists(fs::path(nvrtc_->include_dir()) / "cuda_fp16.h"));
}

TEST_F(NvrtcCompilerTest, CompilesACubinForTheRealArchitecture) {
  auto r = compiler(false)->compile(vector_add());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->kernel.format, "cubin");
  EXPECT_EQ(r->kernel.arch, "sm_90a");
  EXPECT_EQ(r->kernel.lowered_name, "vector_add");
  ASSERT_GE(r->kernel.image.size(), 4u);
  EXPECT_EQ(r->kernel.image.substr(0, 4), std::string("\x7f"
                                                      "ELF"));
  EXPECT_FALSE(r->cache_hit);
}

TEST_F(NvrtcCompilerTest, CompilesPtxForAVirtualArchitecture) {
  auto r = compiler(false)->compile(vector_add({"-DSCALE=2.0f"}, "compute_80"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->kernel.format, "ptx");
  EXPECT_NE(r->kernel.image.find(".entry vector_add"), std::string::npos);
  EXPECT_EQ(r->kernel.image.back(), '\0');
}

TEST_F(NvrtcCompilerTest, FindsATemplatedKernelInANamespaceWithCudaHeaders) {
  CompileRequest request{kTemplated, "ops::scale<128>", {"--use_fast_math"}, "sm_90a"};
  auto r = compiler(false)->compile(request);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->kernel.lowered_name.starts_with("_ZN3ops5scaleILi128EEEvP6__halfi"))
      << r->kernel.lowered_name;
}

TEST_F(NvrtcCompilerTest, SyntaxErrorIsInvalidArgumentWithTheLog) {
  CompileRequest request{"__global__ void broken(float* x) { x[0] = ; }", "broken", {}, "sm_90a"};
  auto r = compiler()->compile(request);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("NVRTC_ERROR_COMPILATION"), std::string::npos);
  EXPECT_NE(r.status().message().find("expected an expression"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("broken.cu(1)"), std::string::npos);
}

TEST_F(NvrtcCompilerTest, HostFilesAreNotIncludedSoTheirLinesNeverReachTheLog) {
  // NVRTC used to compile it and quote /etc/passwd's lines in its error.
  CompileRequest request{"#include \"/etc/passwd\"\n__global__ void k() {}", "k", {}, "sm_90a"};
  auto r = compiler()->compile(request);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("k.cu line 1"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("root:"), std::string::npos) << r.status().message();
}

TEST_F(NvrtcCompilerTest, UnknownKernelNameSaysWhichFieldIsWrong) {
  CompileRequest request = vector_add();
  request.kernel_name = "vector_sub";
  auto r = compiler()->compile(request);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("metadata.kernel_name 'vector_sub' is not defined"),
            std::string::npos)
      << r.status().message();
}

TEST_F(NvrtcCompilerTest, BadArchitectureIsRefused) {
  auto r = compiler()->compile(vector_add({}, "hopper"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(NvrtcCompilerTest, SecondCompileIsACacheHitWithTheSameImage) {
  auto first_compiler = compiler();
  auto first = first_compiler->compile(vector_add());
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_FALSE(first->cache_hit);
  EXPECT_EQ(first_compiler->cache()->misses(), 1);
  EXPECT_TRUE(fs::exists(cache_dir_ / (first->cache_key + ".kfc")));

  // A new compiler (another worker process) over the same directory.
  auto second_compiler = compiler();
  auto second = second_compiler->compile(vector_add());
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second_compiler->cache()->hits(), 1);
  EXPECT_EQ(second->cache_key, first->cache_key);
  EXPECT_EQ(second->kernel.image, first->kernel.image);
  EXPECT_EQ(second->kernel.lowered_name, first->kernel.lowered_name);
  EXPECT_EQ(second->kernel.format, "cubin");
}

TEST_F(NvrtcCompilerTest, SourceOptionsOrArchitectureChangesMiss) {
  auto c = compiler();
  ASSERT_TRUE(c->compile(vector_add()).is_ok());
  CompileRequest other_source = vector_add();
  other_source.source += "\n// a comment\n";
  for (const CompileRequest& r : {other_source, vector_add({"-DSCALE=1.0f", "--use_fast_math"}),
                                  vector_add({"-DSCALE=1.0f"}, "sm_80")}) {
    auto result = c->compile(r);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    EXPECT_FALSE(result->cache_hit);
  }
  EXPECT_EQ(c->cache()->hits(), 0);
  EXPECT_EQ(c->cache()->misses(), 4);
  EXPECT_TRUE(c->compile(vector_add({"-DSCALE=1.0f"}, "sm_80"))->cache_hit);
}

TEST_F(NvrtcCompilerTest, CompileErrorsAreNotCached) {
  auto c = compiler();
  CompileRequest bad{"__global__ void k() { nope; }", "k", {}, "sm_90a"};
  EXPECT_FALSE(c->compile(bad).is_ok());
  EXPECT_FALSE(c->compile(bad).is_ok());
  EXPECT_EQ(c->cache()->hits(), 0);
}

TEST_F(NvrtcCompilerTest, CorruptCacheEntryIsAMissAndIsRewritten) {
  auto c = compiler();
  auto first = c->compile(vector_add());
  ASSERT_TRUE(first.is_ok());
  const fs::path entry = cache_dir_ / (first->cache_key + ".kfc");
  ASSERT_TRUE(write_file_atomic(entry, "{\"key\": \"x\"}\ngarbage").is_ok());
  auto again = c->compile(vector_add());
  ASSERT_TRUE(again.is_ok());
  EXPECT_FALSE(again->cache_hit);
  EXPECT_EQ(again->kernel.image, first->kernel.image);
  EXPECT_TRUE(c->compile(vector_add())->cache_hit);
}

TEST(CompileCacheKeyTest, KeyCoversEveryInput) {
  const CompileRequest base{"src", "k", {"-O3"}, "sm_90a"};
  const std::string key = CompileCache::key_for(base, "13.0", "/inc");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, CompileCache::key_for(base, "13.0", "/inc"));
  CompileRequest r = base;
  r.source = "src2";
  EXPECT_NE(CompileCache::key_for(r, "13.0", "/inc"), key);
  r = base;
  r.kernel_name = "k2";
  EXPECT_NE(CompileCache::key_for(r, "13.0", "/inc"), key);
  r = base;
  r.options = {"-O2"};
  EXPECT_NE(CompileCache::key_for(r, "13.0", "/inc"), key);
  r = base;
  r.arch = "sm_80";
  EXPECT_NE(CompileCache::key_for(r, "13.0", "/inc"), key);
  EXPECT_NE(CompileCache::key_for(base, "13.1", "/inc"), key);
  EXPECT_NE(CompileCache::key_for(base, "13.0", "/other"), key);
}

TEST(CompileRequestTest, BuildsOptionsFromMetadataAndMetaArguments) {
  Json j = Json::parse(R"({
    "source_code": "__global__ void k(float* o) {}",
    "kernel_type": "cuda",
    "metadata": {"kernel_name": "k", "compile_options": ["-O3", "--use_fast_math"]},
    "io": {"args": [
      {"name": "o", "type": "tensor", "role": "output",
       "tensor_spec": {"shape": [4], "dtype": "float32"}},
      {"name": "TILE", "type": "int", "value": 16, "is_meta": true}],
      "launch": {"grid": [1], "block": [4]}}})");
  auto code = model::parse_kernel_code(j, JsonPath("kernel"), model::RequestLimits{});
  ASSERT_TRUE(code.is_ok()) << code.status().to_string();
  auto request = make_compile_request(*code, "sm_90a", "kernel");
  ASSERT_TRUE(request.is_ok()) << request.status().to_string();
  EXPECT_EQ(request->kernel_name, "k");
  EXPECT_EQ(request->arch, "sm_90a");
  EXPECT_EQ(request->options,
            (std::vector<std::string>{"--ptxas-options=-O3", "--use_fast_math", "-DTILE=16"}));

  code->metadata["compile_options"] = Json::array({"-I/"});
  auto refused = make_compile_request(*code, "sm_90a", "custom_kernel");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().field_path(), "custom_kernel.metadata.compile_options[0]");
}

}  // namespace
}  // namespace kforge::cuda
