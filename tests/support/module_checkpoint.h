// Comparing a model in memory with the "model/" tensors of a checkpoint, for the tests that prove
// the model a job saved (save_pretrained, loaded back) is the one its final checkpoint holds.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>

#include "tenax/storage/checkpoint_reader.h"

namespace tenax::testing {

/// Every named parameter of `model` equals, byte for byte, the tensor "model/<name>" of the
/// checkpoint in `checkpoint_dir`; returns how many were compared (all of the model's, or a
/// failure says which one was missing or differed).
inline int expect_parameters_equal_checkpoint(const torch::nn::Module& model,
                                              const std::filesystem::path& checkpoint_dir) {
  auto reader = tenax::storage::CheckpointReader::open(checkpoint_dir);
  EXPECT_TRUE(reader.is_ok()) << checkpoint_dir << ": " << reader.status().to_string();
  if (!reader.is_ok()) return 0;
  int compared = 0;
  for (const auto& item : model.named_parameters()) {
    auto saved = reader.value().read("model/" + item.key());
    EXPECT_TRUE(saved.is_ok()) << item.key() << ": " << saved.status().to_string();
    if (!saved.is_ok()) continue;
    const torch::Tensor p = item.value().contiguous();
    EXPECT_EQ(saved.value().bytes.size(), static_cast<std::size_t>(p.nbytes())) << item.key();
    if (saved.value().bytes.size() != static_cast<std::size_t>(p.nbytes())) continue;
    EXPECT_EQ(std::memcmp(saved.value().bytes.data(), p.data_ptr(), p.nbytes()), 0) << item.key() << " differs";
    ++compared;
  }
  return compared;
}

}  // namespace tenax::testing
