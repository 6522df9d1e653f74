// Who this process is in the current generation, and its collectives.
//
// `from_env()` reads the launcher's torchrun-compatible environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, TENAX_GENERATION, TENAX_RESTART_COUNT, TENAX_RDZV_ENDPOINT, TENAX_FENCE_DIR; never MASTER_PORT, a
// PyTorch peer's own store), connects to the rendezvous key-value service at TENAX_RDZV_ENDPOINT and
// builds the communicator (backend.h) under the store prefix "gen/<generation>/". Without the launcher
// (no RANK in the environment) it gives a single-process context of world size 1.
// Defaults when RANK is set: LOCAL_RANK = RANK, LOCAL_WORLD_SIZE = WORLD_SIZE, TENAX_GENERATION
// and TENAX_RESTART_COUNT = 0; TENAX_RDZV_ENDPOINT is required when WORLD_SIZE > 1.
// `from_launch()` (direct_launch.h) also serves ranks started directly by srun or mpirun, and
// ranks that bring their own (MPI) communicator; under `tenax run` it is from_env().
// TENAX_FENCE_DIR (optional) names the job's GenerationFence: its checkpoints commit only while
// this context's generation is current. Unset or empty: no fencing (a single process, tests).
// The communicator binds TENAX_GLOO_HOSTNAME if set (the name is Gloo's; it serves the TCP ring too), else MASTER_ADDR
// on a single-node world, else this host's name on a multi-node world (MASTER_ADDR is another node's address there);
// 127.0.0.1 when none applies.
// In-process recovery (in_process_recovery.h): under `tenax run --recovery in-process` a rank
// whose collective failed calls rejoin() and goes on in the next generation with the same local rank;
// a warm spare (TENAX_SPARE_ID) waits inside from_env() until the agent gives it a rank.
// Thread-safety: not shareable; owned by the training thread. Destruction never waits on peers:
// call finalize(timeout) for an orderly collective teardown.
//
//   auto ctx = tenax::elastic::WorkerContext::from_env();
//   ctx.communicator().barrier();
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tenax/elastic/communicator.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {
namespace detail {
class GenerationWatch;
}

class KvService;
class LaunchOptions;

struct WorkerIdentity {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::int64_t generation = 0;
  std::int64_t restart_count = 0;
  /// Takes a lost rank's place in a running job (a warm spare or a fresh replacement): heals
  /// from its peers' memory instead of restoring from disk.
  bool replacement = false;
};

/// Opens a new, independent connection to this generation's store (keys under "gen/<n>/"),
/// to be owned and used by one other thread (a ZeroMQ socket stays on one thread).
using StoreFactory = std::function<std::unique_ptr<Store>()>;

class WorkerContext {
 public:
  /// See the file comment. Throws ConfigError naming a missing/invalid variable,
  /// RendezvousError / TimeoutError when the service or peers cannot be reached.
  static WorkerContext from_env(std::chrono::milliseconds timeout = kDefaultStoreTimeout);

  /// Collective. Under `tenax run`, from_env(); under srun or mpirun, the direct launch of
  /// direct_launch.h (include it for LaunchOptions). `communicator` (optional, e.g.
  /// make_mpi_communicator(solver_comm)) carries the collectives when its size is > 1.
  /// Throws ConfigError naming the variable to set, TimeoutError naming missing ranks.
  static WorkerContext from_launch(const LaunchOptions& options, std::unique_ptr<Communicator> communicator = nullptr);

  /// Assembles a context from parts (tests run N ranks as threads this way).
  /// `store` may be null when world_size == 1.
  /// `open_store` backs open_store(); when empty, open_store() gives a private in-memory store
  /// for world size 1 and throws for larger worlds. `fence`: see fence().
  WorkerContext(WorkerIdentity identity, std::unique_ptr<Store> store, std::unique_ptr<Communicator> communicator,
                StoreFactory open_store = {}, std::optional<GenerationFence> fence = std::nullopt);
  WorkerContext(WorkerContext&&) noexcept;
  WorkerContext& operator=(WorkerContext&&) noexcept;
  ~WorkerContext();

  const WorkerIdentity& identity() const { return identity_; }
  int rank() const { return identity_.rank; }
  int world_size() const { return identity_.world_size; }
  std::int64_t generation() const { return identity_.generation; }
  std::int64_t restart_count() const { return identity_.restart_count; }
  /// The job's generation fence (TENAX_FENCE_DIR), or null when this job is not fenced. A
  /// checkpoint of generation() commits only while no newer generation is recorded there.
  const GenerationFence* fence() const { return fence_ ? &*fence_ : nullptr; }
  /// The communicator of this generation. Throws RendezvousError after finalize().
  Communicator& communicator();
  /// This generation's store (keys under "gen/<n>/"), or null when there is none (world 1
  /// without TENAX_RDZV_ENDPOINT, or after finalize()).
  Store* store() { return store_.get(); }
  /// A new connection to this generation's store for another thread to own (the checkpoint
  /// writer coordinates its commit through it, never through the training communicator).
  /// World size 1 without a rendezvous service gets a private in-memory store.
  /// Throws RendezvousError when the service cannot be reached.
  std::unique_ptr<Store> open_store() const;

  /// Whether the agent recovers this job in process (TENAX_RECOVERY=in-process): a lost peer is
  /// replaced while this process lives on, and rejoin() finds the next generation.
  bool recovers_in_process() const { return in_process_; }
  /// Whether the agent declared a newer generation while this one still runs (a rendezvous
  /// across nodes re-formed the job without any collective of this generation failing: a node
  /// wrongly presumed dead, or this node's peer lost elsewhere). Asks the store at most once a
  /// second (kSupersededCheckInterval) and false in between; false unless recovers_in_process().
  bool generation_superseded();
  static constexpr std::chrono::seconds kSupersededCheckInterval{1};
  /// Tells the agent that this rank heals in process in its current generation (the agent
  /// replaces a lost peer only when every live rank said so). No-op unless recovers_in_process().
  void announce_in_process_recovery();
  /// After a collective of this generation failed: releases the communicator (closing its
  /// connections wakes the peers still blocked on this rank), waits until the agent declares a
  /// newer generation, and builds that generation's communicator. The local rank is kept; the
  /// rank and the world size are those of this node's layout in that generation (a lost node
  /// renumbers the others and shrinks the world: read rank() and world_size() again). Tries the
  /// newest declared generation again when a peer is lost while it forms. Throws
  /// RendezvousError when this context cannot rejoin (not recovers_in_process()), TimeoutError
  /// when no generation formed within `timeout`.
  void rejoin(std::chrono::milliseconds timeout);

  /// Collective: a barrier with a deadline, then releases the communicator. Returns false
  /// (and logs) if peers did not arrive in time. Safe to call twice.
  bool finalize(std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  void release() noexcept;
  // from_env(), with `given` (size > 1, matching RANK/WORLD_SIZE) instead of Gloo when set.
  static WorkerContext from_tenax_run(std::chrono::milliseconds timeout, std::unique_ptr<Communicator> given);

  WorkerIdentity identity_;
  // Destroyed in reverse order: the communicator, then the prefix view, then the connection
  // it borrows (base_store_ is set only by from_env()).
  std::unique_ptr<Store> base_store_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Communicator> communicator_;
  StoreFactory open_store_;
  std::optional<GenerationFence> fence_;
  // The store that rank 0 of a direct launch hosts (from_launch); released last, after the
  // connections to it.
  std::unique_ptr<KvService> hosted_service_;
  // Under in-process recovery: releases the communicator once a newer generation is declared.
  std::unique_ptr<detail::GenerationWatch> watch_;
  // Set by from_env() under `tenax run`: how rejoin() builds the next generation's communicator.
  bool in_process_ = false;
  std::function<StoreFactory(std::int64_t generation)> store_factory_for_;
  std::chrono::steady_clock::time_point next_superseded_check_{};
  std::string node_id_ = "local";  // TENAX_NODE_ID: names this node's layout in the job's store
  std::string gloo_hostname_;
  std::chrono::milliseconds connect_timeout_{kDefaultStoreTimeout};
};

}  // namespace tenax::elastic
