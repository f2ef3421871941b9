// Read-only JSON views of stored workbench sessions, for the REST API and the web UI
// (docs/rest-api.md "GET /workbench/sessions"). They read the store only: a session that has
// not been stored yet (workbench.h: nothing to keep) is not listed.
//
// Visibility is a session's owner (Session::owner): a user principal sees its own sessions,
// an admin (and the anonymous principal of a server without tokens) sees every one; another
// principal's session is answered as an unknown one (kNotFound), as jobs are.
//
// Thread-safety: as the store's (any thread). Blocks on the store.
//
// Example:
//   store::WorkbenchSessionQuery q;
//   q.limit = 20;
//   KF_ASSIGN_OR_RETURN(Json page, list_session_views(store, q, principal));
//   // {"sessions": [session summary, ...], "next_cursor": "c1..." | null, "limit": 20}
#pragma once

#include <string>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/principal.h"
#include "kforge/store/workbench_store.h"
#include "kforge/workbench/knowledge.h"
#include "kforge/workbench/session.h"

namespace kforge::workbench {

// The most sessions one listing returns.
inline constexpr int kMaxSessionListLimit = 100;

// A page of the sessions `query` selects (query.limit of them, at most
// kMaxSessionListLimit), narrowed to those `principal` may see: a user principal's query is
// narrowed to its own (a query.owner naming someone else lists nothing). next_cursor
// continues it (encode_session_cursor), null on the last page.
StatusOr<Json> list_session_views(store::WorkbenchStore& store, store::WorkbenchSessionQuery query,
                                  const model::Principal& principal);

// One session: its summary plus settings, context, history, errors, every version with its
// source and results, and its development log (`log`, Markdown: narrative.h render_dev_log).
// kNotFound (field "session_id") when unknown or not `principal`'s to see.
StatusOr<Json> session_view(store::WorkbenchStore& store, const Knowledge& knowledge,
                            const std::string& id, const model::Principal& principal);

// The summary of a session in a listing: id, kernel, state, owner, device, times (Unix
// seconds), version counts, the best version and its time and speedup.
Json session_summary_view(const Session& session);

// A listing's cursor: the key (updated_ms, id) of a page's last session, as text; opaque and
// URL-safe. decode: kInvalidArgument naming `field` for text encode did not write.
std::string encode_session_cursor(int64_t updated_ms, const std::string& id);
Status decode_session_cursor(std::string_view cursor, const std::string& field,
                             store::WorkbenchSessionQuery& query);

}  // namespace kforge::workbench
