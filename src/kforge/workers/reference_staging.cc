#include "kforge/workers/reference_staging.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "kforge/common/errno_message.h"
#include "kforge/common/files.h"
#include "kforge/common/log.h"

namespace kforge::workers {
namespace {

namespace fs = std::filesystem;

bool is_hex_key(const std::string& key) {
  if (key.empty() || key.size() > 128) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// `dir` with the owner and group of `like`, mode 0700: the judge owns its staging directory.
Status make_dir_like(const fs::path& dir, const fs::path& like) {
  struct stat owner {};
  if (::stat(like.c_str(), &owner) != 0) return errno_error("stat " + like.string(), errno);
  KF_RETURN_IF_ERROR(make_dirs(dir));
  if (::geteuid() == 0 && ::chown(dir.c_str(), owner.st_uid, owner.st_gid) != 0) {
    return errno_error("chown " + dir.string(), errno);
  }
  if (::chmod(dir.c_str(), 0700) != 0) return errno_error("chmod " + dir.string(), errno);
  return Status::ok();
}

// A regular file, not a link to elsewhere (lstat: a symbolic link planted by a judge is not
// followed).
bool is_plain_file(const fs::path& path, nlink_t* links = nullptr) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (links != nullptr) *links = st.st_nlink;
  return true;
}

Status stage(const fs::path& batch_file, const fs::path& staged) {
  // Whatever is there (a staging directory is the judge's) must not be written through.
  if (::unlink(staged.c_str()) != 0 && errno != ENOENT) {
    return errno_error("unlink " + staged.string(), errno);
  }
  if (!is_plain_file(batch_file)) return Status::ok();  // the batch has no file yet
  if (::link(batch_file.c_str(), staged.c_str()) == 0) return Status::ok();
  const int link_error = errno;
  // Another file system (or hard links refused): a copy is as good, only slower.
  std::error_code ec;
  if (fs::copy_file(batch_file, staged, fs::copy_options::overwrite_existing, ec)) {
    return Status::ok();
  }
  return io_error("link " + batch_file.string() + ": " + errno_message(link_error) +
                  "; copy: " + ec.message());
}

}  // namespace

StagedReference stage_reference(Json& job_spec, const fs::path& judge_dir) {
  auto reuse = job_spec.find("reference_reuse");
  if (reuse == job_spec.end() || !reuse->is_object()) return {};
  const Json* dir = reuse->contains("dir") ? &(*reuse)["dir"] : nullptr;
  const Json* key = reuse->contains("key") ? &(*reuse)["key"] : nullptr;
  Status status = Status::ok();
  if (dir == nullptr || !dir->is_string() || key == nullptr || !key->is_string() ||
      !is_hex_key(key->get<std::string>())) {
    status = invalid_argument("reference_reuse needs a dir and a hexadecimal key");
  }
  const fs::path batch_dir = status.is_ok() ? fs::path(dir->get<std::string>()) : fs::path();
  const std::string file_name = status.is_ok() ? key->get<std::string>() + ".pt" : std::string();
  const fs::path staging = judge_dir / "reference";
  if (status.is_ok()) status = make_dir_like(staging, judge_dir);
  if (status.is_ok()) status = stage(batch_dir / file_name, staging / file_name);
  if (!status.is_ok()) {
    KF_LOG_WARN("job={} batch reference not staged (its reference runs in full): {}",
                job_spec.value("job_id", std::string()), status.to_string());
    job_spec.erase("reference_reuse");
    return {};
  }
  (*reuse)["dir"] = staging.string();
  return StagedReference(staging, batch_dir, file_name);
}

void StagedReference::collect() {
  if (staging_.empty()) return;
  const fs::path written = staging_ / file_name_;
  staging_.clear();
  // Two links: the batch's own file, staged and left as it was. Anything else but a plain
  // file the judge wrote (a link it planted, a directory) is not taken.
  nlink_t links = 0;
  if (!is_plain_file(written, &links) || links != 1) return;
  const fs::path target = batch_dir_ / file_name_;
  Status status = make_dirs(batch_dir_);
  if (status.is_ok() && ::rename(written.c_str(), target.c_str()) != 0) {
    status = errno_error("rename " + written.string() + " to " + target.string(), errno);
  }
  // Owned by the server from now on: no later judge (whose uid may be this one's again) can
  // change it in place; the judges' group still reads it.
  if (status.is_ok() && ::geteuid() == 0 &&
      ::lchown(target.c_str(), 0, static_cast<gid_t>(-1)) != 0) {
    status = errno_error("chown " + target.string(), errno);
  }
  if (!status.is_ok()) {
    KF_LOG_WARN("batch reference file not kept (the next judge computes it again): {}",
                status.to_string());
  }
}

}  // namespace kforge::workers
