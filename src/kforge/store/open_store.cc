#include "kforge/store/open_store.h"

#include <unistd.h>

#include <array>
#include <string_view>

#include "kforge/common/random.h"
#include "kforge/store/sqlite/sqlite_store.h"
#if KFORGE_WITH_POSTGRESQL
#include "kforge/store/postgres/postgres_store.h"
#endif

namespace kforge::store {

bool postgres_supported() {
  return KFORGE_WITH_POSTGRESQL != 0;
}

std::string default_node_id() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string suffix;
  uint64_t r = secure_random_u64();
  for (int i = 0; i < 4; ++i, r >>= 4)
    suffix += kHex[r & 15];
  const std::string name = host[0] != '\0' ? host.data() : "node";
  return name + "-" + std::to_string(::getpid()) + "-" + suffix;
}

StatusOr<std::unique_ptr<Store>> open_store(const StoreOptions& options) {
  const std::string_view url = options.url;
  if (url.empty() || url == "sqlite") {
    SqliteStore::Options o;
    o.path = options.sqlite_path;
    o.synchronous =
        options.sqlite_fsync ? SqliteStore::Synchronous::kFull : SqliteStore::Synchronous::kNormal;
    KF_ASSIGN_OR_RETURN(auto store, SqliteStore::open(o));
    return std::unique_ptr<Store>(std::move(store));
  }
  if (!url.starts_with("postgresql://") && !url.starts_with("postgres://")) {
    // Never echo what may hold a password: the scheme only, or the word itself.
    const size_t sep = url.find("://");
    const std::string shown = sep != std::string_view::npos
                                  ? std::string(url.substr(0, sep)) + "://..."
                              : url.find('=') != std::string_view::npos ? "a key=value string"
                                                                        : std::string(url);
    return invalid_argument(
        "must be 'sqlite' (the default: a database in the data directory) or a PostgreSQL URL "
        "postgresql://user@host:port/database, got '" +
            shown + "'",
        "--store");
  }
#if KFORGE_WITH_POSTGRESQL
  PostgresStore::Options o;
  o.conninfo = options.url;
  o.node_id = options.node_id.empty() ? default_node_id() : options.node_id;
  o.lease = options.lease;
  auto store = PostgresStore::open(o);
  if (!store.is_ok()) {  // name the flag, unless the error already does
    const Status& error = store.status();
    return error.field_path().empty() ? error.with_context("--store") : error;
  }
  return std::unique_ptr<Store>(std::move(store).value());
#else
  return failed_precondition(
      "--store: this kforge was built without PostgreSQL support (KFORGE_WITH_POSTGRESQL=OFF, "
      "as scripts/package-gpu.sh builds the static binary); use the default SQLite store or a "
      "build with -DKFORGE_WITH_POSTGRESQL=ON");
#endif
}

}  // namespace kforge::store
