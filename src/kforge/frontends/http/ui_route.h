// GET /ui and GET /ui/{asset}: the web UI (docs/ui.md), a static single-page app that reads
// the REST API with the same token as any client.
//
// The assets are code, not data: they are served without a token (AccessPolicy::is_public),
// and every job, device or session the pages show comes from the API, which asks for one.
// Every answer carries a Content-Security-Policy that allows only this origin's scripts,
// styles and fetches (no inline script, no eval, no framing), `nosniff` and no referrer, so
// text from kernels that reached the page as markup still could not run.
//
// Example:
//   KF_RETURN_IF_ERROR(add_ui_routes(router));  // before add_docs_routes
#pragma once

#include <string_view>

#include "kforge/common/status.h"
#include "kforge/frontends/http/router.h"

namespace kforge::frontends::http {

// The Content-Security-Policy of every /ui answer.
inline constexpr std::string_view kUiContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

// The content type of an asset by its extension (text/html, text/javascript, text/css,
// image/svg+xml, image/png), application/octet-stream otherwise.
std::string_view ui_content_type(std::string_view path);

// Registers GET /ui (index.html) and GET /ui/{asset}. Fails only if one is already registered.
Status add_ui_routes(Router& router);

}  // namespace kforge::frontends::http
