// The MPI backend of Communicator. <mpi.h> stays in this file and mpi_communicator.h.
#include "tenax/elastic/mpi_communicator.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <string>

#include "tenax/core/error.h"
#include "tenax/elastic/peer_wait.h"

namespace tenax::elastic {
namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(std::max(length, 0)));
}

MPI_Datatype mpi_type(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return MPI_FLOAT;
    case ElementType::kFloat64: return MPI_DOUBLE;
    case ElementType::kInt64: return MPI_INT64_T;
    case ElementType::kUInt8: return MPI_UINT8_T;
  }
  throw ConfigError("MpiCommunicator: unknown ElementType " + std::to_string(static_cast<int>(type)));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  throw ConfigError("MpiCommunicator: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

// MPI counts are int: larger buffers go in pieces of at most this many elements.
constexpr std::size_t kMaxChunk = static_cast<std::size_t>(INT_MAX);

void require_mpi_running(const char* what) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    throw ConfigError(std::string(what) + ": MPI is " + (finalized ? "already finalised" : "not initialised") +
                      "; call MPI_Init before building Tenax's MPI communicator and MPI_Finalize only after "
                      "releasing it (tenax_finalize / WorkerContext::finalize)");
  }
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm caller) {
    require_mpi_running("make_mpi_communicator");
    if (caller == MPI_COMM_NULL) {
      throw ConfigError(
          "make_mpi_communicator: the communicator is MPI_COMM_NULL; pass the solver's communicator "
          "(e.g. MPI_COMM_WORLD), one this process is a member of");
    }
    // The duplicate carries Tenax's traffic in its own context, so no message of ours can match
    // a receive of the solver's.
    const int rc = MPI_Comm_dup(caller, &comm_);
    if (rc != MPI_SUCCESS) {
      throw PeerLostError("make_mpi_communicator: MPI_Comm_dup failed: " + mpi_error_text(rc));
    }
    // Errors come back as codes (and become exceptions) instead of MPI_ERRORS_ARE_FATAL's abort.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    // After a failure a peer may be gone, and freeing could wait for it (decision 8): leak the
    // handle instead; the process is about to be restarted anyway.
    if (!finalized && !aborted_.load() && !failed_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce(void* data, std::size_t count, ElementType type, ReduceOp op,
                 std::chrono::milliseconds /*timeout: see the header*/) override {
    usable("MPI_Allreduce");
    const PeerWaitGuard waiting;  // --hang-timeout's beacon: blocked on the peers
    const MPI_Datatype datatype = mpi_type(type);
    const MPI_Op reduce = mpi_op(op);
    auto* bytes = static_cast<unsigned char*>(data);
    const std::size_t width = element_size(type);
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min(count - done, kMaxChunk);
      check("MPI_Allreduce",
            MPI_Allreduce(MPI_IN_PLACE, bytes + done * width, static_cast<int>(n), datatype, reduce, comm_));
      done += n;
    }
  }

  void broadcast(void* data, std::size_t bytes, int root, std::chrono::milliseconds /*timeout*/) override {
    usable("MPI_Bcast");
    const PeerWaitGuard waiting;  // --hang-timeout's beacon: blocked on the peers
    if (root < 0 || root >= size_) {
      throw ConfigError("MPI_Bcast on " + who() + ": root " + std::to_string(root) + " is not in [0, " +
                        std::to_string(size_) + ")");
    }
    auto* p = static_cast<unsigned char*>(data);
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t n = std::min(bytes - done, kMaxChunk);
      check("MPI_Bcast", MPI_Bcast(p + done, static_cast<int>(n), MPI_BYTE, root, comm_));
      done += n;
    }
  }

  void allgather(const void* in, void* out, std::size_t bytes_per_rank,
                 std::chrono::milliseconds /*timeout*/) override {
    usable("MPI_Allgather");
    const PeerWaitGuard waiting;  // --hang-timeout's beacon: blocked on the peers
    if (bytes_per_rank > kMaxChunk) {
      throw ConfigError("MPI_Allgather on " + who() + ": " + std::to_string(bytes_per_rank) +
                        " bytes per rank is more than MPI's int count allows (" + std::to_string(kMaxChunk) +
                        "); gather in pieces");
    }
    const int n = static_cast<int>(bytes_per_rank);
    check("MPI_Allgather", MPI_Allgather(in, n, MPI_BYTE, out, n, MPI_BYTE, comm_));
  }

  void barrier(std::chrono::milliseconds /*timeout*/) override {
    usable("MPI_Barrier");
    const PeerWaitGuard waiting;  // --hang-timeout's beacon: blocked on the peers
    check("MPI_Barrier", MPI_Barrier(comm_));
  }

  void abort() override { aborted_.store(true); }

  // Below MPI_THREAD_SERIALIZED only the thread that initialised MPI may call it (a solver's
  // plain MPI_Init gets MPI_THREAD_SINGLE from Open MPI).
  bool callable_from_any_thread() const override {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    return provided >= MPI_THREAD_SERIALIZED;
  }

 private:
  std::string who() const { return "rank " + std::to_string(rank_) + " of " + std::to_string(size_); }

  // Before each collective, as the Gloo backend does: after abort() or an error the
  // communicator is done, and says so at once instead of starting an MPI call.
  void usable(const char* what) const {
    if (aborted_.load()) {
      throw PeerLostError(std::string(what) + " on " + who() + ": the communicator was aborted; build a new one");
    }
    if (failed_) {
      throw PeerLostError(std::string(what) + " on " + who() +
                          ": the communicator is unusable after an earlier MPI error; build a new one");
    }
  }

  // After each MPI call: MPI_ERRORS_RETURN gives the code back; it becomes PeerLostError.
  void check(const char* what, int rc) {
    if (rc == MPI_SUCCESS) return;
    failed_ = true;
    throw PeerLostError(std::string(what) + " on " + who() + " failed: " + mpi_error_text(rc) +
                        "; a peer may have died or the network failed. Build a new communicator (under Slurm: "
                        "let the job be requeued)");
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::atomic<bool> aborted_{false};
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) { return std::make_unique<MpiCommunicator>(comm); }

std::unique_ptr<Communicator> make_mpi_communicator_from_fortran(MPI_Fint comm) {
  require_mpi_running("make_mpi_communicator_from_fortran");
  return std::make_unique<MpiCommunicator>(MPI_Comm_f2c(comm));
}

}  // namespace tenax::elastic
