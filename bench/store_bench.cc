// What SQLite's synchronous=FULL (the default: every accepted job fsynced before it is
// acknowledged) costs against NORMAL, per insert_job and per finish_job, on this disk.
// Run: build/release/bin/kforge_micro_bench --benchmark_filter=Store
// (the data directory is a fresh temporary directory under $TMPDIR).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "kforge/store/sqlite/sqlite_store.h"

namespace {

namespace fs = std::filesystem;
using kforge::Json;
using kforge::model::JobRecord;
using kforge::model::JobState;
using kforge::store::SqliteStore;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kforge_store_bench_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void BM_StoreInsertAndFinish(benchmark::State& state) {
  const auto sync =
      state.range(0) != 0 ? SqliteStore::Synchronous::kFull : SqliteStore::Synchronous::kNormal;
  TempDir dir;
  auto store = SqliteStore::open({.path = dir.path() / "kforge.db", .synchronous = sync});
  if (!store.is_ok()) {
    state.SkipWithError(store.status().to_string().c_str());
    return;
  }
  const Json request = {
      {"kernel", {{"source_code", std::string(2000, 'x')}, {"kernel_type", "torch"}}}};
  int64_t n = 0;
  for (auto _ : state) {
    JobRecord job;
    job.id = "job" + std::to_string(n++);
    job.request = request;
    job.created_ms = n;
    if (!(*store)->insert_job(job).is_ok()) state.SkipWithError("insert failed");
    if (!(*store)->finish_job(job.id, JobState::kCancelled, Json(), "bench", n).is_ok()) {
      state.SkipWithError("finish failed");
    }
  }
  state.SetLabel(sync == SqliteStore::Synchronous::kFull ? "synchronous=FULL"
                                                         : "synchronous=NORMAL");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StoreInsertAndFinish)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
