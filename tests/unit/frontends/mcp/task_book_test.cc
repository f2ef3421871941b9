#include "kforge/frontends/mcp/task_book.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "kforge/common/files.h"
#include "kforge/common/random.h"

namespace kforge::frontends::mcp {
namespace {

class TaskBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kforge-task-book-" + random_hex(8));
    auto book = TaskBook::open(dir_);
    ASSERT_TRUE(book.is_ok()) << book.status().to_string();
    book_ = std::move(book).value();
  }
  void TearDown() override { (void)remove_tree(dir_); }

  TaskRecord working(const std::string& tool = "batch_compare") {
    TaskRecord t;
    t.id = TaskBook::new_id();
    t.tool = tool;
    t.created_ms = t.updated_ms = TaskBook::now_ms();
    t.client = "peer 127.0.0.1";
    t.jobs = Json::array({"a", "b"});
    return t;
  }

  std::filesystem::path dir_;
  std::unique_ptr<TaskBook> book_;
};

TEST_F(TaskBookTest, OnlyWellFormedIdsReachTheFileSystem) {
  EXPECT_TRUE(TaskBook::is_book_id(TaskBook::new_id()));
  EXPECT_NE(TaskBook::new_id(), TaskBook::new_id());
  for (const char* bad :
       {"task-../../kforge.db", "task-", "0123456789abcdef0123456789abcdef",
        "task-0123456789ABCDEF0123456789abcdef", "task-0123456789abcdef0123456789abcde/"}) {
    EXPECT_FALSE(TaskBook::is_book_id(bad)) << bad;
    auto got = book_->get(bad);
    ASSERT_TRUE(got.is_ok());
    EXPECT_FALSE(*got);
  }
}

TEST_F(TaskBookTest, ATaskIsDurableAndStartedOnceAndResumedByANewBook) {
  std::atomic<int> started{0};
  std::atomic<int> cancelled{0};
  auto starter = [&](const TaskRecord&) -> StatusOr<std::function<void()>> {
    ++started;
    return std::function<void()>([&] { ++cancelled; });
  };
  book_->set_starter("batch_compare", starter);
  TaskRecord t = working();
  ASSERT_TRUE(book_->create(t).is_ok());
  EXPECT_EQ(started, 1);
  ASSERT_TRUE(book_->ensure_running(t).is_ok());  // already live here: not started again
  EXPECT_EQ(started, 1);

  // Another process (a restart) reads the same directory and resumes it on demand.
  auto reopened = TaskBook::open(dir_);
  ASSERT_TRUE(reopened.is_ok());
  (*reopened)->set_starter("batch_compare", starter);
  auto got = (*reopened)->get(t.id);
  ASSERT_TRUE(got.is_ok() && *got);
  EXPECT_EQ((*got)->jobs, t.jobs);
  EXPECT_EQ((*got)->status, "working");
  ASSERT_TRUE((*reopened)->ensure_running(**got).is_ok());
  EXPECT_EQ(started, 2);
  ASSERT_TRUE((*reopened)->cancel(t.id).is_ok());
  EXPECT_EQ(cancelled, 1);

  // Terminal: later updates are ignored, cancel is a no-op.
  ASSERT_TRUE((*reopened)->update(t.id, [](TaskRecord& r) { r.status = "cancelled"; }).is_ok());
  ASSERT_TRUE((*reopened)->update(t.id, [](TaskRecord& r) { r.message = "late"; }).is_ok());
  got = (*reopened)->get(t.id);
  EXPECT_EQ((*got)->status, "cancelled");
  EXPECT_NE((*got)->message, "late");
  ASSERT_TRUE((*reopened)->cancel(t.id).is_ok());
  EXPECT_EQ(cancelled, 1);
}

TEST_F(TaskBookTest, ATaskThatCannotRunEndsAsAToolErrorSayingWhy) {
  TaskRecord t = working("no_such_tool");
  Status s = book_->create(t);
  EXPECT_FALSE(s.is_ok());
  auto got = book_->get(t.id);
  ASSERT_TRUE(got.is_ok() && *got);
  EXPECT_EQ((*got)->status, "completed");
  EXPECT_TRUE((*got)->result.value("isError", false));
  EXPECT_NE((*got)->message.find("cannot run tasks of no_such_tool"), std::string::npos)
      << (*got)->message;
}

// Issue #37: a task remembers on whose behalf it runs; records of older servers have none.
TEST_F(TaskBookTest, ATaskKeepsItsSubmitter) {
  TaskRecord t = TaskRecord::fresh("batch_compare", "peer x", "alice", Json::object());
  EXPECT_EQ(t.submitter, "alice");
  auto back = TaskRecord::from_json(t.to_json());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->submitter, "alice");
  EXPECT_EQ(back->caller().principal.name, "alice");
  EXPECT_EQ(back->caller().client, "peer x");
  Json old = t.to_json();
  old.erase("submitter");
  back = TaskRecord::from_json(old);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->submitter, "");
  EXPECT_EQ(back->caller().principal, model::Principal{});
  old["submitter"] = 5;
  EXPECT_FALSE(TaskRecord::from_json(old).is_ok());
}

TEST_F(TaskBookTest, ADamagedFileIsAnErrorNamingIt) {
  const std::string id = TaskBook::new_id();
  ASSERT_TRUE(write_file_atomic(dir_ / (id + ".json"), "{\"id\": 3}").is_ok());
  auto got = book_->get(id);
  ASSERT_FALSE(got.is_ok());
  EXPECT_NE(got.status().message().find(id + ".json"), std::string::npos)
      << got.status().to_string();
}

TEST_F(TaskBookTest, FinishedTasksExpireWhenTheBookIsOpened) {
  TaskRecord old = working();
  old.status = "completed";
  old.updated_ms =
      TaskBook::now_ms() -
      std::chrono::duration_cast<std::chrono::milliseconds>(TaskBook::kKeepFinished).count() - 1000;
  TaskRecord fresh = working();
  fresh.status = "completed";
  TaskRecord running = working();
  running.updated_ms = old.updated_ms;  // working tasks never expire
  for (const TaskRecord& t : {old, fresh, running}) {
    ASSERT_TRUE(write_file_atomic(dir_ / (t.id + ".json"), t.to_json().dump()).is_ok());
  }
  ASSERT_TRUE(TaskBook::open(dir_).is_ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / (old.id + ".json")));
  EXPECT_TRUE(std::filesystem::exists(dir_ / (fresh.id + ".json")));
  EXPECT_TRUE(std::filesystem::exists(dir_ / (running.id + ".json")));
}

}  // namespace
}  // namespace kforge::frontends::mcp
