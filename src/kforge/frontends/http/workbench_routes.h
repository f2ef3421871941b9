// GET /workbench/sessions and GET /workbench/sessions/{id}: the Triton workbench's stored
// sessions, read-only (docs/rest-api.md "GET /workbench/sessions"; the views are
// workbench/session_views.h). Sessions are made and changed only through the MCP tools.
//
//   GET /workbench/sessions?state=write,end&kernel_name=softmax&owner=alice&limit=20&cursor=c1..
//     -> {"sessions": [summary, ...], "next_cursor": "c1..." | null, "limit": 20}
//   GET /workbench/sessions/{id}
//     -> summary + settings, context, history, versions (source, results), log (Markdown)
//
// Scoped as jobs are: a user token sees its own sessions only (another's is a 404), an admin
// token every one; on a server with tokens nothing answers without one (access_policy.h).
// Every unknown parameter and malformed value is a 400 naming "query.<name>".
//
// Example:
//   KF_RETURN_IF_ERROR(add_workbench_routes(router, *workbench, blocking));
#pragma once

#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/http/http_message.h"
#include "kforge/frontends/http/router.h"
#include "kforge/store/workbench_store.h"
#include "kforge/workbench/workbench.h"

namespace kforge::frontends::http {

// The listing `request` asks for (before the principal narrows it: session_views.h).
StatusOr<store::WorkbenchSessionQuery> parse_session_list_request(const HttpRequest& request);

// Registers both routes. `workbench` and the pool behind `blocking` must outlive every request.
Status add_workbench_routes(Router& router, workbench::Workbench& workbench,
                            BlockingExecutor blocking);

}  // namespace kforge::frontends::http
