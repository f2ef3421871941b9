#include "kforge/sandbox/jail_spec.h"

#include <sys/resource.h>

#include "kforge/common/base64.h"

namespace kforge::sandbox {
namespace {

StatusOr<std::vector<std::string>> string_list(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  if (!j[key].is_array()) return invalid_argument("must be an array of strings", key);
  for (size_t i = 0; i < j[key].size(); ++i) {
    if (!j[key][i].is_string()) {
      return invalid_argument("must be a string", std::string(key) + "[" + std::to_string(i) + "]");
    }
    out.push_back(j[key][i].get<std::string>());
  }
  return out;
}

StatusOr<std::map<std::string, std::string>> string_map(const Json& j, const char* key) {
  std::map<std::string, std::string> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  if (!j[key].is_object()) return invalid_argument("must be an object of strings", key);
  for (const auto& [k, v] : j[key].items()) {
    if (!v.is_string()) return invalid_argument("must be a string", std::string(key) + "." + k);
    out[k] = v.get<std::string>();
  }
  return out;
}

StatusOr<std::vector<TmpfsMount>> tmpfs_list(const Json& j) {
  std::vector<TmpfsMount> out;
  if (!j.contains("tmpfs") || j["tmpfs"].is_null()) return out;
  if (!j["tmpfs"].is_array()) return invalid_argument("must be an array", "tmpfs");
  for (size_t i = 0; i < j["tmpfs"].size(); ++i) {
    const Json& t = j["tmpfs"][i];
    const std::string field = "tmpfs[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("path") || !t["path"].is_string() ||
        !t.contains("size_bytes") || !t["size_bytes"].is_number_unsigned() ||
        t["size_bytes"].get<uint64_t>() == 0) {
      return invalid_argument("needs a string 'path' and a positive 'size_bytes'", field);
    }
    TmpfsMount m;
    m.path = t["path"].get<std::string>();
    m.size_bytes = t["size_bytes"].get<uint64_t>();
    m.mode = t.value("mode", 01777U);
    if (t.contains("uid") && t["uid"].is_number_unsigned()) m.uid = t["uid"].get<uid_t>();
    if (t.contains("gid") && t["gid"].is_number_unsigned()) m.gid = t["gid"].get<gid_t>();
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

StatusOr<int> rlimit_resource(const std::string& name) {
  static const std::map<std::string, int> kNames = {
      {"core", RLIMIT_CORE},   {"nofile", RLIMIT_NOFILE},  {"fsize", RLIMIT_FSIZE},
      {"nproc", RLIMIT_NPROC}, {"as", RLIMIT_AS},          {"cpu", RLIMIT_CPU},
      {"stack", RLIMIT_STACK}, {"memlock", RLIMIT_MEMLOCK}};
  auto it = kNames.find(name);
  if (it == kNames.end()) return invalid_argument("unknown rlimit '" + name + "'", "rlimits");
  return it->second;
}

StatusOr<JailSpec> JailSpec::from_json(const Json& j) {
  if (!j.is_object()) return invalid_argument("must be an object", "jail");
  JailSpec s;
  s.role = j.value("role", "");
  s.new_mount_ns = j.value("new_mount_ns", true);
  s.new_net_ns = j.value("new_net_ns", true);
  s.new_ipc_ns = j.value("new_ipc_ns", true);
  s.new_uts_ns = j.value("new_uts_ns", true);
  KF_ASSIGN_OR_RETURN(s.read_only, string_list(j, "read_only"));
  KF_ASSIGN_OR_RETURN(s.listable, string_list(j, "listable"));
  KF_ASSIGN_OR_RETURN(s.devices, string_list(j, "devices"));
  KF_ASSIGN_OR_RETURN(s.hide, string_list(j, "hide"));
  KF_ASSIGN_OR_RETURN(s.tmpfs, tmpfs_list(j));
  KF_ASSIGN_OR_RETURN(s.files, string_map(j, "files"));
  KF_ASSIGN_OR_RETURN(s.links, string_map(j, "links"));
  if (j.contains("binds") && j["binds"].is_array()) {
    for (const auto& b : j["binds"]) {
      if (!b.is_object() || !b.contains("source") || !b.contains("target") ||
          !b["source"].is_string() || !b["target"].is_string()) {
        return invalid_argument("each bind needs string 'source' and 'target'", "binds");
      }
      s.binds.push_back({b["source"].get<std::string>(), b["target"].get<std::string>(),
                         b.value("writable", false)});
    }
  }
  s.mount_proc = j.value("mount_proc", true);
  s.bind_sys = j.value("bind_sys", true);
  s.hostname = j.value("hostname", "kforge-job");
  s.loopback_up = j.value("loopback_up", true);
  s.chdir = j.value("chdir", "");
  // A jail that names an identity must get it: a malformed one is an error, never root.
  for (const char* key : {"uid", "gid"}) {
    if (j.contains(key) && !j[key].is_null() && !j[key].is_number_unsigned()) {
      return invalid_argument("must be an unsigned integer", key);
    }
  }
  if (j.contains("uid") && j["uid"].is_number_unsigned()) s.uid = j["uid"].get<uid_t>();
  if (j.contains("gid") && j["gid"].is_number_unsigned()) s.gid = j["gid"].get<gid_t>();
  if (j.contains("groups") && j["groups"].is_array()) {
    for (const auto& g : j["groups"]) {
      if (!g.is_number_unsigned()) return invalid_argument("must be unsigned integers", "groups");
      s.groups.push_back(g.get<gid_t>());
    }
  }
  if (s.uid && *s.uid == 0) return invalid_argument("a jail never runs as uid 0", "uid");
  if (j.contains("rlimits") && j["rlimits"].is_object()) {
    for (const auto& [k, v] : j["rlimits"].items()) {
      if (!v.is_number_unsigned()) return invalid_argument("must be unsigned", "rlimits." + k);
      KF_RETURN_IF_ERROR(rlimit_resource(k).status());
      s.rlimits[k] = v.get<uint64_t>();
    }
  }
  s.umask = j.value("umask", 077U);
  s.no_new_privs = j.value("no_new_privs", true);
  if (j.contains("seccomp_bpf_b64") && j["seccomp_bpf_b64"].is_string()) {
    auto decoded = base64_decode(j["seccomp_bpf_b64"].get<std::string>());
    if (!decoded.is_ok()) return invalid_argument(decoded.status().message(), "seccomp_bpf_b64");
    s.seccomp_bpf = std::move(decoded).value();
  }
  return s;
}

Json JailSpec::to_json() const {
  Json binds_json = Json::array();
  for (const auto& b : binds) {
    binds_json.push_back({{"source", b.source}, {"target", b.target}, {"writable", b.writable}});
  }
  Json tmpfs_json = Json::array();
  for (const auto& t : tmpfs) {
    Json m = {{"path", t.path}, {"size_bytes", t.size_bytes}, {"mode", t.mode}};
    if (t.uid) m["uid"] = *t.uid;
    if (t.gid) m["gid"] = *t.gid;
    tmpfs_json.push_back(std::move(m));
  }
  Json j = {{"role", role},
            {"new_mount_ns", new_mount_ns},
            {"new_net_ns", new_net_ns},
            {"new_ipc_ns", new_ipc_ns},
            {"new_uts_ns", new_uts_ns},
            {"read_only", read_only},
            {"listable", listable},
            {"devices", devices},
            {"binds", binds_json},
            {"tmpfs", tmpfs_json},
            {"files", files},
            {"links", links},
            {"hide", hide},
            {"mount_proc", mount_proc},
            {"bind_sys", bind_sys},
            {"hostname", hostname},
            {"loopback_up", loopback_up},
            {"chdir", chdir},
            {"groups", groups},
            {"rlimits", rlimits},
            {"umask", umask},
            {"no_new_privs", no_new_privs}};
  if (uid) j["uid"] = *uid;
  if (gid) j["gid"] = *gid;
  if (!seccomp_bpf.empty()) j["seccomp_bpf_b64"] = base64_encode(seccomp_bpf);
  return j;
}

}  // namespace kforge::sandbox
