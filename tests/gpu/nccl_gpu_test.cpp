// The NCCL communicator on real devices (label gpu; registered only when configure saw a GPU,
// tests/gpu/CMakeLists.txt). Ranks are threads of this process, one device each, over an
// in-memory store, as tests/support/thread_ranks.h does for Gloo. World size: the visible
// devices, at most 4 (NCCL puts one rank on a device).
#include "tenax/elastic/nccl_communicator.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tenax/core/error.h"
#include "tenax/elastic/in_memory_store.h"

namespace tenax::elastic {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

int world() { return std::min(visible_cuda_devices(), 4); }

void run_nccl_ranks(int n, const std::function<void(Communicator&)>& fn) {
  InMemoryStore store;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        NcclOptions options;
        options.device = r;
        options.timeout = seconds(60);
        auto comm = make_nccl_communicator(store, r, n, options);
        fn(*comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// A device buffer of `count` floats on the current device, freed at scope exit.
struct DeviceFloats {
  explicit DeviceFloats(std::size_t count) : count(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(float)), cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(data); }
  void upload(const std::vector<float>& host) {
    ASSERT_EQ(cudaMemcpy(data, host.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<float> download() const {
    std::vector<float> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  float* data = nullptr;
  std::size_t count;
};

TEST(NcclGpu, AllreduceOnDeviceAndHostBuffers) {
  const int n = world();
  ASSERT_GT(n, 0);
  run_nccl_ranks(n, [&](Communicator& comm) {
    ASSERT_EQ(cudaSetDevice(comm.rank()), cudaSuccess);
    const std::size_t count = 1 << 20;
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>(comm.rank() + 1) + static_cast<float>(i % 7);
    DeviceFloats device(count);
    device.upload(host);
    comm.allreduce(device.data, count, ElementType::kFloat32, ReduceOp::kSum);
    comm.allreduce(host.data(), count, ElementType::kFloat32, ReduceOp::kSum);  // staged
    const std::vector<float> from_device = device.download();
    const float ranks = static_cast<float>(n * (n + 1) / 2);
    for (std::size_t i = 0; i < count; i += 997) {
      const float expected = ranks + static_cast<float>(n) * static_cast<float>(i % 7);
      ASSERT_EQ(from_device[i], expected) << "i=" << i;
      ASSERT_EQ(host[i], expected) << "i=" << i;
    }
  });
}

TEST(NcclGpu, BroadcastAllgatherBarrier) {
  const int n = world();
  ASSERT_GT(n, 0);
  run_nccl_ranks(n, [&](Communicator& comm) {
    ASSERT_EQ(cudaSetDevice(comm.rank()), cudaSuccess);
    std::string text = comm.rank() == n - 1 ? "from the last rank" : std::string(18, '?');
    comm.broadcast(text.data(), text.size(), n - 1);
    EXPECT_EQ(text, "from the last rank");
    const std::vector<std::string> all = allgather_strings(comm, "rank " + std::to_string(comm.rank()));
    ASSERT_EQ(all.size(), static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[static_cast<size_t>(r)], "rank " + std::to_string(r));
    comm.barrier(seconds(30));
  });
}

// A peer that never enters the collective: the survivor's call ends at its timeout with
// TimeoutError (the communicator aborted, not hung), and every later call fails at once.
TEST(NcclTwoGpus, AbsentPeerTimesOutAndAborts) {
  const int n = world();
  ASSERT_GE(n, 2) << "registered only where configure saw 2 GPUs (tests/gpu/CMakeLists.txt)";
  std::atomic<bool> done{false};
  run_nccl_ranks(2, [&](Communicator& comm) {
    if (comm.rank() == 1) {
      while (!done.load()) std::this_thread::sleep_for(milliseconds(10));
      return;
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    float x = 1.0f;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(comm.allreduce(&x, 1, ElementType::kFloat32, ReduceOp::kSum, seconds(2)), TimeoutError);
    EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30));
    EXPECT_THROW(comm.barrier(seconds(2)), PeerLostError);
    done.store(true);
  });
}

// abort() from another thread ends a collective in flight with PeerLostError.
TEST(NcclTwoGpus, AbortFromAnotherThreadEndsAPendingCall) {
  const int n = world();
  ASSERT_GE(n, 2) << "registered only where configure saw 2 GPUs (tests/gpu/CMakeLists.txt)";
  std::atomic<bool> done{false};
  run_nccl_ranks(2, [&](Communicator& comm) {
    if (comm.rank() == 1) {
      while (!done.load()) std::this_thread::sleep_for(milliseconds(10));
      return;
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    std::thread aborter([&] {
      std::this_thread::sleep_for(milliseconds(200));
      comm.abort();
    });
    float x = 1.0f;
    EXPECT_THROW(comm.allreduce(&x, 1, ElementType::kFloat32, ReduceOp::kSum, seconds(120)), PeerLostError);
    aborter.join();
    done.store(true);
  });
}

}  // namespace
}  // namespace tenax::elastic
