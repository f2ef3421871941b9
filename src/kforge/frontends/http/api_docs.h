// GET /openapi.json and GET /docs: the REST API's OpenAPI 3.1 document (docs/openapi.json,
// embedded into the binary at build time) and a self-contained HTML page rendered from it
// (no scripts, no CDN: GPU hosts often reach no network).
//
// The served document lists exactly the routes the server has: paths and methods the router
// lacks (the REST API in `--mode mcp`, MCP in `--mode rest`) are left out. A route the
// document does not describe is logged at start-up; tests/unit/frontends/http/api_docs_test
// fails when the full server's routes and the document differ.
//
// Example (after every other route is registered):
//   KF_RETURN_IF_ERROR(add_docs_routes(router));
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/frontends/http/router.h"

namespace kforge::frontends::http {

// The embedded text of docs/openapi.json (generated source).
std::string_view openapi_text();

// The parsed document.
const Json& openapi_document();

// (method, OpenAPI path) of every operation of `doc`, methods upper case, sorted.
std::vector<std::pair<std::string, std::string>> documented_operations(const Json& doc);

// The router's routes as (method, OpenAPI path) ("/job/{id}" stays "/job/{id}"; parameter
// names are compared positionally, so "/job/{job_id}" matches it), sorted.
std::vector<std::pair<std::string, std::string>> routed_operations(const Router& router);

// `doc` with only the operations the router has (plus the docs routes themselves).
Json openapi_for(const Json& doc, const Router& router);

// A readable HTML reference of `doc`: operations, parameters, bodies, responses, schemas.
std::string render_docs_html(const Json& doc);

// Registers GET /openapi.json and GET /docs, describing the routes registered so far.
Status add_docs_routes(Router& router);

}  // namespace kforge::frontends::http
