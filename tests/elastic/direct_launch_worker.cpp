// One rank of a direct launch without MPI, for direct_launch_test: joins the world through
// WorkerContext::from_launch (Gloo over the store that rank 0 hosts), allreduces, and prints
// what it got. Exit 0 on success; 1 with the error on stderr.
#include <cstdint>
#include <cstdio>
#include <exception>

#include "tenax/elastic/direct_launch.h"

int main() {
  using namespace tenax::elastic;
  try {
    auto ctx = WorkerContext::from_launch(LaunchOptions());
    const auto& id = ctx.identity();
    double value = 1.5 * (id.rank + 1);
    std::int64_t ranks = id.rank;
    ctx.communicator().allreduce(&value, 1, ElementType::kFloat64, ReduceOp::kSum);
    ctx.communicator().allreduce(&ranks, 1, ElementType::kInt64, ReduceOp::kSum);
    std::printf("rank %d of %d local %d of %d generation %lld restart %lld sum %.3f ranks %lld store %s\n", id.rank,
                id.world_size, id.local_rank, id.local_world_size, static_cast<long long>(id.generation),
                static_cast<long long>(id.restart_count), value, static_cast<long long>(ranks),
                ctx.store() ? "yes" : "no");
    std::fflush(stdout);
    return ctx.finalize() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
