// model/json_reader.h: typed field access whose every error names the field.
#include "kforge/model/json_reader.h"

#include <gtest/gtest.h>

#include <limits>

#include "kforge/model/kernel_spec.h"

namespace kforge::model::reader {
namespace {

const JsonPath kAt = JsonPath("job").key("timing");

void expect_field_error(const Status& s, const std::string& field, const std::string& fragment) {
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_EQ(s.field_path(), field) << s.to_string();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.to_string();
}

TEST(JsonReaderTest, AbsentAndNullAreNotGiven) {
  const Json obj = {{"a", nullptr}};
  EXPECT_EQ(member(obj, "a"), nullptr);
  EXPECT_EQ(member(obj, "b"), nullptr);
  EXPECT_EQ(*read_string(obj, "a", kAt, false), "");
  EXPECT_FALSE(read_number(obj, "a", kAt, 0, 1)->has_value());
  EXPECT_FALSE(read_int(obj, "b", kAt, 0, 1)->has_value());
  EXPECT_FALSE(read_bool(obj, "b", kAt)->has_value());
  expect_field_error(read_string(obj, "a", kAt, true).status(), "job.timing.a", "is required");
}

TEST(JsonReaderTest, WrongTypesNameTheFieldAndTheType) {
  const Json obj = {{"s", 1}, {"n", "1"}, {"b", 1}, {"i", 1.5}};
  expect_field_error(read_string(obj, "s", kAt, true).status(), "job.timing.s",
                     "must be a string, got integer");
  expect_field_error(read_number(obj, "n", kAt, 0, 2).status(), "job.timing.n",
                     "must be a number, got string");
  expect_field_error(read_bool(obj, "b", kAt).status(), "job.timing.b",
                     "must be a boolean, got integer");
  expect_field_error(read_int(obj, "i", kAt, 0, 2).status(), "job.timing.i",
                     "must be an integer, got number");
  expect_field_error(expect_object(Json::array(), kAt), "job.timing",
                     "must be an object, got array");
}

TEST(JsonReaderTest, NumbersAreBoundedAndFinite) {
  const Json obj = {{"x", 5.0}, {"big", 1e301}, {"neg", -1}};
  EXPECT_EQ(read_int(obj, "x", kAt, 0, 10)->value(), 5);  // 5.0 reads as 5
  expect_field_error(read_int(obj, "x", kAt, 0, 4).status(), "job.timing.x",
                     "must be between 0 and 4, got 5");
  expect_field_error(read_number(obj, "big", kAt, 0, 1e300).status(), "job.timing.big",
                     "must be between");
  expect_field_error(read_uint64(obj, "neg", kAt).status(), "job.timing.neg", "got -1");
  const Json max = {{"u", std::numeric_limits<uint64_t>::max()}};
  EXPECT_EQ(read_uint64(max, "u", kAt)->value(), std::numeric_limits<uint64_t>::max());
  expect_field_error(read_int(max, "u", kAt, 0, 10).status(), "job.timing.u", "at most 10");
  EXPECT_FALSE(fits_int64(Json(uint64_t{1} << 63)));
  EXPECT_TRUE(fits_int64(Json(int64_t{-1})));
  EXPECT_FALSE(fits_int64(Json(1.0)));
}

TEST(JsonReaderTest, ShapesAreBoundedListsOfNonNegativeIntegers) {
  EXPECT_EQ(*read_shape(Json{{"shape", {2, 0, 3}}}, "shape", kAt, 8),
            (std::vector<int64_t>{2, 0, 3}));
  expect_field_error(read_shape(Json{{"shape", {1, -1}}}, "shape", kAt, 8).status(),
                     "job.timing.shape", "non-negative integers");
  expect_field_error(read_shape(Json{{"shape", {1, 1, 1}}}, "shape", kAt, 2).status(),
                     "job.timing.shape", "rank 3 exceeds the limit of 2");
  expect_field_error(read_shape(Json{{"shape", {uint64_t{1} << 63}}}, "shape", kAt, 8).status(),
                     "job.timing.shape", "non-negative integers");
  expect_field_error(read_shape(Json::object(), "shape", kAt, 8).status(), "job.timing.shape",
                     "is required");
}

TEST(JsonReaderTest, EnumsListTheAllowedValues) {
  EXPECT_EQ(*read_enum<DType>(Json::object(), "dtype", kAt, DType::kInt8, dtype_from, "..."),
            DType::kInt8);
  EXPECT_EQ(
      *read_enum<DType>(Json{{"dtype", "bfloat16"}}, "dtype", kAt, DType::kInt8, dtype_from, "..."),
      DType::kBFloat16);
  expect_field_error(
      read_enum<DType>(Json{{"dtype", "fp8"}}, "dtype", kAt, DType::kInt8, dtype_from, "a, b")
          .status(),
      "job.timing.dtype", "unknown value 'fp8' (expected one of: a, b)");
}

TEST(JsonReaderTest, RequiredMembersArePresentAndNotNull) {
  const Json obj = {{"a", 1}, {"b", nullptr}};
  EXPECT_TRUE(require_members(obj, kAt, {"a"}).is_ok());
  expect_field_error(require_members(obj, kAt, {"a", "b"}), "job.timing.b", "is required");
  expect_field_error(require_members(obj, kAt, {"a", "c", "d"}), "job.timing.c", "is required");
  expect_field_error(require_members(obj, kAt, {"c"}, "resolved by the server"), "job.timing.c",
                     "is required (resolved by the server)");
}

}  // namespace
}  // namespace kforge::model::reader
