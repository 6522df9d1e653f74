// The MPI Communicator: Tenax's collectives on the simulation's own fabric (DESIGN.md
// decision 11), for ranks that already share an MPI communicator (a solver launched by srun or
// mpirun). Built only when Tenax is configured with TENAX_WITH_MPI (the default when CMake finds
// MPI); this is the only Tenax header that includes <mpi.h>, so code that includes it is an MPI
// program and compiles with MPI's include path itself (mpicc/mpicxx, or MPI::MPI_CXX).
//
// The communicator works on an MPI_Comm_dup of the caller's communicator, so Tenax's traffic
// never matches the solver's messages, and sets MPI_ERRORS_RETURN on the duplicate: an MPI error
// becomes a PeerLostError naming the operation and the rank instead of MPI's default abort of the
// whole job. After an error every later call throws at once; build a new communicator.
//
// Time limits: MPI has no deadline per call, so the `timeout` arguments of the Communicator
// interface are accepted and ignored: a collective whose peer died blocks until the MPI library
// notices (Open MPI and MPICH end the job when a process of it dies; Slurm requeues it). abort()
// only marks the communicator, so that every later call throws PeerLostError at once; it cannot
// interrupt an MPI call already in progress (that needs ULFM's MPIX_Comm_revoke, which Debian's
// Open MPI and MPICH do not enable).
//
// Lifetime: construction is collective over `comm` (MPI_Comm_dup). The destructor frees the
// duplicate unless MPI is already finalised or the communicator was aborted or failed (freeing
// a communicator with a lost peer may block); it never waits on peers otherwise.
// Thread-safety: one thread at a time per instance, except abort(), which any thread may call.
// MPI must have been initialised (any thread level) by the caller, who also finalises it.
//
//   MPI_Init(&argc, &argv);
//   auto comm = tenax::elastic::make_mpi_communicator(MPI_COMM_WORLD);
//   comm->allreduce(grads.data(), grads.size(), ElementType::kFloat32, ReduceOp::kSum);
//   auto ctx = tenax::elastic::WorkerContext::from_launch({}, std::move(comm));  // direct_launch.h
#pragma once

#include <memory>

#include <mpi.h>

#include "tenax/elastic/communicator.h"

namespace tenax::elastic {

/// Collective over `comm`: duplicates it (MPI_Comm_dup) for Tenax's collectives. Throws
/// ConfigError when MPI is not initialised or already finalised, or `comm` is MPI_COMM_NULL;
/// PeerLostError when the duplication fails.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm);

/// As make_mpi_communicator, from a Fortran handle (MPI_Fint; `MPI_COMM_WORLD` of the mpi module
/// or mpi_f08's `comm%MPI_VAL`), converted with MPI_Comm_f2c. A separate name because MPI_Comm
/// and MPI_Fint are the same type (int) in MPICH.
std::unique_ptr<Communicator> make_mpi_communicator_from_fortran(MPI_Fint comm);

}  // namespace tenax::elastic
