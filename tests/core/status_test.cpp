#include "tenax/core/status.h"

#include <gtest/gtest.h>

namespace tenax {
namespace {

TEST(CoreStatus, OkAndErrorCarryCodeAndMessage) {
  Status ok = Status::ok();
  EXPECT_TRUE(ok.is_ok());
  EXPECT_EQ(ok.to_string(), "OK");
  Status bad(StatusCode::kDataLoss, "shard-1: checksum mismatch");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.to_string(), "DATA_LOSS: shard-1: checksum mismatch");
}

TEST(CoreStatus, StatusOrValueAndErrorAccess) {
  StatusOr<int> v(7);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v.value(), 7);
  StatusOr<int> e(Status(StatusCode::kNotFound, "no such key"));
  EXPECT_FALSE(e.is_ok());
  EXPECT_THROW((void)e.value(), Error);
  StatusOr<int> from_ok{Status::ok()};  // an OK status carries no value: that is a bug
  EXPECT_EQ(from_ok.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tenax
