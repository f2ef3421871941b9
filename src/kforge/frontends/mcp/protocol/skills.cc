#include "kforge/frontends/mcp/protocol/skills.h"

#include <algorithm>
#include <charconv>
#include <memory>

#include "kforge/common/base64.h"
#include "kforge/common/error_mapping.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/frontends/mcp/protocol/jsonrpc.h"
#include "kforge/frontends/mcp/protocol/pagination.h"

namespace kforge::frontends::mcp {
namespace {

constexpr size_t kMaxFiles = 512;
constexpr size_t kMaxBytes = 16u << 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A YAML plain or quoted scalar of the flat subset.
Json scalar(std::string_view v) {
  if (v.empty() || v == "~" || v == "null") return nullptr;
  if (v == "true") return true;
  if (v == "false") return false;
  if (v.size() >= 2 &&
      ((v.front() == '"' && v.back() == '"') || (v.front() == '\'' && v.back() == '\''))) {
    return std::string(v.substr(1, v.size() - 2));
  }
  int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec == std::errc() && end == v.data() + v.size()) return n;
  return std::string(v);
}

bool valid_skill_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '-' || name.back() == '-') return false;
  if (name.find("--") != std::string_view::npos) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string mime_type_of(const std::string& path) {
  auto ends = [&](std::string_view suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".md")) return "text/markdown";
  if (ends(".py")) return "text/x-python";
  if (ends(".json")) return "application/json";
  if (ends(".txt") || ends(".yaml") || ends(".yml")) return "text/plain";
  return "application/octet-stream";
}

bool is_text(const std::string& mime) {
  return mime.rfind("text/", 0) == 0 || mime == "application/json";
}

Status bad(const std::filesystem::path& file, std::string why) {
  return invalid_argument(std::move(why), file.string());
}

StatusOr<Skill> load_skill(const std::filesystem::path& dir) {
  const std::filesystem::path manifest = dir / "SKILL.md";
  Skill skill;
  skill.name = dir.filename().string();
  KF_ASSIGN_OR_RETURN(std::string text, read_file(manifest));
  auto frontmatter = parse_frontmatter(text);
  if (!frontmatter.is_ok()) return bad(manifest, frontmatter.status().message());
  skill.frontmatter = std::move(frontmatter).value();
  const Json& name = skill.frontmatter["name"];
  if (!name.is_string() || name.get<std::string>() != skill.name) {
    return bad(manifest,
               "frontmatter name must equal the skill's directory name '" + skill.name + "'");
  }
  if (!valid_skill_name(skill.name)) {
    return bad(manifest,
               "the skill name must be 1-64 of a-z, 0-9 and '-' (no leading, trailing or double "
               "'-')");
  }
  if (!skill.frontmatter["description"].is_string()) {
    return bad(manifest, "frontmatter description: is required and must be a string");
  }
  size_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    KF_ASSIGN_OR_RETURN(std::string bytes, read_file(it->path()));
    total += bytes.size();
    std::string rel = std::filesystem::relative(it->path(), dir).generic_string();
    skill.files.push_back(SkillFile{std::move(rel), std::move(bytes)});
    if (skill.files.size() > kMaxFiles) return bad(dir, "a skill may hold at most 512 files");
    if (total > kMaxBytes) return bad(dir, "a skill may hold at most 16 MiB");
  }
  if (ec) return bad(dir, "cannot list the skill's files: " + ec.message());
  std::sort(skill.files.begin(), skill.files.end(),
            [](const SkillFile& a, const SkillFile& b) { return a.path < b.path; });
  return skill;
}

Json contents_of(const std::string& uri, const SkillFile& file) {
  const std::string mime = mime_type_of(file.path);
  Json c = {{"uri", uri}, {"mimeType", mime}};
  if (is_text(mime)) {
    c["text"] = file.bytes;
  } else {
    c["blob"] = base64_encode(file.bytes);
  }
  return Json::array({std::move(c)});
}

using SkillsPtr = std::shared_ptr<const std::vector<Skill>>;

void list_skills(const SkillsPtr& skills, size_t page_size, RequestContext& ctx,
                 const Json& params) {
  auto page = paginate("skills", skills->size(), params, page_size);
  if (!page.is_ok()) return ctx.respond_status(page.status());
  Json listed = Json::array();
  for (size_t i = page->begin; i < page->end; ++i)
    listed.push_back((*skills)[i].entry());
  Json result = {{"skills", std::move(listed)}};
  if (page->next_cursor) result["nextCursor"] = *page->next_cursor;
  ctx.respond(std::move(result));
}

void get_skill(const SkillsPtr& skills, RequestContext& ctx, const Json& params) {
  const Json* uri = jsonrpc::param(params, "uri");
  if (uri == nullptr || !uri->is_string()) {
    return ctx.respond_error(jsonrpc::kInvalidParams,
                             "uri: is required and must be a skill://<name>/SKILL.md URI");
  }
  for (const Skill& s : *skills) {
    if (s.uri() == uri->get<std::string>()) return ctx.respond(Json{{"skill", s.entry()}});
  }
  ctx.respond_error(jsonrpc::kInvalidParams, "Skill not found: " + uri->get<std::string>(),
                    Json{{"uri", *uri}});
}

}  // namespace

Json Skill::entry() const {
  Json resources = Json::array();
  for (const SkillFile& f : files) {
    resources.push_back({{"uri", "skill://" + name + "/" + f.path},
                         {"digest", "sha256:" + sha256_hex(f.bytes)},
                         {"size", f.bytes.size()}});
  }
  return Json{{"uri", uri()}, {"frontmatter", frontmatter}, {"resources", std::move(resources)}};
}

StatusOr<Json> parse_frontmatter(std::string_view text) {
  if (text.substr(0, 4) != "---\n" && text.substr(0, 5) != "---\r\n") {
    return invalid_argument("SKILL.md must start with a '---' frontmatter block");
  }
  text.remove_prefix(text.find('\n') + 1);
  Json out = Json::object();
  size_t line_no = 1;
  while (true) {
    ++line_no;
    const size_t eol = text.find('\n');
    if (eol == std::string_view::npos) {
      return invalid_argument("the frontmatter block is not closed by a '---' line");
    }
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    if (trim(line) == "---") break;
    if (trim(line).empty() || trim(line).front() == '#') continue;
    const std::string where = "frontmatter line " + std::to_string(line_no) + ": ";
    if (line.front() == ' ' || line.front() == '\t' || line.front() == '-') {
      return invalid_argument(where +
                              "only flat 'key: value' lines are supported (no nesting or lists)");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return invalid_argument(where + "expected 'key: value'");
    std::string key(trim(line.substr(0, colon)));
    if (key.empty()) return invalid_argument(where + "the key is empty");
    out[key] = scalar(trim(line.substr(colon + 1)));
  }
  return out;
}

StatusOr<std::vector<Skill>> load_skills(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return invalid_argument("is not a directory", "--skills-dir " + dir.string());
  }
  std::vector<Skill> skills;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_symlink() || !entry.is_directory() ||
        !std::filesystem::exists(entry.path() / "SKILL.md")) {
      continue;
    }
    KF_ASSIGN_OR_RETURN(Skill skill, load_skill(entry.path()));
    skills.push_back(std::move(skill));
  }
  if (ec) return invalid_argument("cannot be listed: " + ec.message(), "--skills-dir");
  std::sort(skills.begin(), skills.end(),
            [](const Skill& a, const Skill& b) { return a.name < b.name; });
  return skills;
}

Status add_skills(Catalog& catalog, std::vector<Skill> skills, size_t page_size) {
  auto shared = std::make_shared<const std::vector<Skill>>(std::move(skills));
  for (const Skill& skill : *shared) {
    for (const SkillFile& file : skill.files) {
      ResourceSpec spec;
      spec.uri = "skill://" + skill.name + "/" + file.path;
      spec.mime_type = mime_type_of(file.path);
      if (file.path == "SKILL.md") {
        spec.name = skill.name;
        spec.description = skill.frontmatter.at("description").get<std::string>();
      } else {
        spec.name = skill.name + "/" + file.path;
      }
      const SkillFile* f = &file;  // owned by `shared`, which the reader keeps alive
      KF_RETURN_IF_ERROR(catalog.resources.add(
          std::move(spec),
          [shared, f](const std::string& uri, const UriVariables&) -> StatusOr<Json> {
            return contents_of(uri, *f);
          }));
    }
  }
  catalog.extensions[std::string(kSkillsExtension)] = Json::object();
  catalog.extension_methods["skills/list"] = [shared, page_size](RequestContext& ctx,
                                                                 const Json& params) {
    list_skills(shared, page_size, ctx, params);
  };
  catalog.extension_methods["skills/get"] = [shared](RequestContext& ctx, const Json& params) {
    get_skill(shared, ctx, params);
  };
  return Status::ok();
}

}  // namespace kforge::frontends::mcp
