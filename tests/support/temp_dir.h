// Scratch directories for tests: one per test name and process, under GoogleTest's TempDir(),
// named <TempDir>/tenax-<component>-<name>-<pid> so that one left behind says who made it.
// Thread-safety: stateless; give concurrent tests different names.
//
//   const auto dir = tenax::testing::fresh_dir("core", "atomic");     // empty, exists
//   const auto out = tenax::testing::fresh_path("step", "train");     // absent: the Trainer creates it
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace tenax::testing {

/// <TempDir>/tenax-<component>-<name>-<pid>, removed if an earlier run left it, and not created:
/// for code under test that creates its output directory itself.
inline std::filesystem::path fresh_path(const std::string& component, const std::string& name) {
  auto dir = std::filesystem::path(::testing::TempDir()) /
             ("tenax-" + component + "-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

/// The same directory, created empty.
inline std::filesystem::path fresh_dir(const std::string& component, const std::string& name) {
  auto dir = fresh_path(component, name);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace tenax::testing
