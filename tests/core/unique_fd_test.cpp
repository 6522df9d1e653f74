#include "tenax/core/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include <gtest/gtest.h>

namespace tenax {
namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

int open_null() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

TEST(CoreUniqueFd, ClosesWhatItOwnsWhenDestroyed) {
  int raw = -1;
  {
    UniqueFd fd(open_null());
    ASSERT_TRUE(fd.valid());
    raw = fd.get();
    EXPECT_TRUE(is_open(raw));
  }
  EXPECT_FALSE(is_open(raw));
}

TEST(CoreUniqueFd, NegativeHoldsNothingAndClosesCleanly) {
  UniqueFd failed(-1);
  EXPECT_FALSE(failed);
  EXPECT_EQ(failed.get(), -1);
  EXPECT_FALSE(failed.close());
  UniqueFd empty;
  EXPECT_FALSE(empty.valid());
}

TEST(CoreUniqueFd, ReleaseGivesUpOwnershipAndMoveTransfersIt) {
  UniqueFd a(open_null());
  const int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  const int released = c.release();
  EXPECT_EQ(released, raw);
  EXPECT_FALSE(c.valid());
  EXPECT_TRUE(is_open(raw));
  UniqueFd again(released);  // owned again, so that the test closes it
}

TEST(CoreUniqueFd, ResetAndMoveAssignmentCloseTheOldDescriptor) {
  UniqueFd fd(open_null());
  const int first = fd.get();
  UniqueFd other(open_null());
  const int second = other.get();
  fd = std::move(other);
  EXPECT_FALSE(is_open(first));
  EXPECT_EQ(fd.get(), second);
  fd.reset();
  EXPECT_FALSE(is_open(second));
  EXPECT_FALSE(fd.valid());
}

TEST(CoreUniqueFd, CloseReportsFailureAndHoldsNothingAfterwards) {
  UniqueFd fd(open_null());
  const int raw = fd.get();
  EXPECT_FALSE(fd.close());
  EXPECT_FALSE(fd.valid());
  // A number that is no longer open (nothing else in this test opens descriptors meanwhile).
  UniqueFd stale(raw);
  const std::error_code ec = stale.close();
  EXPECT_EQ(ec, std::errc::bad_file_descriptor);
  EXPECT_FALSE(stale.valid());
}

TEST(CoreUniqueFd, DestructorLeavesErrnoAlone) {
  UniqueFd fd(open_null());
  const int raw = fd.get();
  ASSERT_FALSE(fd.close());
  {
    UniqueFd stale(raw);  // its close fails with EBADF
    errno = ENOSPC;
  }
  EXPECT_EQ(errno, ENOSPC);
}

}  // namespace
}  // namespace tenax
