#include "kforge/frontends/http/ui_route.h"

#include <gtest/gtest.h>

#include "kforge/frontends/http/access_policy.h"
#include "kforge/frontends/http/ui_assets.h"

namespace kforge::frontends::http {
namespace {

TEST(UiRouteTest, EveryAssetIsEmbeddedWithAKnownType) {
  bool has_index = false;
  for (const EmbeddedFile& f : ui_files()) {
    has_index = has_index || f.path == "index.html";
    EXPECT_FALSE(f.content.empty()) << f.path;
    EXPECT_NE(ui_content_type(f.path), "application/octet-stream") << f.path;
  }
  EXPECT_TRUE(has_index);
  EXPECT_EQ(ui_content_type("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ui_content_type("x.exe"), "application/octet-stream");
}

TEST(UiRouteTest, RoutesAndTheirPolicy) {
  Router router;
  ASSERT_TRUE(add_ui_routes(router).is_ok());
  EXPECT_NE(router.match("GET", "/ui").handler, nullptr);
  EXPECT_NE(router.match("GET", "/ui/app.js").handler, nullptr);
  EXPECT_EQ(router.match("POST", "/ui").status, 405);
  const std::string csp(kUiContentSecurityPolicy);
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe-"), std::string::npos);
}

TEST(UiRouteTest, OnlyTheAssetsSkipTheToken) {
  auto req = [](std::string method, std::string path) {
    HttpRequest r;
    r.method = std::move(method);
    r.path = std::move(path);
    return r;
  };
  EXPECT_TRUE(AccessPolicy::is_ui_asset(req("GET", "/ui")));
  EXPECT_TRUE(AccessPolicy::is_ui_asset(req("GET", "/ui/app.js")));
  EXPECT_FALSE(AccessPolicy::is_ui_asset(req("POST", "/ui")));
  EXPECT_FALSE(AccessPolicy::is_ui_asset(req("GET", "/uix")));
  EXPECT_FALSE(AccessPolicy::is_ui_asset(req("GET", "/jobs")));
  AccessPolicy::Options options;
  options.token = "secret";
  AccessPolicy policy(options);
  EXPECT_FALSE(policy.check(req("GET", "/ui/app.js"), "GET").has_value());
  auto refused = policy.check(req("GET", "/jobs"), "GET");
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 401);
}

}  // namespace
}  // namespace kforge::frontends::http
