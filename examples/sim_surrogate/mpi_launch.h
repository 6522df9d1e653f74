// The MPI side of a launch by mpirun: whether this process was started by mpirun, and the
// program's own MPI_Init / MPI_Finalize on MPI_COMM_WORLD. Built without MPI (no MPI found by
// CMake), started_by_mpirun() still answers and the rest throws std::runtime_error.
// Thread-safety: main thread only (MPI_Init's thread level is MPI_THREAD_SINGLE).
#pragma once

#include <cstdint>

namespace sim {

/// Whether the example was built with MPI (SIM_WITH_MPI).
bool built_with_mpi();
/// Whether mpirun / mpiexec started this process (Open MPI's OMPI_COMM_WORLD_SIZE or Hydra's
/// PMI_SIZE), as opposed to `tenax run` (RANK) or srun (SLURM_PROCID) or nothing.
bool started_by_mpirun();

/// MPI_Init (not called under tenax run or srun, where there is no MPI job to join).
void mpi_init(int* argc, char*** argv);
int mpi_rank();
int mpi_world_size();
/// MPI_COMM_WORLD as a Fortran handle (MPI_Comm_c2f), for tenax_init_mpi.
std::int32_t mpi_world_fortran_handle();
void mpi_finalize();

}  // namespace sim
