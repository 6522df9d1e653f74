// How the ranks of the heat solver trade the rows at the edges of their strips, and how the
// final field comes together on rank 0. Two transports, chosen at start-up (main.cpp):
//   - MPI (MPI_Sendrecv with the neighbours on the program's own MPI_COMM_WORLD) when the job
//     was started by mpirun: the solver keeps its own fabric, as a simulation code does;
//   - Tenax's collectives (tenax_allgather of every rank's first and last rows) when it was
//     started by `tenax run` or a plain srun, where there is no MPI.
// Both move the same doubles, so the field is bit-identical whichever is used.
// Thread-safety: none; the solver's thread. Every call is collective.
#pragma once

#include <memory>
#include <vector>

#include "heat_solver.h"
#include "tenax.h"

namespace sim {

class HaloExchange {
 public:
  virtual ~HaloExchange() = default;
  /// Collective. Fills the strip's ghost rows from its neighbours' edge rows.
  virtual void exchange(HeatStrip& strip) = 0;
  /// Collective. Every rank's interior rows in rank order (the whole ny x nx field) on rank 0;
  /// empty on the other ranks.
  virtual std::vector<double> gather_field(const HeatStrip& strip) = 0;
  /// "mpi" or "tenax", for the progress output.
  virtual const char* name() const = 0;
};

/// Over tenax_allgather on `ctx` (borrowed: it must outlive the exchange).
std::unique_ptr<HaloExchange> make_tenax_halo(tenax_context* ctx, int rank, int world_size);

/// Over MPI_COMM_WORLD (MPI must be initialised: see mpi_launch.h). Throws std::runtime_error
/// when the example was built without MPI.
std::unique_ptr<HaloExchange> make_mpi_halo();

}  // namespace sim
