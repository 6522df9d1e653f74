// tenax::sdk::LrSchedule against transformers.get_scheduler (tests/sdk/goldens/
// lr_schedule_goldens.json, written by tools/goldens/schedule_goldens.py), plus its refusals.
#include "tenax/sdk/lr_schedule.h"

#include <cmath>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

nlohmann::json goldens() {
  const std::string path = std::string(TENAX_SDK_GOLDENS_DIR) + "/lr_schedule_goldens.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

LrScheduleOptions options_of(const nlohmann::json& c) {
  LrScheduleOptions o(parse_lr_scheduler_type(c.at("type").get<std::string>()),
                      c.at("warmup_steps").get<std::int64_t>(), c.at("total_steps").get<std::int64_t>());
  o.base_lr(c.at("base_lr").get<double>());
  const nlohmann::json& kwargs = c.at("kwargs");
  if (kwargs.contains("num_cycles")) o.num_cycles(kwargs["num_cycles"].get<double>());
  if (kwargs.contains("lr_end")) o.lr_end(kwargs["lr_end"].get<double>());
  if (kwargs.contains("power")) o.power(kwargs["power"].get<double>());
  return o;
}

std::string describe(const nlohmann::json& c) {
  return c.at("type").get<std::string>() + " warmup " + std::to_string(c.at("warmup_steps").get<int>()) + " total " +
         std::to_string(c.at("total_steps").get<int>()) + " base_lr " + std::to_string(c.at("base_lr").get<double>()) +
         " kwargs " + c.at("kwargs").dump();
}

TEST(SdkLrSchedule, EveryStepOfEveryCaseEqualsTransformers) {
  const nlohmann::json g = goldens();
  std::set<std::string> types;
  bool warmup_zero = false, warmup_positive = false, restarts_two = false, polynomial_kwargs = false;
  int compared = 0;
  for (const nlohmann::json& c : g.at("cases")) {
    const LrSchedule schedule(options_of(c));
    const double base_lr = c.at("base_lr").get<double>();
    const auto& lrs = c.at("lrs");
    ASSERT_GT(lrs.size(), c.at("total_steps").get<std::size_t>()) << "the goldens cover steps past the end";
    for (std::size_t step = 0; step < lrs.size(); ++step) {
      const double expected = lrs[step].get<double>();
      EXPECT_NEAR(schedule.lr(static_cast<std::int64_t>(step)), expected, 1e-6 * base_lr)
          << describe(c) << " at step " << step;
      EXPECT_NEAR(base_lr * schedule.multiplier(static_cast<std::int64_t>(step)), expected, 1e-6 * base_lr);
      ++compared;
    }
    types.insert(c.at("type").get<std::string>());
    warmup_zero |= c.at("warmup_steps") == 0;
    warmup_positive |= c.at("warmup_steps").get<int>() > 0;
    restarts_two |= c.at("type") == "cosine_with_restarts" && c.at("kwargs").value("num_cycles", 0.0) == 2.0;
    polynomial_kwargs |= c.at("type") == "polynomial" && c.at("kwargs").value("power", 1.0) == 2.0 &&
                         c.at("kwargs").value("lr_end", 0.0) == 1e-5;
  }
  // A shrunken golden file must not pass quietly.
  EXPECT_EQ(types.size(), 6u);
  EXPECT_TRUE(warmup_zero && warmup_positive && restarts_two && polynomial_kwargs);
  EXPECT_GT(compared, 500);
}

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

TEST(SdkLrSchedule, NegativeNumCyclesMeansTransformersDefaultPerType) {
  const LrSchedule cosine_default(LrScheduleOptions(LrSchedulerType::kCosine, 2, 40));
  const LrSchedule cosine_half(LrScheduleOptions(LrSchedulerType::kCosine, 2, 40).num_cycles(0.5));
  const LrSchedule restarts_default(LrScheduleOptions(LrSchedulerType::kCosineWithRestarts, 2, 40));
  const LrSchedule restarts_one(LrScheduleOptions(LrSchedulerType::kCosineWithRestarts, 2, 40).num_cycles(1));
  for (std::int64_t step = 0; step < 45; ++step) {
    EXPECT_EQ(cosine_default.multiplier(step), cosine_half.multiplier(step)) << step;
    EXPECT_EQ(restarts_default.multiplier(step), restarts_one.multiplier(step)) << step;
  }
  // Zero cycles is a value, not "the default": the cosine then stays at the top.
  EXPECT_EQ(LrSchedule(LrScheduleOptions(LrSchedulerType::kCosine, 0, 10).num_cycles(0)).multiplier(7), 1.0);
}

TEST(SdkLrSchedule, PolynomialEndsAtTheAbsoluteEndRate) {
  const LrSchedule s(LrScheduleOptions(LrSchedulerType::kPolynomial, 0, 10).base_lr(1e-3).lr_end(1e-5).power(2.0));
  EXPECT_DOUBLE_EQ(s.lr(0), 1e-3);
  EXPECT_NEAR(s.lr(10), 1e-5, 1e-18);
  EXPECT_NEAR(s.lr(50), 1e-5, 1e-18);
  EXPECT_NEAR(s.lr(5), (1e-3 - 1e-5) * 0.25 + 1e-5, 1e-15);
}

std::string config_error_of(const LrScheduleOptions& options) {
  try {
    LrSchedule schedule(options);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SdkLrSchedule, InvalidOptionsAreConfigErrorsNamingTheOption) {
  using T = LrSchedulerType;
  EXPECT_NE(config_error_of(LrScheduleOptions(T::kLinear, -1, 10)).find("warmup_steps"), std::string::npos);
  EXPECT_NE(config_error_of(LrScheduleOptions(T::kLinear, 0, 0)).find("training steps"), std::string::npos);
  // polynomial's lr_end is absolute, so it must be below the base rate (transformers' ValueError).
  const std::string end = config_error_of(LrScheduleOptions(T::kPolynomial, 0, 10).base_lr(1e-3).lr_end(1e-3));
  EXPECT_NE(end.find("lr_scheduler_kwargs.lr_end"), std::string::npos) << end;
  EXPECT_NE(end.find("polynomial"), std::string::npos) << end;
  EXPECT_NE(config_error_of(LrScheduleOptions(T::kPolynomial, 0, 10).base_lr(1e-3).lr_end(1e-5).power(0))
                .find("lr_scheduler_kwargs.power"),
            std::string::npos);
  EXPECT_NE(config_error_of(LrScheduleOptions(T::kCosine, 0, 10).num_cycles(NAN)).find("num_cycles"),
            std::string::npos);
  // Options other types do not use are not checked (transformers ignores them too).
  EXPECT_EQ(config_error_of(LrScheduleOptions(T::kLinear, 0, 10).base_lr(1e-3).lr_end(1.0)), "");
}

TEST(SdkLrSchedule, OptionsAreComparable) {
  const auto a = LrScheduleOptions(LrSchedulerType::kPolynomial, 3, 30).base_lr(1e-3).lr_end(1e-5).power(2);
  auto b = a;
  EXPECT_EQ(a, b);
  b.power(3);
  EXPECT_NE(a, b);
  EXPECT_EQ(LrSchedule(a).options(), a);
}

TEST(SdkLrSchedule, UnknownNameIsAConfigErrorNamingTheFieldAndTheChoices) {
  try {
    parse_lr_scheduler_type("triangular");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "TrainingArguments.lr_scheduler_type: 'triangular' is not one of: linear, cosine, "
                 "cosine_with_restarts, polynomial, constant, constant_with_warmup");
  }
  for (const char* name :
       {"linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup"}) {
    EXPECT_STREQ(lr_scheduler_type_name(parse_lr_scheduler_type(name)), name);
  }
}

}  // namespace
}  // namespace tenax::sdk
