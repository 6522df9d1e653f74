// Ranks started directly by srun or mpirun, without the `tenax run` agent (issue 11, point 4):
// who this process is, and how its WorkerContext finds its peers. Recovery is then a Slurm
// requeue (SLURM_RESTART_COUNT), not an agent's restart.
//
// WorkerContext::from_launch(options, communicator) (worker_context.h) does, in order:
//  1. Identity, from parse_launch_environment() of this process's environment, first match wins:
//     - `tenax run` (RANK set): exactly WorkerContext::from_env();
//     - mpirun of Open MPI: OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE;
//     - mpirun of MPICH (hydra): PMI_RANK/PMI_SIZE, MPI_LOCALRANKID/MPI_LOCALNRANKS;
//     - srun: SLURM_PROCID, SLURM_STEP_NUM_TASKS (or SLURM_NTASKS), SLURM_LOCALID, and the tasks
//       of this node from SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE, "2(x3),1") at
//       SLURM_NODEID, or SLURM_NTASKS_PER_NODE;
//     - none of these: a single process (world size 1).
//     The MPI launchers win over Slurm's variables because mpirun inside an sbatch script
//     inherits the batch step's SLURM_PROCID. Generation = TENAX_GENERATION, else
//     SLURM_RESTART_COUNT, else 0.
//     With a `communicator` of size > 1 (e.g. make_mpi_communicator(solver_comm)), the ranks are
//     those of that communicator, and ranks sharing a host name form a node (local rank/size).
//     A communicator of size 1 (a singleton MPI_Init, e.g. under `tenax run`) is ignored.
//  2. The key-value store (it coordinates checkpoint commits, and bootstraps Gloo):
//     TENAX_RDZV_ENDPOINT if set (a store endpoint, e.g. of `tenax rdzv`; CURVE keys from
//     TENAX_KEYS_FILE); else rank 0 hosts a KvService with fresh CURVE keys (DESIGN decision 9)
//     and the other ranks learn its endpoint and keys by a broadcast over the communicator when
//     one was given, else from two files in TENAX_RDZV_DIR (default $SLURM_SUBMIT_DIR/.tenax-rdzv;
//     on a single node, a private directory under the system's temporary directory):
//     <launch id>.keys (mode 0600) and <launch id>.endpoint, named by SLURM_JOB_ID, SLURM_STEP_ID
//     and SLURM_RESTART_COUNT (or Open MPI's job id, or TENAX_JOB_ID) so that a requeued job never
//     reads the files of its previous run. Rank 0 deletes them once every rank has connected.
//     Keys live under "gen/<generation>/" (in a shared TENAX_RDZV_ENDPOINT store, under
//     "launch/<launch id>/gen/<generation>/", so that two launches never read each other's).
//     The service binds 127.0.0.1 when every rank is on this node, else all interfaces, and is
//     reached as SLURMD_NODENAME (else this host's name), or TENAX_RDZV_HOST if set.
//  3. The communicator: the given one when its size is > 1; else TENAX_BACKEND's over the store
//     (as from_env), each rank bound to TENAX_GLOO_HOSTNAME, else 127.0.0.1 on a single node, else
//     SLURMD_NODENAME / this host's name; before it connects, every rank checks in and a rank
//     that does not come within the timeout is named in a TimeoutError.
//  4. TENAX_FENCE_DIR as from_env: checkpoints commit only while the generation is current.
// Every wait is bounded by LaunchOptions::timeout, or TENAX_RDZV_TIMEOUT (seconds) when set;
// errors name the variable to set or the rank that is missing.
// Thread-safety: parse_launch_environment is pure; LaunchOptions is a plain value.
//
//   auto ctx = tenax::elastic::WorkerContext::from_launch(tenax::elastic::LaunchOptions());
//   // with MPI (mpi_communicator.h):
//   auto ctx = WorkerContext::from_launch(LaunchOptions(), make_mpi_communicator(MPI_COMM_WORLD));
//   // from a Fortran handle, without including <mpi.h> (what the C API's tenax_init_mpi does):
//   auto ctx = WorkerContext::from_launch(LaunchOptions().mpi_fortran_comm(fortran_comm));
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tenax/elastic/store.h"
#include "tenax/elastic/worker_context.h"

namespace tenax::elastic {

enum class LaunchMode : std::uint8_t { kSingleProcess, kTenaxRun, kOpenMpi, kMpich, kSlurm };

/// "single process", "tenax run", "mpirun (Open MPI)", "mpirun (MPICH)", "srun".
const char* launch_mode_name(LaunchMode mode);

/// Environment variables by name (a snapshot, so that parsing is a pure function).
using EnvironmentMap = std::map<std::string, std::string>;

struct LaunchIdentity {
  LaunchMode mode = LaunchMode::kSingleProcess;
  WorkerIdentity worker;
  /// Unique per job, step and requeue; names the rendezvous files ("" when the environment has
  /// none: set TENAX_JOB_ID). Only [A-Za-z0-9_.-].
  std::string launch_id;
  /// How peers reach this node: SLURMD_NODENAME ("" when unset: use the host name).
  std::string node_name;
};

/// Pure: the identity the variables describe (see the file comment). Throws ConfigError naming
/// the variable when one is not an integer or out of range (a rank outside its world, ...).
LaunchIdentity parse_launch_environment(const EnvironmentMap& env);

/// The variables parse_launch_environment and from_launch read, taken from this process.
EnvironmentMap launch_environment();

/// Options of WorkerContext::from_launch.
class LaunchOptions {
 public:
  /// Bound of each wait (store connect, discovery files, peers' check-in, Gloo's connect).
  /// TENAX_RDZV_TIMEOUT (whole seconds) in the environment overrides it.
  LaunchOptions& timeout(std::chrono::milliseconds value) {
    timeout_ = value;
    return *this;
  }
  /// Use MPI over this Fortran communicator handle (MPI_Fint, as MPI_Comm_c2f gives it): the same
  /// as passing make_mpi_communicator_from_fortran(handle). ConfigError when Tenax was built
  /// without MPI (TENAX_WITH_MPI=OFF).
  LaunchOptions& mpi_fortran_comm(std::int32_t handle) {
    mpi_fortran_comm_ = handle;
    return *this;
  }

  std::chrono::milliseconds timeout() const { return timeout_; }
  std::optional<std::int32_t> mpi_fortran_comm() const { return mpi_fortran_comm_; }

 private:
  std::chrono::milliseconds timeout_ = kDefaultStoreTimeout;
  std::optional<std::int32_t> mpi_fortran_comm_;
};

/// Whether this Tenax was built with the MPI communicator (TENAX_WITH_MPI).
bool built_with_mpi();

}  // namespace tenax::elastic
