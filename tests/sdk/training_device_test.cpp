// Which device a rank trains on, and GradSync's refusals for parameters it cannot average.
// No GPU here: CUDA devices are counted by the caller (training_device takes the count), and
// the meta device stands in for "not host memory" in GradSync's checks.
#include "training_device.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/thread_ranks.h"
#include "tenax/core/error.h"
#include "tenax/sdk/grad_sync.h"

namespace tenax::sdk {
namespace {

TEST(SdkTrainingDevice, EachLocalRankTakesItsOwnGpuAndTheCpuWithoutOne) {
  EXPECT_EQ(training_device(false, 0, 2, 0), torch::Device(torch::kCPU));
  EXPECT_EQ(training_device(true, 1, 2, 2), torch::Device(torch::kCPU));
  EXPECT_EQ(training_device(false, 0, 2, 2), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(training_device(false, 1, 2, 4), torch::Device(torch::kCUDA, 1));
}

TEST(SdkTrainingDevice, ALocalRankWithoutAGpuOfItsOwnIsAConfigErrorNamingTheFixes) {
  try {
    training_device(false, 2, 4, 2);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("local rank 2 of 4"), std::string::npos) << what;
    EXPECT_NE(what.find("2 visible"), std::string::npos) << what;
    EXPECT_NE(what.find("--nproc-per-node 2"), std::string::npos) << what;
    EXPECT_NE(what.find("use_cpu"), std::string::npos) << what;
  }
}

TEST(SdkTrainingDevice, ABatchAlreadyOnTheDeviceIsNotCopied) {
  Batch batch;
  batch.input_ids = torch::ones({2, 3}, torch::kInt64);
  batch.labels = torch::zeros({2}, torch::kInt64);
  const Batch same = batch_on(batch, torch::Device(torch::kCPU));
  EXPECT_EQ(same.input_ids.data_ptr(), batch.input_ids.data_ptr());
  EXPECT_EQ(same.labels.data_ptr(), batch.labels.data_ptr());
  EXPECT_FALSE(same.pixel_values.defined());
}

TEST(SdkTrainingDevice, GradSyncRefusesParametersOnTwoDevices) {
  testing::run_ranks(1, [&](elastic::Communicator& comm) {
    auto host = torch::zeros({2}).set_requires_grad(true);
    auto elsewhere = torch::empty({2}, torch::TensorOptions().device(torch::kMeta)).set_requires_grad(true);
    EXPECT_THROW(GradSync(comm, {host, elsewhere}), ConfigError);
  });
}

TEST(SdkTrainingDevice, GradSyncRefusesDeviceMemoryOnAHostOnlyCommunicator) {
  testing::run_ranks(2, [&](elastic::Communicator& comm) {
    auto elsewhere = torch::empty({2}, torch::TensorOptions().device(torch::kMeta)).set_requires_grad(true);
    try {
      GradSync sync(comm, {elsewhere});
      ADD_FAILURE() << "expected ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("TENAX_BACKEND=nccl"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace tenax::sdk
