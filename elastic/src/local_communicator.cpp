// World size 1: every collective is local, so no network, store or Gloo is needed.
#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "tenax/core/error.h"
#include "tenax/elastic/gloo_communicator.h"

namespace tenax::elastic {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

  void allreduce(void* data, std::size_t count, ElementType type, ReduceOp, std::chrono::milliseconds) override {
    check();
    (void)element_size(type);  // validates the type as the Gloo path does
    if (count > 0 && data == nullptr) throw Error("allreduce: null buffer");
  }

  void broadcast(void* data, std::size_t bytes, int root, std::chrono::milliseconds) override {
    check();
    if (root != 0) throw Error(fmt::format("broadcast: root {} outside world size 1", root));
    if (bytes > 0 && data == nullptr) throw Error("broadcast: null buffer");
  }

  void allgather(const void* in, void* out, std::size_t bytes_per_rank, std::chrono::milliseconds) override {
    check();
    if (bytes_per_rank == 0) return;
    if (in == nullptr || out == nullptr) throw Error("allgather: null buffer");
    if (in != out) std::memmove(out, in, bytes_per_rank);
  }

  void barrier(std::chrono::milliseconds) override { check(); }

  void abort() override { aborted_.store(true); }

 private:
  void check() const {
    if (aborted_.load()) throw PeerLostError("communicator rank 0 of 1 was aborted; build a new one");
  }

  std::atomic<bool> aborted_{false};
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace tenax::elastic
