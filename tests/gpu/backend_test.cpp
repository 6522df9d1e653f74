// The backend factory (TENAX_BACKEND) and the NCCL communicator's error paths that need no GPU,
// in both build flavours: the CPU one (no NCCL compiled in) and the CUDA one run on a machine or
// in a test environment without a visible device (CUDA_VISIBLE_DEVICES="", set by ctest).
#include "tenax/elastic/backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tenax/core/error.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/kv_service.h"
#include "tenax/elastic/nccl_communicator.h"
#include "tenax/elastic/worker_context.h"

namespace tenax::elastic {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const char* const kVariables[] = {"RANK",         "LOCAL_RANK",       "WORLD_SIZE",          "LOCAL_WORLD_SIZE",
                                  "MASTER_ADDR",  "TENAX_GENERATION", "TENAX_RESTART_COUNT", "TENAX_RDZV_ENDPOINT",
                                  "TENAX_BACKEND"};

class CudaBackend : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* name : kVariables) ::unsetenv(name);
  }
  static void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }
};

// ctest runs this binary with CUDA_VISIBLE_DEVICES="" (tests/gpu/CMakeLists.txt): these tests
// are about a process that sees no device, even on a GPU node.
void require_no_device() { ASSERT_EQ(visible_cuda_devices(), 0) << "run with CUDA_VISIBLE_DEVICES= (ctest sets it)"; }

std::string config_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

TEST_F(CudaBackend, ParsesTheFourNamesInAnyCase) {
  EXPECT_EQ(parse_backend("auto"), Backend::kAuto);
  EXPECT_EQ(parse_backend("Gloo"), Backend::kGloo);
  EXPECT_EQ(parse_backend("TCP"), Backend::kTcp);
  EXPECT_EQ(parse_backend("NCCL"), Backend::kNccl);
  EXPECT_EQ(parse_backend("mpi"), Backend::kMpi);
  const std::string message = config_error_of([] { parse_backend("nvlink"); });
  EXPECT_NE(message.find("TENAX_BACKEND='nvlink'"), std::string::npos) << message;
  EXPECT_NE(message.find("auto, gloo, tcp, nccl or mpi"), std::string::npos) << message;
  EXPECT_STREQ(backend_name(Backend::kNccl), "nccl");
}

TEST_F(CudaBackend, EnvironmentDefaultsToAuto) {
  EXPECT_EQ(backend_from_env(), Backend::kAuto);
  set("TENAX_BACKEND", "");
  EXPECT_EQ(backend_from_env(), Backend::kAuto);
  set("TENAX_BACKEND", "nccl");
  EXPECT_EQ(backend_from_env(), Backend::kNccl);
  set("TENAX_BACKEND", "infiniband");
  EXPECT_THROW(backend_from_env(), ConfigError);
}

TEST_F(CudaBackend, AutoIsNcclOnlyWithNcclAndADevice) {
  EXPECT_EQ(resolve_backend(Backend::kAuto, true, 4, false), Backend::kNccl);
  EXPECT_EQ(resolve_backend(Backend::kAuto, true, 0, true), Backend::kGloo);
  EXPECT_EQ(resolve_backend(Backend::kAuto, false, 4, true), Backend::kGloo);
  // The build on PyPI's torch has no Gloo: CPU ranks get Tenax's TCP ring.
  EXPECT_EQ(resolve_backend(Backend::kAuto, true, 0, false), Backend::kTcp);
  EXPECT_EQ(resolve_backend(Backend::kAuto, false, 0, false), Backend::kTcp);
  EXPECT_EQ(resolve_backend(Backend::kGloo, true, 4, true), Backend::kGloo);
  EXPECT_EQ(resolve_backend(Backend::kTcp, true, 4, true), Backend::kTcp);
  EXPECT_EQ(resolve_backend(Backend::kNccl, false, 0, true), Backend::kNccl)
      << "an explicit choice is kept (and fails)";
}

TEST_F(CudaBackend, NcclWithoutADeviceNamesTheFix) {
  require_no_device();
  InMemoryStore store;
  NcclOptions options;
  options.timeout = seconds(30);
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 of 2 would wait for rank 0's unique id: the device check must come first.
  const std::string message = config_error_of([&] { make_nccl_communicator(store, 1, 2, options); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10)) << "must fail before waiting on the store";
  if (nccl_built()) {
    EXPECT_NE(message.find("no CUDA device is visible"), std::string::npos) << message;
    EXPECT_NE(message.find("CUDA_VISIBLE_DEVICES="), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("make build-cuda"), std::string::npos) << message;
  }
  EXPECT_NE(message.find("TENAX_BACKEND=gloo"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1 of 2"), std::string::npos) << message;
  EXPECT_THROW(store.get("nccl/unique_id", milliseconds(1)), TimeoutError) << "nothing published";
}

TEST_F(CudaBackend, FactoryRefusesMpiFromAStore) {
  InMemoryStore store;
  const std::string message =
      config_error_of([&] { make_communicator(Backend::kMpi, store, 0, 2, CommunicatorOptions{}); });
  EXPECT_NE(message.find("TENAX_BACKEND=mpi"), std::string::npos) << message;
  EXPECT_NE(message.find("tenax_init_mpi"), std::string::npos) << message;
}

TEST_F(CudaBackend, AutoWithoutADeviceIsGlooOrTheTcpRing) {
  require_no_device();
  InMemoryStore store;
  CommunicatorOptions options;
  options.timeout = seconds(30);
  // World size 1 needs no network in either flavour.
  auto one = make_communicator(Backend::kAuto, store, 0, 1, options);
  double x = 1.5;
  one->allreduce(&x, 1, ElementType::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(x, 1.5);
  // A CPU world of 2 runs in both flavours: on Gloo in the default build, on Tenax's TCP ring in
  // the one on PyPI's torch (no Gloo there).
  std::vector<double> sums(2, 0.0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto comm = make_communicator(Backend::kAuto, store, r, 2, options);
      double v = 1.0 + r;
      comm->allreduce(&v, 1, ElementType::kFloat64, ReduceOp::kSum);
      sums[static_cast<std::size_t>(r)] = v;
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(sums, (std::vector<double>{3.0, 3.0}));
#if !defined(TENAX_TEST_HAS_GLOO)
  // Gloo asked for by name where the build has none: refused with the way out.
  InMemoryStore other;
  const std::string message = config_error_of([&] { make_communicator(Backend::kGloo, other, 0, 2, options); });
  EXPECT_NE(message.find("no Gloo"), std::string::npos) << message;
  EXPECT_NE(message.find("TENAX_BACKEND=tcp"), std::string::npos) << message;
#endif
}

// The whole path a worker of `TENAX_BACKEND=nccl tenax run` takes, through a real rendezvous
// store: WorkerContext::from_env fails at once with the fix, not at a collective's timeout.
TEST_F(CudaBackend, WorkerContextUnderTenaxRunReportsNoDevice) {
  require_no_device();
  KvService service;
  const std::string endpoint = service.start("tcp://127.0.0.1:0");
  set("RANK", "0");
  set("LOCAL_RANK", "0");
  set("WORLD_SIZE", "2");
  set("LOCAL_WORLD_SIZE", "2");
  set("TENAX_GENERATION", "0");
  set("TENAX_RESTART_COUNT", "0");
  set("TENAX_RDZV_ENDPOINT", endpoint);
  set("MASTER_ADDR", "127.0.0.1");
  set("TENAX_BACKEND", "nccl");
  const std::string message = config_error_of([] { WorkerContext::from_env(seconds(20)); });
  EXPECT_NE(message.find("TENAX_BACKEND=nccl"), std::string::npos) << message;
  EXPECT_NE(message.find("TENAX_BACKEND=gloo"), std::string::npos) << message;

  set("TENAX_BACKEND", "mpi");
  const std::string mpi = config_error_of([] { WorkerContext::from_env(seconds(20)); });
  EXPECT_NE(mpi.find("under `tenax run` use TENAX_BACKEND=gloo, tcp or nccl"), std::string::npos) << mpi;
}

#if defined(TENAX_TEST_LIBTORCH_CUDA)
// One NCCL per process, the torch wheel's: libtorch_cuda.so and Tenax's communicator must not
// load two (a toolkit or system libnccl.so.2 found first on the RUNPATH would be shared by both
// under the same soname, whatever its version).
TEST_F(CudaBackend, TheProcessMapsOnlyTheWheelsNccl) {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> nccl;
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash != std::string::npos && line.find("libnccl.so") != std::string::npos) nccl.insert(line.substr(slash));
  }
  ASSERT_EQ(nccl.size(), 1u) << "libnccl mapped from " << nccl.size() << " files";
  const std::string wheel = std::filesystem::canonical(TENAX_TEST_LIBTORCH_CUDA "/nvidia/nccl/lib/libnccl.so.2");
  EXPECT_EQ(std::filesystem::canonical(*nccl.begin()).string(), wheel);
}
#endif

}  // namespace
}  // namespace tenax::elastic
