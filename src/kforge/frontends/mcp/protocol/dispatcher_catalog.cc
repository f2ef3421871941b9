// Dispatcher methods of resources, prompts and completions (declared only when the catalog
// has any; see Catalog::capabilities).
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/protocol/pagination.h"

namespace kforge::frontends::mcp {
namespace {

void respond_page(RequestContext& ctx, const char* list, const char* key,
                  const std::vector<Json>& entries, const Json& params, size_t page_size) {
  auto page = paginate(list, entries.size(), params, page_size);
  if (!page.is_ok()) return ctx.respond_status(page.status());
  Json out = Json::array();
  for (size_t i = page->begin; i < page->end; ++i)
    out.push_back(entries[i]);
  Json result = {{key, std::move(out)}};
  if (page->next_cursor) result["nextCursor"] = *page->next_cursor;
  ctx.respond(std::move(result));
}

// params.uri as a string, or an invalid-params answer.
const std::string* uri_param(RequestContext& ctx, const Json& params) {
  const Json* uri = jsonrpc::param(params, "uri");
  if (uri == nullptr || !uri->is_string()) {
    ctx.respond_error(jsonrpc::kInvalidParams, "uri: is required and must be a string");
    return nullptr;
  }
  return &uri->get_ref<const std::string&>();
}

}  // namespace

void Dispatcher::list_resources(RequestContext& ctx, const Json& params, bool templates) const {
  if (templates) {
    respond_page(ctx, "resources/templates", "resourceTemplates",
                 catalog_.resources.template_listings(), params, options_.page_size);
  } else {
    respond_page(ctx, "resources", "resources", catalog_.resources.resource_listings(), params,
                 options_.page_size);
  }
}

void Dispatcher::read_resource(RequestContext& ctx, const Json& params) const {
  const std::string* uri = uri_param(ctx, params);
  if (uri == nullptr) return;
  auto contents = catalog_.resources.read(*uri);
  if (contents.is_ok()) return ctx.respond(std::move(contents).value());
  if (contents.status().code() == ErrorCode::kNotFound) {
    // -32002 until 2025-11-25; invalid params from 2026-07-28 on (SEP-2164).
    const int code =
        ctx.session().is_stateless() ? jsonrpc::kInvalidParams : jsonrpc::kResourceNotFound;
    ctx.respond_error(code, "Resource not found: " + *uri, Json{{"uri", *uri}});
    return;
  }
  ctx.respond_status(contents.status());
}

void Dispatcher::subscribe_resource(RequestContext& ctx, const Json& params) const {
  const std::string* uri = uri_param(ctx, params);
  if (uri == nullptr) return;
  // Resources here never change, so a subscription is accepted and never fires.
  ctx.respond(Json::object());
}

void Dispatcher::list_prompts(RequestContext& ctx, const Json& params) const {
  respond_page(ctx, "prompts", "prompts", catalog_.prompts.listings(), params, options_.page_size);
}

void Dispatcher::get_prompt(RequestContext& ctx, const Json& params) const {
  const Json* name = jsonrpc::param(params, "name");
  if (name == nullptr || !name->is_string()) {
    ctx.respond_error(jsonrpc::kInvalidParams, "name: is required and must be a string");
    return;
  }
  const Json* arguments = jsonrpc::param(params, "arguments");
  auto result = catalog_.prompts.get(name->get<std::string>(),
                                     arguments != nullptr ? *arguments : Json(nullptr), params);
  if (!result.is_ok()) return ctx.respond_status(result.status());
  ctx.respond(std::move(result).value());
}

void Dispatcher::complete(RequestContext& ctx, const Json& params) const {
  auto result = catalog_.completion(params);
  if (!result.is_ok()) return ctx.respond_status(result.status());
  ctx.respond(std::move(result).value());
}

}  // namespace kforge::frontends::mcp
