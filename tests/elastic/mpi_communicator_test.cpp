// The MPI communicator under a real `mpirun -n 2` (ctest starts it; label mpi): every collective
// for every element type, the errors, and gradient averaging (tenax::sdk::GradSync) over MPI
// equal bit for bit to the same averaging over Gloo, whose world the same processes form through
// the direct launch (WorkerContext::from_launch, rendezvous files in TENAX_RDZV_DIR).
// Both ranks run every test in the same order (gtest's), so the collectives match.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/elastic/direct_launch.h"
#include "tenax/elastic/mpi_communicator.h"
#include "tenax/sdk/grad_sync.h"

namespace tenax::elastic {
namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

template <typename T>
void expect_allreduce(Communicator& comm, ElementType type) {
  const int r = comm.rank();
  const int n = comm.size();
  // Values that depend on the rank: sum = 3*n(n-1)/2 + 2n for element 0, etc.
  std::vector<T> sum = {static_cast<T>(3 * r + 2), static_cast<T>(7 - r), static_cast<T>(r % 2)};
  std::vector<T> max = sum;
  std::vector<T> min = sum;
  comm.allreduce(sum.data(), sum.size(), type, ReduceOp::kSum);
  comm.allreduce(max.data(), max.size(), type, ReduceOp::kMax);
  comm.allreduce(min.data(), min.size(), type, ReduceOp::kMin);
  std::vector<T> want_sum(3, T(0));
  std::vector<T> want_max = {static_cast<T>(2), static_cast<T>(7 - (n - 1)), T(0)};
  std::vector<T> want_min = {static_cast<T>(2), static_cast<T>(7 - (n - 1)), T(0)};
  for (int q = 0; q < n; ++q) {
    const std::vector<T> v = {static_cast<T>(3 * q + 2), static_cast<T>(7 - q), static_cast<T>(q % 2)};
    for (std::size_t i = 0; i < 3; ++i) {
      want_sum[i] = static_cast<T>(want_sum[i] + v[i]);
      want_max[i] = std::max(want_max[i], v[i]);
      want_min[i] = std::min(want_min[i], v[i]);
    }
  }
  EXPECT_EQ(sum, want_sum);
  EXPECT_EQ(max, want_max);
  EXPECT_EQ(min, want_min);
}

TEST(MpiCommunicator, RanksAreThoseOfTheCallersCommunicator) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  EXPECT_EQ(comm->rank(), world_rank());
  EXPECT_EQ(comm->size(), world_size());
  ASSERT_GE(comm->size(), 2) << "run under mpirun -n 2 (ctest does)";
}

TEST(MpiCommunicator, AllreduceEveryTypeAndOp) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  expect_allreduce<float>(*comm, ElementType::kFloat32);
  expect_allreduce<double>(*comm, ElementType::kFloat64);
  expect_allreduce<std::int64_t>(*comm, ElementType::kInt64);
  expect_allreduce<std::uint8_t>(*comm, ElementType::kUInt8);
  comm->allreduce(nullptr, 0, ElementType::kFloat32, ReduceOp::kSum);  // nothing to do, no error
}

TEST(MpiCommunicator, BroadcastFromEachRoot) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  for (int root = 0; root < comm->size(); ++root) {
    std::vector<double> data = {comm->rank() * 1.0, 2.5, -1.0 * comm->rank()};
    comm->broadcast(data.data(), data.size() * sizeof(double), root);
    EXPECT_EQ(data, (std::vector<double>{root * 1.0, 2.5, -1.0 * root})) << "root " << root;
    std::int64_t big = comm->rank() == root ? (std::int64_t{1} << 40) + root : 0;
    comm->broadcast(&big, sizeof(big), root);
    EXPECT_EQ(big, (std::int64_t{1} << 40) + root);
  }
  EXPECT_THROW(comm->broadcast(nullptr, 0, comm->size()), ConfigError);  // local check, no MPI call
}

TEST(MpiCommunicator, AllgatherAndStringsAndBarrier) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  const float mine[2] = {static_cast<float>(comm->rank()), 0.5f};
  std::vector<float> all(2 * static_cast<std::size_t>(comm->size()));
  comm->allgather(mine, all.data(), sizeof(mine));
  for (int q = 0; q < comm->size(); ++q) {
    EXPECT_EQ(all[2 * q], static_cast<float>(q));
    EXPECT_EQ(all[2 * q + 1], 0.5f);
  }
  const auto names = allgather_strings(*comm, std::string(static_cast<std::size_t>(comm->rank()) + 1, 'x'));
  ASSERT_EQ(names.size(), static_cast<std::size_t>(comm->size()));
  for (int q = 0; q < comm->size(); ++q) EXPECT_EQ(names[q], std::string(static_cast<std::size_t>(q) + 1, 'x'));
  comm->barrier();
}

TEST(MpiCommunicator, ADuplicateKeepsTenaxTrafficApartFromTheSolvers) {
  // A message the "solver" leaves in flight on MPI_COMM_WORLD is not matched by Tenax's broadcast.
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  int solver_value = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  const int peer = (comm->rank() + 1) % comm->size();
  const int from = (comm->rank() + comm->size() - 1) % comm->size();
  int sent = 100 + comm->rank();
  MPI_Irecv(&solver_value, 1, MPI_INT, from, 0, MPI_COMM_WORLD, &request);
  MPI_Send(&sent, 1, MPI_INT, peer, 0, MPI_COMM_WORLD);
  int tenax_value = comm->rank() == 0 ? 7 : 0;
  comm->broadcast(&tenax_value, sizeof(tenax_value), 0);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  EXPECT_EQ(tenax_value, 7);
  EXPECT_EQ(solver_value, 100 + from);
}

TEST(MpiCommunicator, MpiCommNullIsAClearError) {
  try {
    make_mpi_communicator(MPI_COMM_NULL);
    ADD_FAILURE() << "MPI_COMM_NULL must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_COMM_NULL"), std::string::npos) << e.what();
  }
  try {
    make_mpi_communicator_from_fortran(MPI_Comm_c2f(MPI_COMM_NULL));
    ADD_FAILURE() << "MPI_COMM_NULL must be refused from Fortran too";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_COMM_NULL"), std::string::npos) << e.what();
  }
}

TEST(MpiCommunicator, AfterAbortEveryCallThrowsAtOnce) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  comm->abort();
  comm->abort();  // idempotent
  float x = 1.0f;
  EXPECT_THROW(comm->allreduce(&x, 1, ElementType::kFloat32, ReduceOp::kSum), PeerLostError);
  EXPECT_THROW(comm->broadcast(&x, sizeof(x), 0), PeerLostError);
  EXPECT_THROW(comm->allgather(&x, &x, 0), PeerLostError);
  try {
    comm->barrier();
    ADD_FAILURE() << "barrier after abort";
  } catch (const PeerLostError& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_Barrier"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
  }
}

TEST(MpiCommunicator, AnMpiErrorBecomesPeerLostErrorNamingTheOperation) {
  // Ranks that disagree on a broadcast's size: rank 0 sends 64 bytes (eagerly: it returns), the
  // others have room for 8, a message truncation (MPI_ERR_TRUNCATE) that MPI reports to them.
  // With MPI_ERRORS_RETURN on the duplicate it comes back as a code, not MPI's abort of the job.
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  std::vector<unsigned char> buffer(64, 1);
  const std::size_t bytes = comm->rank() == 0 ? 64 : 8;
  if (comm->rank() == 0) {
    comm->broadcast(buffer.data(), bytes, 0);
  } else {
    try {
      comm->broadcast(buffer.data(), bytes, 0);
      ADD_FAILURE() << "a truncated broadcast must fail";
    } catch (const PeerLostError& e) {
      EXPECT_NE(std::string(e.what()).find("MPI_Bcast on rank " + std::to_string(comm->rank()) + " of"),
                std::string::npos)
          << e.what();
    }
    // Unusable from now on, at once, without another MPI call.
    try {
      comm->barrier();
      ADD_FAILURE() << "a failed communicator must refuse further calls";
    } catch (const PeerLostError& e) {
      EXPECT_NE(std::string(e.what()).find("earlier MPI error"), std::string::npos) << e.what();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);  // the world itself is intact
}

TEST(MpiCommunicator, DirectLaunchWithMpiBootstrapsTheStoreByBroadcast) {
  auto ctx = WorkerContext::from_launch(LaunchOptions(), make_mpi_communicator(MPI_COMM_WORLD));
  EXPECT_EQ(ctx.rank(), world_rank());
  EXPECT_EQ(ctx.world_size(), world_size());
  EXPECT_EQ(ctx.identity().local_world_size, world_size()) << "every rank of this test is on this host";
  ASSERT_NE(ctx.store(), nullptr) << "rank 0 hosts the store; the others learn it by MPI_Bcast";
  // The store is shared: what rank 0 sets, rank 1 reads (through a second connection, as the
  // checkpoint writer's thread does).
  auto other = ctx.open_store();
  if (ctx.rank() == 0) ctx.store()->set("hello", {'h', 'i'});
  EXPECT_EQ(other->get("hello", std::chrono::seconds(30)), (std::vector<char>{'h', 'i'}));
  double x = 1.0;
  ctx.communicator().allreduce(&x, 1, ElementType::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(x, static_cast<double>(world_size()));
  EXPECT_TRUE(ctx.finalize());
}

TEST(MpiCommunicator, DirectLaunchFromAFortranHandle) {
  auto ctx = WorkerContext::from_launch(LaunchOptions().mpi_fortran_comm(MPI_Comm_c2f(MPI_COMM_WORLD)));
  EXPECT_EQ(ctx.rank(), world_rank());
  EXPECT_EQ(ctx.world_size(), world_size());
  std::int64_t v = ctx.rank();
  ctx.communicator().allreduce(&v, 1, ElementType::kInt64, ReduceOp::kMax);
  EXPECT_EQ(v, world_size() - 1);
  EXPECT_TRUE(ctx.finalize());
}

// A small model whose gradients differ per rank: the same initial weights everywhere (seed 0),
// each rank's own batches (seeds by step and rank).
std::vector<torch::Tensor> averaged_gradients(Communicator& comm) {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(6, 5), torch::nn::Tanh(), torch::nn::Linear(5, 3));
  // A bucket cap of 64 bytes splits the 68 parameters into several buckets (several allreduces).
  sdk::GradSync sync(comm, model->parameters(), sdk::GradSyncOptions{64});
  sync.broadcast_parameters();
  for (int step = 0; step < 2; ++step) {
    torch::manual_seed(100 + 10 * step + comm.rank());
    const auto input = torch::randn({4, 6});
    const auto target = torch::randn({4, 3});
    sync.zero_grad();
    torch::mse_loss(model->forward(input), target).backward();
    sync.synchronize();
  }
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

TEST(MpiCommunicator, GradSyncOverMpiEqualsGlooBitForBit) {
  ASSERT_EQ(world_size(), 2) << "bit equality of float sums holds for 2 ranks (a + b == b + a)";
  auto mpi_ctx = WorkerContext::from_launch(LaunchOptions(), make_mpi_communicator(MPI_COMM_WORLD));
  // The same processes, without MPI: the direct launch under mpirun (OMPI_COMM_WORLD_RANK) forms
  // a Gloo world through rank 0's store, found in TENAX_RDZV_DIR.
  auto gloo_ctx = WorkerContext::from_launch(LaunchOptions());
  ASSERT_EQ(gloo_ctx.rank(), mpi_ctx.rank());
  ASSERT_EQ(gloo_ctx.world_size(), 2);

  const auto over_mpi = averaged_gradients(mpi_ctx.communicator());
  const auto over_gloo = averaged_gradients(gloo_ctx.communicator());
  ASSERT_EQ(over_mpi.size(), over_gloo.size());
  for (std::size_t i = 0; i < over_mpi.size(); ++i) {
    ASSERT_EQ(over_mpi[i].numel(), over_gloo[i].numel());
    EXPECT_EQ(std::memcmp(over_mpi[i].data_ptr<float>(), over_gloo[i].data_ptr<float>(),
                          static_cast<std::size_t>(over_mpi[i].numel()) * sizeof(float)),
              0)
        << "parameter " << i << ": MPI " << over_mpi[i] << " Gloo " << over_gloo[i];
  }
  // The average is really of both ranks: rank 1's differs from rank 0's own gradient alone.
  auto alone = make_mpi_communicator(MPI_COMM_SELF);
  const auto own = averaged_gradients(*alone);
  EXPECT_FALSE(torch::equal(own[0], over_mpi[0])) << "the gradients were averaged over both ranks";
  // Both ranks hold the same average.
  std::vector<float> mine(over_mpi[0].data_ptr<float>(), over_mpi[0].data_ptr<float>() + over_mpi[0].numel());
  std::vector<float> both(2 * mine.size());
  mpi_ctx.communicator().allgather(mine.data(), both.data(), mine.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(both.data(), both.data() + mine.size(), mine.size() * sizeof(float)), 0);
  EXPECT_TRUE(gloo_ctx.finalize());
  EXPECT_TRUE(mpi_ctx.finalize());
}

}  // namespace
}  // namespace tenax::elastic

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  // Every rank's verdict counts: mpirun fails when any rank exits non-zero.
  MPI_Finalize();
  return failed;
}
