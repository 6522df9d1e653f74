#include "tenax/core/env.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "tenax/core/error.h"

namespace tenax {
namespace {

TEST(CoreEnv, ParsesIntegersAndNamesTheVariableOnError) {
  ::setenv("TENAX_TEST_INT", "42", 1);
  EXPECT_EQ(env::require_int("TENAX_TEST_INT"), 42);
  ::setenv("TENAX_TEST_INT", "4x2", 1);
  try {
    env::require_int("TENAX_TEST_INT");
    FAIL() << "no error for a non-integer";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("TENAX_TEST_INT='4x2'"), std::string::npos) << e.what();
  }
  ::unsetenv("TENAX_TEST_INT");
  EXPECT_EQ(env::get_int("TENAX_TEST_INT", -3), -3);
  try {
    env::require("TENAX_TEST_INT");
    FAIL() << "no error for an unset variable";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("TENAX_TEST_INT"), std::string::npos);
  }
}

}  // namespace
}  // namespace tenax
