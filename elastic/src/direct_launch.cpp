// WorkerContext::from_launch: ranks started by srun or mpirun without the `tenax run` agent
// (the steps are in direct_launch.h).
#include "tenax/core/endpoint.h"
#include "tenax/elastic/direct_launch.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <utility>
#include <vector>

#include <unistd.h>

#include "rdzv_discovery.h"
#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/backend.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/kv_service.h"
#include "tenax/elastic/nccl_communicator.h"
#if defined(TENAX_WITH_MPI)
#include "tenax/elastic/mpi_communicator.h"
#endif

namespace tenax::elastic {
namespace {

namespace fs = std::filesystem;

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "127.0.0.1";
  return host;
}

// How the other nodes reach this one: Slurm's name for it, else the host name.
std::string node_name(const LaunchIdentity& launch) {
  return launch.node_name.empty() ? host_name() : launch.node_name;
}

std::string who(const WorkerIdentity& id, const LaunchIdentity& launch) {
  return "rank " + std::to_string(id.rank) + " of " + std::to_string(id.world_size) + " (" +
         launch_mode_name(launch.mode) + (launch.launch_id.empty() ? "" : ", launch " + launch.launch_id) + ")";
}

std::chrono::milliseconds launch_timeout(const LaunchOptions& options) {
  const auto seconds = env::get_int("TENAX_RDZV_TIMEOUT", -1);
  if (seconds == -1) return options.timeout();
  if (seconds <= 0) throw ConfigError("TENAX_RDZV_TIMEOUT=" + std::to_string(seconds) + " must be > 0 seconds");
  return std::chrono::seconds(seconds);
}

std::unique_ptr<Communicator> fortran_mpi_communicator([[maybe_unused]] std::int32_t handle) {
#if defined(TENAX_WITH_MPI)
  return make_mpi_communicator_from_fortran(static_cast<MPI_Fint>(handle));
#else
  throw ConfigError(
      "an MPI communicator was asked for, but this Tenax was built without MPI (TENAX_WITH_MPI=OFF): "
      "rebuild with MPI (Debian: libopenmpi-dev), or initialise without an MPI communicator (Gloo)");
#endif
}

// Ranks that share a host name form a node: local rank = earlier ranks on the same host.
void local_ranks_from(Communicator& comm, WorkerIdentity& id, const std::string& host,
                      std::chrono::milliseconds timeout) {
  const std::vector<std::string> hosts = allgather_strings(comm, host, timeout);
  id.local_rank = static_cast<int>(std::count(hosts.begin(), hosts.begin() + id.rank, host));
  id.local_world_size = static_cast<int>(std::count(hosts.begin(), hosts.end(), host));
}

// The endpoint and keys of rank 0's store, from rank 0 to all over `comm` (length, then text).
// A rank 0 that could not start the store sends length 0, so that the others fail too instead
// of waiting in a broadcast that MPI never times out.
RdzvAddress broadcast_address(Communicator& comm, const RdzvAddress& mine, bool failed, const std::string& me,
                              std::chrono::milliseconds timeout) {
  std::string text = failed ? std::string()
                            : mine.endpoint + "\n" + mine.keys.server_public + "\n" + mine.keys.server_secret + "\n" +
                                  mine.keys.client_public + "\n" + mine.keys.client_secret;
  std::uint64_t length = text.size();
  comm.broadcast(&length, sizeof(length), 0, timeout);
  if (failed) return {};  // rank 0 rethrows its own error
  if (length == 0) {
    throw RendezvousError(me + ": rank 0 could not start the key-value store; its log says why");
  }
  text.resize(length);
  comm.broadcast(text.data(), text.size(), 0, timeout);
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  lines.push_back(text.substr(start));
  if (lines.size() != 5) throw RendezvousError("the rendezvous address broadcast by rank 0 is malformed");
  return RdzvAddress{lines[0], JobKeys{lines[1], lines[2], lines[3], lines[4]}};
}

fs::path discovery_directory(const WorkerIdentity& id) {
  if (const auto dir = env::get("TENAX_RDZV_DIR"); dir && !dir->empty()) return *dir;
  if (const auto submit = env::get("SLURM_SUBMIT_DIR"); submit && !submit->empty()) {
    return fs::path(*submit) / ".tenax-rdzv";
  }
  if (id.local_world_size == id.world_size) {
    // Every rank is on this node, so a node-local directory is shared by all of them.
    std::error_code ec;
    return fs::temp_directory_path(ec) / ("tenax-rdzv-" + std::to_string(::getuid()));
  }
  throw ConfigError("a " + std::to_string(id.world_size) +
                    "-rank launch over several nodes without TENAX_RDZV_ENDPOINT needs a directory shared by every "
                    "node to find rank 0's store: set TENAX_RDZV_DIR (or run under sbatch, which sets "
                    "SLURM_SUBMIT_DIR), or pass an MPI communicator");
}

// Every rank announces itself and waits for all the others, so that a rank that never comes is
// named here (Gloo's own connect would only say that a key is missing).
void check_in(Store& store, const WorkerIdentity& id, const std::string& me, const std::string& endpoint,
              const fs::path& dir, std::chrono::milliseconds timeout) {
  store.set("launch/rank/" + std::to_string(id.rank), {'1'});
  std::vector<std::string> keys;
  for (int r = 0; r < id.world_size; ++r) keys.push_back("launch/rank/" + std::to_string(r));
  try {
    store.wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 0; r < id.world_size; ++r) {
      try {
        store.get(keys[static_cast<std::size_t>(r)], std::chrono::milliseconds(0));
      } catch (const TimeoutError&) {
        missing.push_back(r);
      }
    }
    std::string names;
    for (std::size_t i = 0; i < missing.size() && i < 32; ++i) names += (i ? ", " : "") + std::to_string(missing[i]);
    if (missing.size() > 32) names += ", ... (" + std::to_string(missing.size()) + " in all)";
    throw TimeoutError(me + ": rank(s) " + names + " did not join the rendezvous at " + endpoint + " within " +
                       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                       " s; check that the launcher started all " + std::to_string(id.world_size) +
                       " tasks of this program (srun -n / mpirun -n), that they reached Tenax's init (their logs), "
                       "that every node can reach " +
                       endpoint + " (TENAX_RDZV_HOST picks the address)" +
                       (dir.empty() ? "" : ", and that TENAX_RDZV_DIR=" + dir.string() + " is shared by every node") +
                       "; TENAX_RDZV_TIMEOUT (seconds) waits longer");
  }
}

}  // namespace

bool built_with_mpi() {
#if defined(TENAX_WITH_MPI)
  return true;
#else
  return false;
#endif
}

WorkerContext WorkerContext::from_launch(const LaunchOptions& options, std::unique_ptr<Communicator> given) {
  const std::chrono::milliseconds timeout = launch_timeout(options);
  if (const auto handle = options.mpi_fortran_comm()) {
    if (given) throw ConfigError("from_launch: pass a communicator or LaunchOptions::mpi_fortran_comm, not both");
    given = fortran_mpi_communicator(*handle);
  }
  const LaunchIdentity launch = parse_launch_environment(launch_environment());
  // A singleton MPI_Init (a process that `tenax run` or a plain shell started) has nothing to add.
  if (given && given->size() == 1) given.reset();
  if (launch.mode == LaunchMode::kTenaxRun) return from_tenax_run(timeout, std::move(given));
  if (launch.mode == LaunchMode::kSingleProcess && !given) {
    return WorkerContext(WorkerIdentity{}, nullptr, make_local_communicator());
  }

  WorkerIdentity id = launch.worker;
  if (given) {
    // The caller's communicator defines the ranks (it may be a part of MPI_COMM_WORLD).
    id.rank = given->rank();
    id.world_size = given->size();
    local_ranks_from(*given, id, node_name(launch), timeout);
  }
  set_log_identity({id.rank, static_cast<int>(id.generation), "worker"});
  const std::string me = who(id, launch);
  const bool one_node = id.local_world_size == id.world_size;

  // Rank 0 removes its discovery files when it leaves, having formed the world or not: once
  // every rank has checked in, or on the way out of a failed launch (its store dies with it).
  struct RemoveDiscoveryFiles {
    fs::path dir;
    std::string launch_id;
    ~RemoveDiscoveryFiles() {
      if (!dir.empty()) remove_rdzv_address(dir, launch_id);
    }
  } cleanup;
  std::unique_ptr<KvService> service;
  std::optional<JobKeys> keys;
  std::string endpoint;
  fs::path discovery_dir;
  bool shared_store = false;
  if (const auto external = env::get("TENAX_RDZV_ENDPOINT"); external && !external->empty()) {
    shared_store = true;
    endpoint = *external;
    if (const auto keys_file = env::get(kJobKeysVariable); keys_file && !keys_file->empty()) {
      keys = read_job_keys(*keys_file);
    }
  } else if (id.world_size > 1) {
    RdzvAddress address;
    std::exception_ptr failure;
    if (id.rank == 0) {
      try {
        address.keys = JobKeys::generate();
        service = std::make_unique<KvService>(address.keys);
        const std::string bound = service->start(one_node ? "tcp://127.0.0.1:0" : "tcp://*:0");
        const std::string host = env::get("TENAX_RDZV_HOST").value_or(one_node ? "127.0.0.1" : node_name(launch));
        address.endpoint = Endpoint::parse(bound).with_host(host).str();
      } catch (const Error&) {
        if (!given) throw;
        failure = std::current_exception();
      }
    }
    if (given) {
      address = broadcast_address(*given, address, failure != nullptr, me, timeout);
      if (failure) std::rethrow_exception(failure);
    } else {
      if (launch.launch_id.empty()) {
        throw ConfigError(me +
                          ": no job id names this launch's rendezvous files (no SLURM_JOB_ID, no Open MPI job "
                          "id): set TENAX_JOB_ID to a value unique to this launch, or TENAX_RDZV_ENDPOINT");
      }
      discovery_dir = discovery_directory(id);
      if (id.rank == 0) {
        cleanup.dir = discovery_dir;
        cleanup.launch_id = launch.launch_id;
        publish_rdzv_address(discovery_dir, launch.launch_id, address);
      } else {
        address = await_rdzv_address(discovery_dir, launch.launch_id, timeout, me);
      }
    }
    endpoint = address.endpoint;
    keys = address.keys;
  }

  // A store of our own holds this launch only; a shared one (TENAX_RDZV_ENDPOINT) may serve
  // other launches of the same generation number, so their keys are kept apart by the launch id.
  const std::string prefix = (!shared_store || launch.launch_id.empty() ? "" : "launch/" + launch.launch_id + "/") +
                             generation_prefix(id.generation);
  std::unique_ptr<Store> base;
  std::unique_ptr<Store> store;
  if (!endpoint.empty()) {
    base = connect_store(endpoint, timeout, keys);
    store = std::make_unique<PrefixStore>(prefix, *base);
  }
  std::unique_ptr<Communicator> communicator;
  const char* backend = "the given communicator";
  if (given) {
    communicator = std::move(given);
  } else if (id.world_size == 1) {
    communicator = make_local_communicator();
    backend = "none (one rank)";
  } else {
    const Backend chosen =
        resolve_backend(backend_from_env(), nccl_built(), nccl_built() ? visible_cuda_devices() : 0, gloo_built());
    backend = backend_name(chosen);
    if (!store) throw ConfigError(me + ": no store to connect the ranks (set TENAX_RDZV_ENDPOINT)");
    check_in(*store, id, me, endpoint, discovery_dir, timeout);
    CommunicatorOptions options;
    options.hostname = env::get("TENAX_GLOO_HOSTNAME").value_or(one_node ? "127.0.0.1" : node_name(launch));
    options.timeout = timeout;
    communicator = make_communicator(chosen, *store, id.rank, id.world_size, options);
  }

  StoreFactory open_store;
  if (!endpoint.empty()) {
    open_store = [endpoint, prefix, timeout, keys]() -> std::unique_ptr<Store> {
      return std::make_unique<OwningPrefixStore>(prefix, connect_store(endpoint, timeout, keys));
    };
  }
  std::optional<GenerationFence> fence;
  if (const auto fence_dir = env::get(kFenceDirVariable); fence_dir && !fence_dir->empty()) fence.emplace(*fence_dir);
  WorkerContext context(id, std::move(store), std::move(communicator), std::move(open_store), std::move(fence));
  context.base_store_ = std::move(base);
  context.hosted_service_ = std::move(service);
  logger("tenax.elastic")
      ->info("{}: local {} of {}, generation {}, restart {}, store {}, collectives over {}", me, id.local_rank,
             id.local_world_size, id.generation, id.restart_count, endpoint.empty() ? "none" : endpoint, backend);
  return context;
}

}  // namespace tenax::elastic
