// Shared pieces of the callback tests: a fresh directory per test and the state of a run.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk::testing {

/// The whole file, as bytes.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A directory of its own for each test, removed afterwards unless TENAX_KEEP_TEST_FILES is set
/// (to look at what a test wrote, e.g. read its event file with TensorBoard).
class CallbackDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) / ("tenax-callbacks-" + std::string(info->test_suite_name()) +
                                                          "-" + info->name() + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    if (std::getenv("TENAX_KEEP_TEST_FILES") == nullptr) std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
};

/// A TrainerState as the Trainer has it at `step` of a `max_steps` run on rank `rank`.
inline TrainerState state_at(std::int64_t step, std::int64_t max_steps = 10, int rank = 0) {
  TrainerState s;
  s.global_step = step;
  s.max_steps = max_steps;
  s.epoch = static_cast<double>(step) / static_cast<double>(max_steps);
  s.train_batch_size = 4;
  s.rank = rank;
  s.world_size = rank + 1;
  return s;
}

}  // namespace tenax::sdk::testing
