// The GPU Communicator, built on NCCL (DESIGN.md decision 1); only in the CUDA build flavour
// (make build-cuda, -DTENAX_CUDA=ON). Elsewhere make_nccl_communicator throws a ConfigError.
//
// One NCCL communicator per generation: rank 0 creates the unique id and publishes it under
// "nccl/unique_id" in the generation's store; the others read it there. The communicator is
// non-blocking (ncclConfig_t.blocking = 0): every call is polled with ncclCommGetAsyncError
// against its own timeout, and on a failure, a timeout or abort() it is ended with
// ncclCommAbort, never ncclCommDestroy (which would wait for peers that may be gone), so a
// survivor never hangs in a collective. It then throws TimeoutError / PeerLostError naming the
// rank, like the Gloo one, and every later call throws at once: build a new one for the next
// generation. The destructor aborts too (it is local; a clean ncclCommDestroy is collective).
//
// Buffers: the interface takes plain pointers. Device (or managed) pointers of this
// communicator's device go to NCCL as they are; host pointers are staged through a device
// buffer owned by the communicator (cudaPointerGetAttributes decides). Collectives run on a
// dedicated CUDA stream that first waits for the legacy default stream; a buffer produced on
// another stream must be synchronized by the caller. Every call returns when the data is in place.
//
// Device: options.device, else LOCAL_RANK modulo the visible devices. No visible device is a
// ConfigError naming CUDA_VISIBLE_DEVICES and the fix (TENAX_BACKEND=gloo, or a GPU node).
// Thread-safety: one thread at a time per instance, except abort(), which any thread may call.
//
//   tenax::elastic::PrefixStore store(tenax::elastic::generation_prefix(gen), base);
//   auto comm = tenax::elastic::make_nccl_communicator(store, rank, world, {});
//   comm->allreduce(grad.data_ptr<float>(), grad.numel(), ElementType::kFloat32, ReduceOp::kSum);
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tenax/elastic/communicator.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {

struct NcclOptions {
  /// CUDA device ordinal among the visible ones; -1: LOCAL_RANK (0 when unset) modulo their count.
  int device = -1;
  /// Deadline for exchanging the unique id and initializing the communicator.
  std::chrono::milliseconds timeout = kDefaultCollectiveTimeout;
};

/// True in the CUDA flavour (NCCL compiled in), false otherwise.
bool nccl_built();

/// CUDA devices this process can see (0 without a driver, without a device, or without CUDA in
/// the build). Never throws.
int visible_cuda_devices();

/// Collective over `size` ranks (store borrowed for the duration of the call). Throws ConfigError
/// without NCCL in the build or without a visible device, TimeoutError when peers do not arrive
/// within options.timeout, PeerLostError when initialization fails.
std::unique_ptr<Communicator> make_nccl_communicator(Store& store, int rank, int size, const NcclOptions& options);

}  // namespace tenax::elastic
