// Collectives for one generation of ranks (DESIGN.md decision 1).
//
// Backends: Tenax's TCP ring and Gloo (CPU), NCCL (GPU build), MPI (a program's own; backend.h). One instance per
// generation; after any failure it is thrown away and a new one is built on a fresh "gen/<n>/" store prefix. All calls
// except abort() are collective: every rank must call them in the same order. Every call takes a timeout and throws
// TimeoutError / PeerLostError on failure. Thread-safety: one thread at a time per instance.
//
//   comm.allreduce(grads.data(), grads.size(), ElementType::kFloat32, ReduceOp::kSum);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tenax::elastic {

inline constexpr std::chrono::milliseconds kDefaultCollectiveTimeout = std::chrono::seconds(120);

enum class ElementType : std::uint8_t { kFloat32, kFloat64, kInt64, kUInt8 };
enum class ReduceOp : std::uint8_t { kSum, kMax, kMin };

std::size_t element_size(ElementType type);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// In-place allreduce of `count` elements.
  virtual void allreduce(void* data, std::size_t count, ElementType type, ReduceOp op,
                         std::chrono::milliseconds timeout = kDefaultCollectiveTimeout) = 0;
  /// In-place broadcast of `bytes` bytes from `root`.
  virtual void broadcast(void* data, std::size_t bytes, int root,
                         std::chrono::milliseconds timeout = kDefaultCollectiveTimeout) = 0;
  /// Gathers `bytes_per_rank` bytes from every rank into `out` (size() * bytes_per_rank), rank order.
  virtual void allgather(const void* in, void* out, std::size_t bytes_per_rank,
                         std::chrono::milliseconds timeout = kDefaultCollectiveTimeout) = 0;
  virtual void barrier(std::chrono::milliseconds timeout = kDefaultCollectiveTimeout) = 0;
  /// Non-collective, non-blocking: makes pending and future calls fail fast. Idempotent.
  virtual void abort() = 0;
  /// Whether the collectives may be called from a thread other than the one that built this
  /// (one thread at a time still). GradSync allreduces on its own thread only when they may.
  virtual bool callable_from_any_thread() const { return true; }
  /// Whether `data` may point to CUDA device memory (NCCL); else only host memory.
  virtual bool accepts_device_memory() const { return false; }
};

/// Gathers one variable-length byte string per rank (two allgathers: lengths, then padded data).
std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine,
                                           std::chrono::milliseconds timeout = kDefaultCollectiveTimeout);

}  // namespace tenax::elastic
