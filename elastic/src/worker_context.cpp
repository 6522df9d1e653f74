#include "tenax/elastic/worker_context.h"

#include <limits>
#include <stdexcept>
#include <utility>

#include <unistd.h>

#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/kv_service.h"

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

// Where this rank's Gloo device binds; see the header comment.
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
  require_range("TENAX_RESTART_COUNT", id.restart_count, 0, std::numeric_limits<std::int64_t>::max(),
                "must be >= 0");
  return id;
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
  const WorkerIdentity id = identity_from_env();
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
    store = std::make_unique<PrefixStore>(generation_prefix(id.generation), *base);
  }
  GlooOptions options;
  options.hostname = gloo_hostname(id);
  options.timeout = timeout;
  if (given && (given->rank() != id.rank || given->size() != id.world_size)) {
    throw ConfigError("the communicator passed to from_launch is rank " + std::to_string(given->rank()) + " of " +
                      std::to_string(given->size()) + " but `tenax run` started this process as RANK=" +
                      std::to_string(id.rank) + " of WORLD_SIZE=" + std::to_string(id.world_size) +
                      "; under `tenax run` pass no communicator (Gloo is built from the agent's store)");
  }
  std::unique_ptr<Communicator> communicator =
      given                 ? std::move(given)
      : id.world_size == 1 ? make_local_communicator()
                           : make_gloo_communicator(*store, id.rank, id.world_size, options);

  StoreFactory open_store;
  if (endpoint) {
    open_store = [endpoint = *endpoint, generation = id.generation, timeout, keys]() -> std::unique_ptr<Store> {
      return std::make_unique<OwningPrefixStore>(generation_prefix(generation), connect_store(endpoint, timeout, keys));
    };
  }
  std::optional<GenerationFence> fence;
  if (const auto fence_dir = env::get(kFenceDirVariable); fence_dir && !fence_dir->empty()) fence.emplace(*fence_dir);
  WorkerContext context(id, std::move(store), std::move(communicator), std::move(open_store), std::move(fence));
  context.base_store_ = std::move(base);
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
  if (!communicator_) throw std::invalid_argument("WorkerContext needs a communicator");
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
  store_.reset();
  base_store_.reset();
  hosted_service_.reset();
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
  } catch (const Error& e) {
    logger("tenax.elastic")->warn("finalize: peers did not reach the final barrier: {}", e.what());
    ok = false;
  }
  release();
  return ok;
}

}  // namespace tenax::elastic
