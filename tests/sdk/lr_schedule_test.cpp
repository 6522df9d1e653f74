#include "tenax/sdk/lr_schedule.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

TEST(SdkLrSchedule, LinearWithWarmupMatchesTransformersFormula) {
  LrSchedule s(LrSchedulerType::kLinear, 10, 110);
  EXPECT_DOUBLE_EQ(s.multiplier(0), 0.0);
  EXPECT_DOUBLE_EQ(s.multiplier(5), 0.5);
  EXPECT_DOUBLE_EQ(s.multiplier(10), 1.0);
  EXPECT_DOUBLE_EQ(s.multiplier(60), 0.5);
  EXPECT_DOUBLE_EQ(s.multiplier(110), 0.0);
  EXPECT_DOUBLE_EQ(s.multiplier(200), 0.0);
}

TEST(SdkLrSchedule, CosineAndConstants) {
  LrSchedule c(LrSchedulerType::kCosine, 0, 100);
  EXPECT_DOUBLE_EQ(c.multiplier(0), 1.0);
  EXPECT_NEAR(c.multiplier(50), 0.5, 1e-12);
  EXPECT_NEAR(c.multiplier(100), 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(LrSchedule(LrSchedulerType::kConstant, 10, 100).multiplier(3), 1.0);
  EXPECT_DOUBLE_EQ(LrSchedule(LrSchedulerType::kConstantWithWarmup, 10, 100).multiplier(3), 0.3);
}

TEST(SdkLrSchedule, UnknownNameIsAConfigErrorNamingTheField) {
  try {
    parse_lr_scheduler_type("triangular");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("lr_scheduler_type"), std::string::npos);
  }
}

}  // namespace
}  // namespace tenax::sdk
