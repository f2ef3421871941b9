// docs/openapi.json against the routes kforge serve registers (REST, MCP, docs): every route
// is described and every described operation exists.
#include "kforge/frontends/http/api_docs.h"

#include <gtest/gtest.h>

#include <boost/asio/thread_pool.hpp>
#include <filesystem>

#include "fakes/fake_job_service.h"
#include "kforge/common/random.h"
#include "kforge/frontends/http/bench_route.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/http/rest_handlers.h"
#include "kforge/frontends/http/ui_route.h"
#include "kforge/frontends/http/workbench_routes.h"
#include "kforge/frontends/mcp/http_transport.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/server_catalog.h"
#include "kforge/store/sqlite/sqlite_workbench_store.h"

namespace kforge::frontends::http {
namespace {

using Operations = std::vector<std::pair<std::string, std::string>>;

// "/job/{job_id}" and "/job/{id}" are the same route.
Operations shapes(Operations ops) {
  for (auto& [method, path] : ops) {
    std::string out;
    for (size_t i = 0; i < path.size(); ++i) {
      if (path[i] == '{') {
        out += "{}";
        i = path.find('}', i);
      } else {
        out += path[i];
      }
    }
    path = out;
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

class ApiDocsTest : public ::testing::Test {
 protected:
  ApiDocsTest() {
    auto blocking = make_blocking_executor(pool_);
    EXPECT_TRUE(add_rest_routes(router_, jobs_, blocking, {}).is_ok());
    auto reports = bench::BenchReportBook::open({.dir = dir_ / "bench-reports"});
    EXPECT_TRUE(reports.is_ok());
    // as kforge serve does
    EXPECT_TRUE(add_bench_route(router_, jobs_, blocking, {}, std::move(reports).value()).is_ok());
    EXPECT_TRUE(add_ui_routes(router_).is_ok());
    auto store = store::SqliteWorkbenchStore::open({dir_ / "kforge.db"});
    auto knowledge = workbench::Knowledge::load();
    EXPECT_TRUE(store.is_ok() && knowledge.is_ok());
    auto wb = workbench::Workbench::create(
        {.root = dir_ / "ws", .device = "cpu"}, jobs_,
        std::shared_ptr<store::WorkbenchStore>(std::move(store).value()), *knowledge, blocking);
    EXPECT_TRUE(wb.is_ok());
    workbench_ = std::move(wb).value();
    EXPECT_TRUE(add_workbench_routes(router_, *workbench_, blocking).is_ok());
    auto catalog = mcp::build_server_catalog(jobs_, blocking, {});
    EXPECT_TRUE(catalog.is_ok());
    catalog_ = std::move(catalog).value();
    dispatcher_ = std::make_unique<mcp::Dispatcher>(*catalog_, blocking);
    EXPECT_TRUE(mcp::add_mcp_routes(router_, *dispatcher_, blocking, {}).is_ok());
  }
  ~ApiDocsTest() override {
    pool_.join();
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("kforge-apidocs-" + random_hex(6));
  testing::FakeJobService jobs_;
  std::unique_ptr<workbench::Workbench> workbench_;
  boost::asio::thread_pool pool_{1};
  std::unique_ptr<mcp::Catalog> catalog_;
  std::unique_ptr<mcp::Dispatcher> dispatcher_;
  Router router_;
};

TEST_F(ApiDocsTest, TheDocumentDescribesExactlyTheServersRoutes) {
  ASSERT_TRUE(add_docs_routes(router_).is_ok());
  const Json& doc = openapi_document();
  ASSERT_EQ(doc.value("openapi", ""), "3.1.0");
  EXPECT_EQ(shapes(documented_operations(doc)), shapes(routed_operations(router_)));
}

TEST_F(ApiDocsTest, AServerWithoutMcpServesADocumentWithoutIt) {
  Router rest_only;
  ASSERT_TRUE(add_rest_routes(rest_only, jobs_, make_blocking_executor(pool_), {}).is_ok());
  Json doc = openapi_for(openapi_document(), rest_only);
  EXPECT_FALSE(doc["paths"].contains("/mcp"));
  EXPECT_TRUE(doc["paths"].contains("/evaluate"));
  EXPECT_TRUE(doc["paths"].contains("/docs"));
  EXPECT_TRUE(doc["paths"].contains("/job/{job_id}"));
  EXPECT_TRUE(doc["components"]["schemas"].contains("KernelCode"));
}

TEST_F(ApiDocsTest, TheHtmlPageIsSelfContainedAndNamesEveryOperation) {
  const Json& doc = openapi_document();
  const std::string html = render_docs_html(doc);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);  // nothing fetched from elsewhere
  EXPECT_EQ(html.find("https://"), std::string::npos);
  for (const auto& [method, path] : documented_operations(doc)) {
    EXPECT_NE(html.find("<code>" + path + "</code>"), std::string::npos) << method << " " << path;
  }
  EXPECT_NE(html.find("id=\"schema-KernelExecutionResult\""), std::string::npos);
  EXPECT_NE(html.find("href=\"#schema-RuntimeStats\""), std::string::npos);
}

TEST(ApiDocsRenderTest, EscapesText) {
  Json doc = {{"openapi", "3.1.0"},
              {"info", {{"title", "<b>x</b>"}, {"version", "1"}}},
              {"paths", Json::object()}};
  const std::string html = render_docs_html(doc);
  EXPECT_NE(html.find("&lt;b&gt;x&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<b>x</b>"), std::string::npos);
}

}  // namespace
}  // namespace kforge::frontends::http
