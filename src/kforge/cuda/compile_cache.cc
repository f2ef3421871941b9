#include "kforge/cuda/compile_cache.h"

#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/json.h"

namespace kforge::cuda {

StatusOr<std::unique_ptr<CompileCache>> CompileCache::open(const Options& options) {
  if (options.dir.empty()) return invalid_argument("the compile cache needs a directory");
  KF_RETURN_IF_ERROR(make_dirs(options.dir));
  return std::unique_ptr<CompileCache>(new CompileCache(options.dir));
}

std::string CompileCache::key_for(const CompileRequest& request, const std::string& nvrtc_version,
                                  const std::string& include_dir) {
  Json canonical = {{"format_version", 1},
                    {"source", request.source},
                    {"kernel_name", request.kernel_name},
                    {"options", request.options},
                    {"arch", request.arch},
                    {"nvrtc", nvrtc_version},
                    {"include_dir", include_dir}};
  return sha256_hex(canonical.dump());
}

std::filesystem::path CompileCache::path_of(const std::string& key) const {
  return dir_ / (key + ".kfc");
}

std::optional<CompiledKernel> CompileCache::find(const std::string& key) {
  auto text = read_file(path_of(key));
  if (!text.is_ok()) {
    ++misses_;
    return std::nullopt;
  }
  size_t newline = text->find('\n');
  auto header = parse_json(std::string_view(*text).substr(0, newline));
  if (newline == std::string::npos || !header.is_ok() || !header->is_object() ||
      header->value("key", "") != key ||
      header->value("image_bytes", int64_t{-1}) !=
          static_cast<int64_t>(text->size() - newline - 1)) {
    ++misses_;
    return std::nullopt;
  }
  CompiledKernel k;
  k.image = text->substr(newline + 1);
  k.format = header->value("format", "");
  k.lowered_name = header->value("lowered_name", "");
  k.arch = header->value("arch", "");
  k.log = header->value("log", "");
  ++hits_;
  return k;
}

Status CompileCache::put(const std::string& key, const CompiledKernel& kernel) {
  Json header = {
      {"key", key},          {"format", kernel.format}, {"lowered_name", kernel.lowered_name},
      {"arch", kernel.arch}, {"log", kernel.log},       {"image_bytes", kernel.image.size()}};
  return write_file_atomic(path_of(key), header.dump() + "\n" + kernel.image);
}

}  // namespace kforge::cuda
