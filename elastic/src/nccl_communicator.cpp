// The NCCL backend of Communicator (CUDA flavour only). NCCL and CUDA runtime headers stay in
// this file: tenax::elastic's users need neither.
#include "tenax/elastic/nccl_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <fmt/format.h>

#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/peer_wait.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUniqueIdKey = "nccl/unique_id";

std::string visible_devices_text() {
  const auto value = env::get("CUDA_VISIBLE_DEVICES");
  return value ? "CUDA_VISIBLE_DEVICES=" + *value : std::string("CUDA_VISIBLE_DEVICES unset");
}

void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw RendezvousError(what + ": CUDA error " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return ncclFloat32;
    case ElementType::kFloat64: return ncclFloat64;
    case ElementType::kInt64: return ncclInt64;
    case ElementType::kUInt8: return ncclUint8;
  }
  throw Error(fmt::format("NCCL communicator: unknown ElementType {}", static_cast<int>(type)));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  throw Error(fmt::format("NCCL communicator: unknown ReduceOp {}", static_cast<int>(op)));
}

void check_timeout(std::chrono::milliseconds timeout, const char* what) {
  if (timeout.count() <= 0) {
    throw ConfigError(fmt::format("{}: timeout must be positive, got {} ms", what, timeout.count()));
  }
}

// Polling with a short back-off: a collective of a few KB ends in microseconds, a gradient
// bucket in milliseconds; sleeping up to 1 ms between polls costs at most that much latency and
// keeps the waiting thread off the CPU that backward needs.
void back_off(int& polls) {
  if (polls < 100) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * (polls - 99))));
  }
  ++polls;
}

int pick_device(const NcclOptions& options, int visible, const std::string& who) {
  if (options.device >= 0) {
    if (options.device >= visible) {
      throw ConfigError("NCCL communicator for " + who + ": device " + std::to_string(options.device) +
                        " requested but only " + std::to_string(visible) + " CUDA device(s) are visible (" +
                        visible_devices_text() + ")");
    }
    return options.device;
  }
  const std::int64_t local_rank = env::get_int("LOCAL_RANK", 0);
  return static_cast<int>(local_rank % visible);
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int size, int device) : rank_(rank), size_(size), device_(device) {}

  ~NcclCommunicator() override {
    // Abort, never destroy: ncclCommDestroy may wait for peers; abort is local.
    if (comm_ != nullptr && !comm_aborted_) ncclCommAbort(comm_);
    if (staging_ != nullptr) cudaFree(staging_);
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (ready_ != nullptr) cudaEventDestroy(ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Creates the stream and joins the NCCL communicator (non-blocking init, polled until
  // `deadline`).
  void init(const ncclUniqueId& id, Clock::time_point deadline, std::chrono::milliseconds timeout) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ") for " + who());
    // Non-blocking: the legacy default stream does not serialize it against torch's kernels;
    // collectives wait for it explicitly (ready_) instead.
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate for " + who());
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate for " + who());
    check_cuda(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc of the barrier's word for " + who());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    std::lock_guard<std::mutex> lock(mutex_);
    const ncclResult_t started = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
    if (started != ncclSuccess && started != ncclInProgress) {
      fail_locked("ncclCommInitRankConfig", started);
      throw PeerLostError("NCCL init for " + who() + " failed: " + failure_);
    }
    wait_comm_locked("NCCL init", deadline, timeout);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Device buffers go to NCCL as they are (GradSync's buckets on cuda:LOCAL_RANK); each call
  // sets its device, so any thread may make it (one at a time).
  bool accepts_device_memory() const override { return true; }

  void allreduce(void* data, std::size_t count, ElementType type, ReduceOp op,
                 std::chrono::milliseconds timeout) override {
    const ncclDataType_t dtype = nccl_type(type);
    const ncclRedOp_t rop = nccl_op(op);
    const std::size_t bytes = count * element_size(type);
    run("allreduce", timeout, [&] {
      if (count == 0) return;
      if (data == nullptr) throw Error("allreduce: null buffer");
      Buffer buffer = stage_in(data, bytes, 0);
      enqueue("ncclAllReduce", ncclAllReduce(buffer.device, buffer.device, count, dtype, rop, comm_, stream_));
      stage_out(buffer, data, bytes);
    });
  }

  void broadcast(void* data, std::size_t bytes, int root, std::chrono::milliseconds timeout) override {
    run("broadcast", timeout, [&] {
      if (root < 0 || root >= size_) {
        throw Error(fmt::format("broadcast: root {} outside world size {}", root, size_));
      }
      if (bytes == 0) return;
      if (data == nullptr) throw Error("broadcast: null buffer");
      Buffer buffer = stage_in(data, bytes, 0);
      enqueue("ncclBroadcast", ncclBroadcast(buffer.device, buffer.device, bytes, ncclUint8, root, comm_, stream_));
      stage_out(buffer, data, bytes);
    });
  }

  void allgather(const void* in, void* out, std::size_t bytes_per_rank, std::chrono::milliseconds timeout) override {
    run("allgather", timeout, [&] {
      if (bytes_per_rank == 0) return;
      if (in == nullptr || out == nullptr) throw Error("allgather: null buffer");
      const std::size_t total = bytes_per_rank * static_cast<std::size_t>(size_);
      // Output first in the staging buffer, the input after it. Reserved up front: growing the
      // buffer while staging the input would move the output's place.
      void* in_data = const_cast<void*>(in);
      if (!on_this_device(out) || !on_this_device(in_data)) reserve(total + bytes_per_rank);
      Buffer out_buffer = stage_in(out, total, 0, /*copy=*/false);
      Buffer in_buffer = stage_in(in_data, bytes_per_rank, out_buffer.staged ? total : 0);
      enqueue("ncclAllGather",
              ncclAllGather(in_buffer.device, out_buffer.device, bytes_per_rank, ncclUint8, comm_, stream_));
      stage_out(out_buffer, out, total);
    });
  }

  void barrier(std::chrono::milliseconds timeout) override {
    run("barrier", timeout, [&] {
      enqueue("ncclAllReduce (barrier)", ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_));
    });
  }

  void abort() override {
    aborted_.store(true);
    // Never blocks: if a call holds the lock, its polling loop sees aborted_ and aborts.
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (lock.owns_lock()) abort_locked();
  }

 private:
  struct Buffer {
    void* device = nullptr;
    bool staged = false;
  };

  std::string who() const {
    return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (cuda:" + std::to_string(device_) + ")";
  }

  void abort_locked() {
    if (comm_ != nullptr && !comm_aborted_) {
      ncclCommAbort(comm_);
      comm_aborted_ = true;
    }
  }

  void fail_locked(const std::string& what, ncclResult_t result) {
    const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    failure_ =
        what + ": " + ncclGetErrorString(result) + (last != nullptr && *last ? std::string(" (") + last + ")" : "");
    abort_locked();
  }

  // Waits until the communicator has no operation in progress (init, or an enqueue that
  // returned ncclInProgress). Throws on failure, abort or deadline, after aborting.
  void wait_comm_locked(const char* what, Clock::time_point deadline, std::chrono::milliseconds timeout) {
    for (int polls = 0;; back_off(polls)) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
      if (queried != ncclSuccess) state = queried;
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        fail_locked(what, state);
        throw PeerLostError(std::string(what) + " failed on " + who() + ": " + failure_ +
                            "; a peer has died or the network failed");
      }
      check_abort_and_deadline_locked(what, deadline, timeout);
    }
  }

  void check_abort_and_deadline_locked(const char* what, Clock::time_point deadline,
                                       std::chrono::milliseconds timeout) {
    if (aborted_.load()) {
      failure_ = "aborted";
      abort_locked();
      throw PeerLostError(std::string(what) + " on " + who() + ": the communicator was aborted; build a new one");
    }
    if (Clock::now() >= deadline) {
      failure_ = std::string(what) + " timed out after " + std::to_string(timeout.count()) + " ms";
      abort_locked();
      throw TimeoutError(std::string(what) + " on " + who() + " did not complete within " +
                         std::to_string(timeout.count()) + " ms; a peer is slow, hung or gone (communicator aborted)");
    }
  }

  // Device or managed memory of this communicator's device (NCCL can use it as it is).
  bool on_this_device(void* data) {
    cudaPointerAttributes attributes{};
    const cudaError_t status = cudaPointerGetAttributes(&attributes, data);
    if (status != cudaSuccess) {
      cudaGetLastError();  // an unregistered host pointer on old runtimes: clear the error
      return false;
    }
    return (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged) &&
           attributes.device == device_;
  }

  // A device pointer of this device goes to NCCL as is; anything else (pageable or pinned
  // host memory, another device's memory) is copied through the staging buffer at `offset`.
  Buffer stage_in(void* data, std::size_t bytes, std::size_t offset, bool copy = true) {
    if (on_this_device(data)) return {data, false};
    reserve(offset + bytes);
    void* device = static_cast<char*>(staging_) + offset;
    if (copy) {
      check_cuda(cudaMemcpyAsync(device, data, bytes, cudaMemcpyDefault, stream_), "staging copy in on " + who());
    }
    return {device, true};
  }

  void stage_out(const Buffer& buffer, void* data, std::size_t bytes) {
    if (!buffer.staged) return;
    check_cuda(cudaMemcpyAsync(data, buffer.device, bytes, cudaMemcpyDefault, stream_), "staging copy out on " + who());
  }

  void reserve(std::size_t bytes) {
    if (bytes <= staging_bytes_) return;
    // Freeing waits for the device; fine: staging grows a few times at the start, then stays.
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize before growing the staging buffer on " + who());
    if (staging_ != nullptr) cudaFree(staging_);
    staging_ = nullptr;
    staging_bytes_ = 0;
    check_cuda(cudaMalloc(&staging_, bytes), "cudaMalloc of " + std::to_string(bytes) + " staging bytes on " + who());
    staging_bytes_ = bytes;
  }

  // Non-blocking mode: a collective may return ncclInProgress before its kernel is on the
  // stream; the staging copy out must come after it, so wait for NCCL here.
  void enqueue(const char* what, ncclResult_t result) {
    if (result == ncclSuccess) return;
    if (result == ncclInProgress) {
      wait_comm_locked(what, call_deadline_, call_timeout_);
      return;
    }
    fail_locked(what, result);
    throw PeerLostError(std::string(what) + " failed on " + who() + ": " + failure_);
  }

  // Runs one collective: refuses after abort() or an earlier failure, enqueues on stream_ after
  // the legacy default stream's work, then polls the stream and NCCL's async error until done.
  template <typename Body>
  void run(const char* what, std::chrono::milliseconds timeout, Body&& body) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.load()) {
      abort_locked();
      throw PeerLostError(std::string(what) + " on " + who() + ": the communicator was aborted; build a new one");
    }
    if (!failure_.empty()) {
      throw PeerLostError(std::string(what) + " on " + who() + ": the communicator is unusable after an earlier " +
                          "failure (" + failure_ + "); build a new one for the next generation");
    }
    check_timeout(timeout, what);
    const auto deadline = Clock::now() + timeout;
    call_deadline_ = deadline;
    call_timeout_ = timeout;
    // Blocked on the peers until the collective completes: --hang-timeout's beacon reports it.
    const PeerWaitGuard waiting;
    check_cuda(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ") for " + who());
    check_cuda(cudaEventRecord(ready_, cudaStreamLegacy), "cudaEventRecord on " + who());
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent on " + who());
    body();
    for (int polls = 0;; back_off(polls)) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) {
        failure_ = std::string(what) + ": CUDA error " + cudaGetErrorName(status);
        abort_locked();
        throw PeerLostError(std::string(what) + " failed on " + who() + ": " + failure_);
      }
      ncclResult_t state = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
      if (queried != ncclSuccess) state = queried;
      if (state != ncclSuccess && state != ncclInProgress) {
        fail_locked(what, state);
        throw PeerLostError(std::string(what) + " failed on " + who() + " (timeout " + std::to_string(timeout.count()) +
                            " ms): " + failure_ + "; a peer has died or closed its connection");
      }
      check_abort_and_deadline_locked(what, deadline, timeout);
    }
  }

  const int rank_;
  const int size_;
  const int device_;
  std::mutex mutex_;  // guards comm_ and everything below against abort() from another thread
  ncclComm_t comm_ = nullptr;
  bool comm_aborted_ = false;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  void* scratch_ = nullptr;
  void* staging_ = nullptr;
  std::size_t staging_bytes_ = 0;
  Clock::time_point call_deadline_;  // of the call in progress (enqueue waits until it)
  std::chrono::milliseconds call_timeout_{0};
  std::string failure_;  // non-empty once a collective has failed
  std::atomic<bool> aborted_{false};
};

}  // namespace

bool nccl_built() { return true; }

int visible_cuda_devices() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error for later callers
    return 0;
  }
  return count;
}

std::unique_ptr<Communicator> make_nccl_communicator(Store& store, int rank, int size, const NcclOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw ConfigError("NCCL communicator: rank " + std::to_string(rank) + " is outside world size " +
                      std::to_string(size) + " (need 0 <= rank < size)");
  }
  check_timeout(options.timeout, "make_nccl_communicator");
  const std::string who = "rank " + std::to_string(rank) + " of " + std::to_string(size);
  int visible = 0;
  const cudaError_t status = cudaGetDeviceCount(&visible);
  if (status != cudaSuccess || visible == 0) {
    if (status != cudaSuccess) cudaGetLastError();
    const std::string reason = status != cudaSuccess
                                   ? std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status)
                                   : std::string("cudaGetDeviceCount found 0 devices");
    throw ConfigError("TENAX_BACKEND=nccl (the NCCL communicator) for " + who + " but no CUDA device is visible (" +
                      visible_devices_text() + "; " + reason + "); use TENAX_BACKEND=gloo or run on a GPU node");
  }
  const int device = pick_device(options, visible, who);
  const auto deadline = Clock::now() + options.timeout;

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess) {
      throw RendezvousError("ncclGetUniqueId on " + who + " failed: " + ncclGetErrorString(result) +
                            "; check the network interfaces NCCL may use (NCCL_SOCKET_IFNAME)");
    }
    if (size > 1) {
      const char* bytes = reinterpret_cast<const char*>(&id);
      store.set(kUniqueIdKey, std::vector<char>(bytes, bytes + sizeof(id)));
    }
  } else {
    std::vector<char> raw;
    try {
      // wait() first: a store that watches its generation (in-process recovery) turns a
      // generation superseded while this rank waits into PeerLostError there.
      store.wait({kUniqueIdKey}, options.timeout);
      raw = store.get(kUniqueIdKey, options.timeout);
    } catch (const TimeoutError& e) {
      throw TimeoutError("NCCL rendezvous for " + who + ": rank 0 published no unique id within " +
                         std::to_string(options.timeout.count()) + " ms: " + e.what());
    }
    if (raw.size() != sizeof(id)) {
      throw RendezvousError("NCCL rendezvous for " + who + ": the store's '" + kUniqueIdKey + "' holds " +
                            std::to_string(raw.size()) + " bytes, not an ncclUniqueId's " + std::to_string(sizeof(id)) +
                            "; are all ranks the same Tenax build?");
    }
    std::memcpy(&id, raw.data(), sizeof(id));
  }

  auto communicator = std::make_unique<NcclCommunicator>(rank, size, device);
  communicator->init(id, deadline, options.timeout);
  // As with Gloo: construction ends with a barrier, so a returned communicator is up everywhere.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  communicator->barrier(std::max(left, std::chrono::milliseconds(1)));
  logger("tenax.elastic")->debug("NCCL communicator ready: {} on cuda:{}", who, device);
  return communicator;
}

}  // namespace tenax::elastic
