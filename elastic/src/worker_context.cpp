#include "tenax/elastic/worker_context.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <thread>
#include <utility>

#include <unistd.h>

#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/backend.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/in_process_recovery.h"
#include "tenax/elastic/kv_service.h"
#include "generation_watch.h"
#include "tenax/elastic/peer_wait.h"

namespace tenax::elastic {
namespace {

int int_var(const std::string& name, std::int64_t value) {
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    throw ConfigError(name + "=" + std::to_string(value) + " is out of range");
  }
  return static_cast<int>(value);
}

void require_range(const std::string& name, std::int64_t value, std::int64_t low, std::int64_t high,
                   const std::string& why) {
  if (value < low || value > high) {
    throw ConfigError(name + "=" + std::to_string(value) + " is invalid: " + why);
  }
}

std::string this_host() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "127.0.0.1";
  return host;
}

// Where this rank's communicator binds; see the header comment.
std::string gloo_hostname(const WorkerIdentity& id) {
  if (auto explicit_host = env::get("TENAX_GLOO_HOSTNAME")) return *explicit_host;
  if (id.world_size == id.local_world_size) return env::get("MASTER_ADDR").value_or("127.0.0.1");
  return this_host();
}

WorkerIdentity identity_from_env() {
  WorkerIdentity id;
  id.world_size = int_var("WORLD_SIZE", env::require_int("WORLD_SIZE"));
  require_range("WORLD_SIZE", id.world_size, 1, std::numeric_limits<int>::max(), "must be at least 1");
  id.rank = int_var("RANK", env::require_int("RANK"));
  require_range("RANK", id.rank, 0, id.world_size - 1,
                "must be in [0, WORLD_SIZE) with WORLD_SIZE=" + std::to_string(id.world_size));
  id.local_world_size = int_var("LOCAL_WORLD_SIZE", env::get_int("LOCAL_WORLD_SIZE", id.world_size));
  require_range("LOCAL_WORLD_SIZE", id.local_world_size, 1, id.world_size,
                "must be in [1, WORLD_SIZE] with WORLD_SIZE=" + std::to_string(id.world_size));
  id.local_rank = int_var("LOCAL_RANK", env::get_int("LOCAL_RANK", id.rank));
  require_range("LOCAL_RANK", id.local_rank, 0, id.local_world_size - 1,
                "must be in [0, LOCAL_WORLD_SIZE) with LOCAL_WORLD_SIZE=" + std::to_string(id.local_world_size));
  id.generation = env::get_int("TENAX_GENERATION", 0);
  require_range("TENAX_GENERATION", id.generation, 0, std::numeric_limits<std::int64_t>::max(), "must be >= 0");
  id.restart_count = env::get_int("TENAX_RESTART_COUNT", 0);
  require_range("TENAX_RESTART_COUNT", id.restart_count, 0, std::numeric_limits<std::int64_t>::max(), "must be >= 0");
  return id;
}

std::int64_t stored_int(Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  const std::vector<char> raw = store.get(key, timeout);
  const std::string text(raw.begin(), raw.end());
  try {
    std::size_t used = 0;
    const std::int64_t value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw RendezvousError("the rendezvous store holds '" + text + "' under " + key + ", not a number");
}

// The store as the mesh connect of a recovering generation sees it: every wait gives up as soon
// as the agent declares a newer generation (a peer was lost while this one formed), so a second
// failure during healing costs one more declaration, not a connect timeout.
class SupersededWatch final : public Store {
 public:
  SupersededWatch(Store& view, Store& base, std::int64_t generation)
      : view_(view), base_(base), generation_(generation) {}

  void set(const std::string& key, const std::vector<char>& value) override { view_.set(key, value); }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    wait({key}, timeout);
    return view_.get(key, timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return view_.add(key, delta); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      try {
        view_.wait(keys, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(50)));
        return;
      } catch (const TimeoutError&) {
        const std::int64_t latest = stored_int(base_, kLatestKey, std::chrono::seconds(5));
        if (latest > generation_) {
          throw PeerLostError("generation " + std::to_string(generation_) + " was superseded by generation " +
                              std::to_string(latest) + " while it formed (another peer was lost)");
        }
        if (left.count() <= 50) throw;
      }
    }
  }

 private:
  Store& view_;
  Store& base_;
  std::int64_t generation_;
};

struct JoinedGeneration {
  std::int64_t generation = 0;
  int rank = 0;
  int world_size = 1;
  std::unique_ptr<Communicator> communicator;
};

// In-process recovery: the communicator of the newest generation the agent declared, from
// `first` on, as local rank `local_rank` of node `node_id` (the node's layout there gives the
// rank and the world size: a lost node renumbers the others and shrinks the world). A
// generation that loses a peer while it forms is left for the next one.
JoinedGeneration join_declared_generation(Store& base, std::int64_t first, const std::string& node_id, int local_rank,
                                          const std::string& hostname, std::chrono::milliseconds connect_timeout,
                                          std::chrono::milliseconds timeout, detail::GenerationWatch* generations) {
  const std::string who = "local rank " + std::to_string(local_rank) + " of node " + node_id;
  auto log = logger("tenax.elastic");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()),
                    std::chrono::milliseconds(0));
  };
  std::int64_t target = first;
  for (;;) {
    try {
      base.wait({declared_key(target)}, left());
    } catch (const TimeoutError&) {
      throw TimeoutError(who + ": the agent declared no generation " + std::to_string(target) + " within " +
                         std::to_string(timeout.count()) + " ms; is `tenax run` still alive?");
    }
    target = std::max(target, stored_int(base, kLatestKey, left()));
    try {
      // Every node's agent writes its layout before it declares, but another node's agent may
      // have declared this generation first; a generation superseded meanwhile is skipped.
      SupersededWatch base_watch(base, base, target);
      const std::vector<char> raw = base_watch.get(layout_key(target, node_id), left());
      const std::string text(raw.begin(), raw.end());
      const std::optional<NodeLayout> layout = parse_node_layout(text);
      if (!layout) {
        throw RendezvousError(who + ": the agent's layout '" + text + "' for generation " + std::to_string(target) +
                              " is not '<rank offset> <world size>'");
      }
      const int rank = layout->rank_offset + local_rank;
      if (rank >= layout->world_size) {
        throw RendezvousError(who + ": rank " + std::to_string(rank) + " is outside generation " +
                              std::to_string(target) + "'s world of " + std::to_string(layout->world_size));
      }
      PrefixStore view(generation_prefix(target), base);
      SupersededWatch watch(view, base, target);
      CommunicatorOptions options;
      options.hostname = hostname;
      options.timeout = std::max(std::min(connect_timeout, left()), std::chrono::milliseconds(1));
      // A peer lost while this generation forms or heals: the next declaration releases us.
      if (generations) options.abort = generations->watch(target);
      // A world shrunk to one rank needs no peers (and no connect).
      return {target, rank, layout->world_size,
              layout->world_size == 1
                  ? make_local_communicator()
                  : make_communicator(backend_from_env(), watch, rank, layout->world_size, options)};
    } catch (const PeerLostError& e) {
      log->warn("{}: generation {} did not form ({}); joining the next one", who, target, e.what());
      ++target;
    }
  }
}

// A warm spare: started with the job's environment but no rank of its own, it has loaded
// libtorch and run the program up to here when the agent hands it a lost rank's place.
// It waits as long as the job runs (the agent stops its spares when the job ends).
void wait_for_spare_assignment(Store& base, WorkerIdentity& id, const std::string& node_id, int spare_id) {
  logger("tenax.elastic")->info("warm spare {} of node {}: waiting for a rank to take over", spare_id, node_id);
  std::vector<char> raw;
  for (;;) {
    try {
      raw = base.get(spare_key(node_id, spare_id), std::chrono::hours(1));
      break;
    } catch (const TimeoutError&) {
    }
  }
  const std::string text(raw.begin(), raw.end());
  const std::optional<SpareAssignment> assignment = parse_spare_assignment(text);
  if (!assignment || assignment->local_rank >= id.local_world_size) {
    throw RendezvousError("warm spare " + std::to_string(spare_id) + ": the agent's assignment '" + text +
                          "' is not '<local rank> <generation> <restart count>' with a local rank below "
                          "LOCAL_WORLD_SIZE=" +
                          std::to_string(id.local_world_size));
  }
  // The rank and the world size come with the generation it joins (join_declared_generation).
  id.local_rank = assignment->local_rank;
  id.generation = assignment->generation;
  id.restart_count = assignment->restart_count;
  id.replacement = true;
  ::setenv("LOCAL_RANK", std::to_string(id.local_rank).c_str(), 1);
  ::setenv("TENAX_RESTART_COUNT", std::to_string(id.restart_count).c_str(), 1);
  ::setenv("TORCHELASTIC_RESTART_COUNT", std::to_string(id.restart_count).c_str(), 1);
  ::unsetenv(kSpareIdVariable);
}

// The program may read the torchrun variables itself: they say who this process is now.
void export_rank(const WorkerIdentity& id) {
  ::setenv("RANK", std::to_string(id.rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(id.world_size).c_str(), 1);
  ::setenv("TENAX_GENERATION", std::to_string(id.generation).c_str(), 1);
}

}  // namespace

WorkerContext WorkerContext::from_env(std::chrono::milliseconds timeout) {
  if (!env::get("RANK")) {
    // Not started by a launcher: one process, nothing to rendezvous with.
    return WorkerContext(WorkerIdentity{}, nullptr, make_local_communicator());
  }
  return from_tenax_run(timeout, nullptr);
}

WorkerContext WorkerContext::from_tenax_run(std::chrono::milliseconds timeout, std::unique_ptr<Communicator> given) {
  WorkerIdentity id = identity_from_env();
  const bool in_process = env::get(kRecoveryVariable).value_or("") == kRecoveryInProcess;
  // -1: not a spare.
  const int spare_id = env::get(kSpareIdVariable) ? int_var(kSpareIdVariable, env::require_int(kSpareIdVariable)) : -1;
  const std::string node_id = env::get(kNodeIdVariable).value_or("local");
  id.replacement = env::get(kReplacementVariable).value_or("") == "1";
  if (spare_id >= 0)
    set_log_identity({-1, static_cast<int>(id.generation), "spare"});
  else
    set_log_identity({id.rank, static_cast<int>(id.generation), "worker"});

  const auto endpoint = env::get("TENAX_RDZV_ENDPOINT");
  if (!endpoint && id.world_size > 1) {
    throw ConfigError("TENAX_RDZV_ENDPOINT is not set but WORLD_SIZE=" + std::to_string(id.world_size) +
                      "; start this program with `tenax run` or set it to the rendezvous service (tcp://host:port)");
  }
  // The job's keys, when the launcher uses CURVE: an unreadable or foreign file is a ConfigError.
  std::optional<JobKeys> keys;
  if (const auto keys_file = env::get(kJobKeysVariable); keys_file && !keys_file->empty()) {
    keys = read_job_keys(*keys_file);
  }
  std::unique_ptr<Store> base;
  std::unique_ptr<Store> store;
  if (endpoint) {
    base = connect_store(*endpoint, timeout, keys);
    if (spare_id >= 0) {
      if (given) throw ConfigError(std::string(kSpareIdVariable) + " is set: a warm spare builds its own communicator");
      wait_for_spare_assignment(*base, id, node_id, spare_id);
    }
    store = std::make_unique<PrefixStore>(generation_prefix(id.generation), *base);
  } else if (spare_id >= 0) {
    throw ConfigError(std::string(kSpareIdVariable) +
                      " is set but TENAX_RDZV_ENDPOINT is not; spares are started by "
                      "`tenax run --spares K`");
  }
  GlooOptions options;
  options.hostname = gloo_hostname(id);
  options.timeout = timeout;
  if (given && (given->rank() != id.rank || given->size() != id.world_size)) {
    throw ConfigError("the communicator passed to from_launch is rank " + std::to_string(given->rank()) + " of " +
                      std::to_string(given->size()) + " but `tenax run` started this process as RANK=" +
                      std::to_string(id.rank) + " of WORLD_SIZE=" + std::to_string(id.world_size) +
                      "; under `tenax run` pass no communicator (one is built from the agent's store)");
  }
  std::unique_ptr<Communicator> communicator;
  // Under in-process recovery every communicator of this process is released as soon as the
  // agent declares the generation after its own (generation_watch.h).
  std::unique_ptr<detail::GenerationWatch> watch;
  if (in_process && endpoint && !given) {
    watch = std::make_unique<detail::GenerationWatch>(
        [endpoint = *endpoint, timeout, keys] { return connect_store(endpoint, timeout, keys); });
  }
  if (given) {
    communicator = std::move(given);
  } else if (in_process && id.replacement && base) {
    // Another loss while this replacement starts makes the agent declare a newer generation.
    JoinedGeneration joined;
    try {
      joined = join_declared_generation(*base, id.generation, node_id, id.local_rank, options.hostname, timeout,
                                        timeout, watch.get());
    } catch (const Error& e) {
      // One line, under this process's identity, before it exits: the agent replaces it.
      logger("tenax.elastic")
          ->error("{} of node {} (replacing a lost rank from generation {}) cannot join the job: {}",
                  spare_id >= 0 ? "warm spare " + std::to_string(spare_id) : std::string("a new process"), node_id,
                  id.generation, e.what());
      throw;
    }
    id.generation = joined.generation;
    id.rank = joined.rank;
    id.world_size = joined.world_size;
    export_rank(id);
    communicator = std::move(joined.communicator);
    store = std::make_unique<PrefixStore>(generation_prefix(id.generation), *base);
    set_log_identity({id.rank, static_cast<int>(id.generation), "worker"});
  } else if (id.world_size == 1) {
    communicator = make_local_communicator();
  } else {
    CommunicatorOptions communicator_options;
    communicator_options.hostname = options.hostname;
    communicator_options.timeout = timeout;
    if (watch) communicator_options.abort = watch->watch(id.generation);
    communicator = make_communicator(backend_from_env(), *store, id.rank, id.world_size, communicator_options);
  }

  std::function<StoreFactory(std::int64_t)> store_factory_for;
  StoreFactory open_store;
  if (endpoint) {
    store_factory_for = [endpoint = *endpoint, timeout, keys](std::int64_t generation) -> StoreFactory {
      return [endpoint, generation, timeout, keys]() -> std::unique_ptr<Store> {
        return std::make_unique<OwningPrefixStore>(generation_prefix(generation),
                                                   connect_store(endpoint, timeout, keys));
      };
    };
    open_store = store_factory_for(id.generation);
  }
  std::optional<GenerationFence> fence;
  if (const auto fence_dir = env::get(kFenceDirVariable); fence_dir && !fence_dir->empty()) fence.emplace(*fence_dir);
  WorkerContext context(id, std::move(store), std::move(communicator), std::move(open_store), std::move(fence));
  context.base_store_ = std::move(base);
  context.watch_ = std::move(watch);
  context.in_process_ = in_process && !given && context.base_store_ != nullptr;
  if (context.in_process_) {
    // A write to a peer that just died must fail as an error this process recovers from (Gloo
    // raises it), not kill the process with SIGPIPE: seen when the source of a heal was sending
    // to a replacement that died mid-transfer.
    ::signal(SIGPIPE, SIG_IGN);
  }
  context.store_factory_for_ = std::move(store_factory_for);
  context.node_id_ = node_id;
  context.gloo_hostname_ = options.hostname;
  context.connect_timeout_ = timeout;
  logger("tenax.elastic")
      ->info("rank {} of {} (local {} of {}), generation {}, restart {}", id.rank, id.world_size, id.local_rank,
             id.local_world_size, id.generation, id.restart_count);
  return context;
}

WorkerContext::WorkerContext(WorkerIdentity identity, std::unique_ptr<Store> store,
                             std::unique_ptr<Communicator> communicator, StoreFactory open_store,
                             std::optional<GenerationFence> fence)
    : identity_(identity),
      store_(std::move(store)),
      communicator_(std::move(communicator)),
      open_store_(std::move(open_store)),
      fence_(std::move(fence)) {
  if (!communicator_) throw ConfigError("WorkerContext needs a communicator");
  if (communicator_->rank() != identity_.rank || communicator_->size() != identity_.world_size) {
    throw ConfigError("WorkerContext: the communicator is rank " + std::to_string(communicator_->rank()) + " of " +
                      std::to_string(communicator_->size()) + " but the identity says rank " +
                      std::to_string(identity_.rank) + " of " + std::to_string(identity_.world_size));
  }
}

WorkerContext::WorkerContext(WorkerContext&& other) noexcept = default;

WorkerContext& WorkerContext::operator=(WorkerContext&& other) noexcept {
  if (this != &other) {
    release();
    identity_ = other.identity_;
    base_store_ = std::move(other.base_store_);
    store_ = std::move(other.store_);
    communicator_ = std::move(other.communicator_);
    open_store_ = std::move(other.open_store_);
    fence_ = std::move(other.fence_);
    hosted_service_ = std::move(other.hosted_service_);
    watch_ = std::move(other.watch_);
    in_process_ = other.in_process_;
    store_factory_for_ = std::move(other.store_factory_for_);
    gloo_hostname_ = std::move(other.gloo_hostname_);
    connect_timeout_ = other.connect_timeout_;
  }
  return *this;
}

std::unique_ptr<Store> WorkerContext::open_store() const {
  if (open_store_) return open_store_();
  if (identity_.world_size == 1) return std::make_unique<InMemoryStore>();
  throw RendezvousError("rank " + std::to_string(identity_.rank) + " of " + std::to_string(identity_.world_size) +
                        ": this WorkerContext has no rendezvous store to open a connection to; build it with "
                        "from_env() under `tenax run`, or pass a StoreFactory");
}

WorkerContext::~WorkerContext() { release(); }

void WorkerContext::release() noexcept {
  // Order matters: the communicator may hold the store, and the prefix view borrows the base.
  communicator_.reset();
  watch_.reset();
  store_.reset();
  base_store_.reset();
  hosted_service_.reset();
}

void WorkerContext::announce_in_process_recovery() {
  if (in_process_ && base_store_) base_store_->add(ready_key(identity_.generation), 1);
}

bool WorkerContext::generation_superseded() {
  if (!in_process_ || !store_) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_superseded_check_) return false;
  next_superseded_check_ = now + kSupersededCheckInterval;
  // The mark the agent adds under this generation's prefix when it declares the next one: one
  // round trip that never blocks.
  return store_->add(kSupersededKey, 0) > 0;
}

void WorkerContext::rejoin(std::chrono::milliseconds timeout) {
  const std::string who = "rank " + std::to_string(identity_.rank) + " of " + std::to_string(identity_.world_size);
  if (!in_process_ || !base_store_ || !store_factory_for_) {
    throw RendezvousError(who +
                          ": cannot rejoin in process; this job restarts its processes instead (`tenax run "
                          "--recovery in-process` with the TCP or Gloo communicator it builds)");
  }
  // Blocked on the job from here on (the agents declare the next generation, the peers
  // connect): --hang-timeout's beacon says so, as it does in the collective that just failed.
  const PeerWaitGuard waiting;
  // Closing this rank's connections first: a peer blocked on a message from this rank fails
  // now instead of at its collective's timeout.
  communicator_.reset();
  store_.reset();
  JoinedGeneration joined =
      join_declared_generation(*base_store_, identity_.generation + 1, node_id_, identity_.local_rank, gloo_hostname_,
                               connect_timeout_, timeout, watch_.get());
  if (joined.rank != identity_.rank || joined.world_size != identity_.world_size) {
    logger("tenax.elastic")
        ->warn("rank {} of {} is rank {} of {} in generation {}", identity_.rank, identity_.world_size, joined.rank,
               joined.world_size, joined.generation);
  }
  identity_.generation = joined.generation;
  identity_.rank = joined.rank;
  identity_.world_size = joined.world_size;
  export_rank(identity_);
  communicator_ = std::move(joined.communicator);
  store_ = std::make_unique<PrefixStore>(generation_prefix(joined.generation), *base_store_);
  open_store_ = store_factory_for_(joined.generation);
  set_log_identity({identity_.rank, static_cast<int>(joined.generation), "worker"});
}

Communicator& WorkerContext::communicator() {
  if (!communicator_) {
    throw RendezvousError("rank " + std::to_string(identity_.rank) +
                          ": the communicator was released by finalize(); build a new WorkerContext");
  }
  return *communicator_;
}

bool WorkerContext::finalize(std::chrono::milliseconds timeout) {
  if (!communicator_) return true;
  bool ok = true;
  try {
    communicator_->barrier(timeout);
  } catch (const ConfigError&) {
    throw;  // a timeout that is not positive: the caller's mistake, not the peers'
  } catch (const Error& e) {
    logger("tenax.elastic")->warn("finalize: peers did not reach the final barrier: {}", e.what());
    ok = false;
  }
  release();
  return ok;
}

}  // namespace tenax::elastic
