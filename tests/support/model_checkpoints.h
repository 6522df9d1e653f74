// Comparing the model of two checkpoints, for the tests that prove a run with failures ends
// exactly where the uninterrupted run does.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>

#include "tenax/storage/checkpoint_reader.h"

namespace tenax::testing {

/// Every "model/" tensor of checkpoint `a` equals, byte for byte and in shape, the one of
/// checkpoint `b`; `expected_tensors` of them (the synthetic examples: Linear, LayerNorm,
/// Linear = 6) are compared, so that an empty model cannot pass.
inline void expect_bit_identical_models(const std::filesystem::path& a, const std::filesystem::path& b,
                                        int expected_tensors = 6) {
  auto ra = tenax::storage::CheckpointReader::open(a);
  auto rb = tenax::storage::CheckpointReader::open(b);
  ASSERT_TRUE(ra.is_ok()) << a << ": " << ra.status().to_string();
  ASSERT_TRUE(rb.is_ok()) << b << ": " << rb.status().to_string();
  int compared = 0;
  for (const auto& [name, entry] : ra.value().manifest().tensors) {
    if (name.rfind("model/", 0) != 0) continue;
    auto ta = ra.value().read(name);
    auto tb = rb.value().read(name);
    ASSERT_TRUE(ta.is_ok()) << name << ": " << ta.status().to_string();
    ASSERT_TRUE(tb.is_ok()) << name << ": " << tb.status().to_string();
    EXPECT_EQ(ta.value().shape, tb.value().shape) << name;
    EXPECT_TRUE(ta.value().bytes == tb.value().bytes) << name << " differs";
    ++compared;
  }
  EXPECT_EQ(compared, expected_tensors) << "model tensors compared";
}

}  // namespace tenax::testing
