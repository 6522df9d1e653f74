// tenax/tenax.h, the umbrella of the whole C++ API (the SDK, errors, logging), compiles on its
// own: this unit includes nothing of Tenax but it.
#include "tenax/tenax.h"

#include <type_traits>

#include <gtest/gtest.h>

namespace {

TEST(SdkPublicHeaders, TenaxUmbrellaAloneDeclaresTheSdkAndTheErrorTree) {
  static_assert(std::is_base_of_v<tenax::Error, tenax::ConfigError>);
  static_assert(std::is_class_v<tenax::sdk::Trainer>);
  EXPECT_NE(tenax::logger("tenax.test"), nullptr);
}

}  // namespace
