// Test helpers for the argument parser's errors: what a ConfigError says.
#pragma once

#include <string>

#include "tenax/core/error.h"

namespace tenax::sdk::test_support {

/// The ConfigError message of `f()`, or "" when it does not throw one.
template <typename F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace tenax::sdk::test_support
