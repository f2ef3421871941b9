#include "kforge/frontends/http/job_list.h"

#include <gtest/gtest.h>

namespace kforge::frontends::http {
namespace {

HttpRequest request(ParamMap query, model::Principal who = {}) {
  HttpRequest r;
  r.method = "GET";
  r.path = "/jobs";
  r.query = std::move(query);
  r.principal = std::move(who);
  return r;
}

TEST(JobListRequestTest, ReadsEveryFilter) {
  auto parsed = parse_job_list_request(request({{"status", "success,failed"},
                                                {"kernel_type", "triton"},
                                                {"device", "cuda:0"},
                                                {"submitter", "alice"},
                                                {"since", "1795642720.5"},
                                                {"until", "2026-11-25T21:38:43.123Z"},
                                                {"limit", "7"},
                                                {"format", "jsonl"}}));
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  const model::JobQuery& q = parsed->query;
  EXPECT_EQ(q.states, (std::vector{model::JobState::kSucceeded, model::JobState::kFailed}));
  EXPECT_EQ(q.kernel_type, "triton");
  EXPECT_EQ(q.device, "cuda:0");
  EXPECT_EQ(q.submitter, "alice");
  EXPECT_EQ(q.created_from_ms, 1795642720500);
  EXPECT_EQ(q.created_before_ms, 1795642723123);
  EXPECT_EQ(q.limit, 7);
  EXPECT_TRUE(parsed->jsonl);
  EXPECT_FALSE(parsed->sees_none);
}

TEST(JobListRequestTest, DefaultsAndACursor) {
  auto cursor = model::encode_job_cursor({42, "abc"});
  auto parsed = parse_job_list_request(request({{"cursor", cursor}}));
  ASSERT_TRUE(parsed.is_ok());
  EXPECT_EQ(parsed->query.limit, 50);
  EXPECT_FALSE(parsed->jsonl);
  ASSERT_TRUE(parsed->query.after.has_value());
  EXPECT_EQ(parsed->query.after->id, "abc");
  EXPECT_FALSE(parsed->query.submitter.has_value());  // anonymous: every job
}

TEST(JobListRequestTest, AUserListsOnlyItsOwnJobs) {
  const model::Principal alice{"alice", model::Role::kUser};
  auto own = parse_job_list_request(request({}, alice));
  ASSERT_TRUE(own.is_ok());
  EXPECT_EQ(own->query.submitter, "alice");
  EXPECT_FALSE(own->sees_none);
  auto other = parse_job_list_request(request({{"submitter", "bob"}}, alice));
  ASSERT_TRUE(other.is_ok());
  EXPECT_TRUE(other->sees_none);
  const model::Principal admin{"root", model::Role::kAdmin};
  auto any = parse_job_list_request(request({{"submitter", "bob"}}, admin));
  ASSERT_TRUE(any.is_ok());
  EXPECT_EQ(any->query.submitter, "bob");
  EXPECT_FALSE(any->sees_none);
}

TEST(JobListRequestTest, BadValuesNameTheirParameter) {
  const std::pair<ParamMap, std::string> cases[] = {
      {{{"status", "done"}}, "query.status"},
      {{{"status", ""}}, "query.status"},
      {{{"kernel_type", "rust"}}, "query.kernel_type"},
      {{{"limit", "0"}}, "query.limit"},
      {{{"limit", "501"}}, "query.limit"},
      {{{"limit", "5x"}}, "query.limit"},
      {{{"since", "soon"}}, "query.since"},
      {{{"since", "-1"}}, "query.since"},
      {{{"until", "nan"}}, "query.until"},
      {{{"since", "20"}, {"until", "10"}}, "query.until"},
      {{{"cursor", "c1zz"}}, "query.cursor"},
      {{{"format", "csv"}}, "query.format"},
      {{{"submitter", std::string(129, 'a')}}, "query.submitter"},
      {{{"page", "2"}}, "query.page"},
  };
  for (const auto& [query, field] : cases) {
    auto parsed = parse_job_list_request(request(query));
    ASSERT_FALSE(parsed.is_ok()) << field;
    EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().field_path(), field);
  }
}

}  // namespace
}  // namespace kforge::frontends::http
