// Fenced numbering of a rendezvous host's generations (launcher/src/generation_claim.h).
#include "generation_claim.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

namespace fs = std::filesystem;

class LauncherGenerationClaim : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tenax-claim-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  bool claim_lease(std::int64_t term, const std::string& holder) const {
    elastic::LeaseRecord r;
    r.term = term;
    r.holder = holder;
    r.endpoint = "tcp://" + holder + ":1";
    return elastic::LeaseFile(dir_).claim(r);
  }

  fs::path dir_;
};

TEST_F(LauncherGenerationClaim, TheLeaseHolderNumbersAboveTheFenceAndRecordsIt) {
  const elastic::GenerationFence fence(dir_);
  ASSERT_TRUE(fence.advance(6).is_ok());  // an earlier host formed generation 6
  ASSERT_TRUE(claim_lease(1, "node-b"));
  auto claim = fenced_generation_claim(elastic::LeaseFile(dir_), fence, 1, "node-b");
  const auto first = claim(3);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(first.value(), 7);
  EXPECT_EQ(fence.current().value(), 7);
  EXPECT_EQ(claim(9).value(), 9);
  EXPECT_EQ(fence.current().value(), 9);
}

// A host whose lease was taken over must not move the fence: that would fence off the
// generation of the host that replaced it.
TEST_F(LauncherGenerationClaim, AHostThatLostItsLeaseFormsNothingAndLeavesTheFence) {
  const elastic::GenerationFence fence(dir_);
  ASSERT_TRUE(claim_lease(0, "node-a"));
  auto stale = fenced_generation_claim(elastic::LeaseFile(dir_), fence, 0, "node-a");
  ASSERT_TRUE(stale(0).is_ok());
  ASSERT_TRUE(claim_lease(1, "node-b"));
  const auto refused = stale(1);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kAborted);
  EXPECT_NE(refused.status().message().find("node 'node-b' holds term 1"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(fence.current().value(), 0);
}

TEST_F(LauncherGenerationClaim, TheSingleNodeAgentGoesOnAboveAnEarlierRun) {
  const elastic::GenerationFence fence(dir_);
  EXPECT_EQ(advance_fence_from(fence, 0), 0);
  EXPECT_EQ(advance_fence_from(fence, 1), 1);
  EXPECT_EQ(advance_fence_from(fence, 0), 2) << "a rerun starting at 0 must go on above 1";
  EXPECT_THROW(advance_fence_from(elastic::GenerationFence(dir_ / "missing"), 0), Error);
}

}  // namespace
}  // namespace tenax::launcher
