// The skills extension `io.modelcontextprotocol/skills` (SEP-2640, revision 2026-07-28):
// kforge serves agent skills — a directory per skill holding SKILL.md (YAML frontmatter with
// `name` and `description`, then Markdown) and any files it refers to — to MCP clients.
//
//   --skills-dir DIR      every DIR/<name>/SKILL.md is a skill (e.g. the repository's skills/)
//
// What a client sees:
//   - every file as a resource `skill://<name>/<path>` (resources/list, resources/read; the
//     SKILL.md one with mimeType text/markdown and the frontmatter's name and description);
//   - `skills/list {cursor?}` -> {skills: [Skill], nextCursor?} and `skills/get {uri}` ->
//     {skill}, where Skill = {uri: skill://<name>/SKILL.md, frontmatter: <the YAML as JSON>,
//     resources: [{uri, digest: "sha256:<hex>", size}]} lists every file of the skill once;
//     an unknown uri is -32602;
//   - server/discover's capabilities.extensions["io.modelcontextprotocol/skills"] = {}.
// The methods are served to 2026-07-28 requests (Catalog::extension_methods).
//
// Loading checks (kInvalidArgument naming the file): the frontmatter is flat `key: value`
// YAML (strings, booleans, numbers, empty = null) with string `name` and `description`; the
// name follows the Agent Skills rule ([a-z0-9-]{1,64}, no leading, trailing or double hyphen)
// and equals its directory; a skill has at most 512 files and 16 MiB. Symbolic links are not
// followed. Files are read once at start.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/frontends/mcp/protocol/catalog.h"

namespace kforge::frontends::mcp {

inline constexpr std::string_view kSkillsExtension = "io.modelcontextprotocol/skills";

struct SkillFile {
  std::string path;  // relative to the skill's directory, '/'-separated
  std::string bytes;
};

struct Skill {
  std::string name;
  Json frontmatter;
  std::vector<SkillFile> files;  // sorted by path; includes SKILL.md

  std::string uri() const { return "skill://" + name + "/SKILL.md"; }
  // The Skill object of skills/list and skills/get.
  Json entry() const;
};

// The frontmatter of a SKILL.md as JSON; kInvalidArgument naming the line for what it cannot read.
StatusOr<Json> parse_frontmatter(std::string_view skill_md);

// Every skill under `dir`, sorted by name.
StatusOr<std::vector<Skill>> load_skills(const std::filesystem::path& dir);

// Serves `skills` through `catalog` (resources, the extension and its methods).
Status add_skills(Catalog& catalog, std::vector<Skill> skills, size_t page_size = 100);

}  // namespace kforge::frontends::mcp
