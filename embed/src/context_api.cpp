// Context: who this process is (tenax_init), and the collectives a solver may borrow.
#include <memory>
#include <optional>

#include "error_boundary.h"
#include "handles.h"
#include "live_handles.h"
#include "step_recovery.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/communicator.h"
#include "tenax/elastic/direct_launch.h"

using tenax::capi::guarded;
using tenax::capi::InvalidArgument;
using tenax::capi::live;
using tenax::capi::out_argument;

namespace tenax::capi {
namespace {

// The launch call site (tenax_init and tenax_init_mpi): `tenax run`'s environment, a direct
// srun / mpirun launch (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK), or a single process; with
// `fortran_comm`, the caller's MPI communicator carries the collectives (elastic/direct_launch.h).
// A libtenax built without MPI refuses fortran_comm with a ConfigError.
elastic::WorkerContext launch_context(std::optional<std::int32_t> fortran_comm) {
  elastic::LaunchOptions options;
  if (fortran_comm) options.mpi_fortran_comm(*fortran_comm);
  return elastic::WorkerContext::from_launch(options);
}

void hand_out(tenax_context*& out, std::optional<std::int32_t> fortran_comm) {
  auto context = std::make_unique<tenax_context>();
  context->worker = std::make_unique<elastic::WorkerContext>(launch_context(fortran_comm));
  set_log_identity({context->worker->rank(), static_cast<int>(context->worker->generation()), "worker"});
  remember_handle(context.get());
  out = context.release();
}

elastic::ElementType element_type(int32_t dtype) {
  switch (dtype) {
    case TENAX_FLOAT32: return elastic::ElementType::kFloat32;
    case TENAX_FLOAT64: return elastic::ElementType::kFloat64;
    case TENAX_INT64: return elastic::ElementType::kInt64;
    default:
      throw InvalidArgument("dtype: " + std::to_string(dtype) +
                            " is not a tenax_dtype (TENAX_FLOAT32, TENAX_FLOAT64, TENAX_INT64)");
  }
}

elastic::ReduceOp reduce_op(int32_t op) {
  switch (op) {
    case TENAX_SUM: return elastic::ReduceOp::kSum;
    case TENAX_MAX: return elastic::ReduceOp::kMax;
    case TENAX_MIN: return elastic::ReduceOp::kMin;
    default:
      throw InvalidArgument("op: " + std::to_string(op) +
                            " is not a tenax_reduce_op (TENAX_SUM, TENAX_MAX, TENAX_MIN)");
  }
}

tenax_context& live_context(const tenax_context* ctx) {
  return const_cast<tenax_context&>(live(ctx, "ctx", "tenax_context"));
}

}  // namespace
}  // namespace tenax::capi

extern "C" {

tenax_status tenax_init(tenax_context** ctx) {
  return guarded("tenax_init", [&] {
    tenax_context*& out = out_argument(ctx, "ctx");
    out = nullptr;
    tenax::capi::hand_out(out, std::nullopt);
  });
}

tenax_status tenax_init_mpi(tenax_context** ctx, int32_t fortran_comm) {
  return guarded("tenax_init_mpi", [&] {
    tenax_context*& out = out_argument(ctx, "ctx");
    out = nullptr;
    tenax::capi::hand_out(out, fortran_comm);
  });
}

tenax_status tenax_finalize(tenax_context** ctx) {
  return guarded("tenax_finalize", [&] {
    tenax_context*& handle = out_argument(ctx, "ctx");
    if (handle == nullptr) return;
    tenax_context& context = tenax::capi::live_context(handle);
    if (context.trainers > 0) {
      throw InvalidArgument("ctx: " + std::to_string(context.trainers) +
                            " trainer(s) still use this context; free them first (tenax_trainer_free)");
    }
    const bool orderly = context.worker->finalize();
    tenax::capi::forget_handle(handle);
    delete handle;
    handle = nullptr;
    if (!orderly) {
      throw tenax::PeerLostError(
          "not every rank reached tenax_finalize in time (the context is freed anyway); "
          "end the process with a non-zero status");
    }
  });
}

tenax_status tenax_rank(const tenax_context* ctx, int32_t* rank) {
  return guarded("tenax_rank", [&] {
    int32_t& out = out_argument(rank, "rank");
    out = tenax::capi::live_context(ctx).worker->rank();
  });
}

tenax_status tenax_world_size(const tenax_context* ctx, int32_t* world_size) {
  return guarded("tenax_world_size", [&] {
    int32_t& out = out_argument(world_size, "world_size");
    out = tenax::capi::live_context(ctx).worker->world_size();
  });
}

tenax_status tenax_allreduce(tenax_context* ctx, void* data, int64_t count, int32_t dtype, int32_t op) {
  return guarded("tenax_allreduce", [&] {
    tenax_context& context = tenax::capi::live_context(ctx);
    const auto type = tenax::capi::element_type(dtype);
    const auto reduce = tenax::capi::reduce_op(op);
    if (count < 0) throw InvalidArgument("count: " + std::to_string(count) + " is negative");
    if (data == nullptr && count > 0) throw InvalidArgument("data: NULL for " + std::to_string(count) + " elements");
    if (count == 0) return;
    tenax::capi::recovering(context.recovering, [&] {
      context.worker->communicator().allreduce(data, static_cast<std::size_t>(count), type, reduce);
    });
  });
}

tenax_status tenax_allgather(tenax_context* ctx, const void* in, void* out, int64_t bytes_per_rank) {
  return guarded("tenax_allgather", [&] {
    tenax_context& context = tenax::capi::live_context(ctx);
    if (bytes_per_rank < 0) throw InvalidArgument("bytes_per_rank: " + std::to_string(bytes_per_rank) + " is negative");
    if (bytes_per_rank == 0) return;
    if (in == nullptr) throw InvalidArgument("in: NULL");
    if (out == nullptr) throw InvalidArgument("out: NULL");
    tenax::capi::recovering(context.recovering, [&] {
      context.worker->communicator().allgather(in, out, static_cast<std::size_t>(bytes_per_rank));
    });
  });
}

}  // extern "C"
