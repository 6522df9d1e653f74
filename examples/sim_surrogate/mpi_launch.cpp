#include "mpi_launch.h"

#include <cstdlib>
#include <stdexcept>

#ifdef SIM_WITH_MPI
#include <mpi.h>
#endif

namespace sim {

bool started_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

#ifdef SIM_WITH_MPI

bool built_with_mpi() { return true; }

void mpi_init(int* argc, char*** argv) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) throw std::runtime_error("MPI_Init failed");
}

int mpi_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int mpi_world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

std::int32_t mpi_world_fortran_handle() { return static_cast<std::int32_t>(MPI_Comm_c2f(MPI_COMM_WORLD)); }

void mpi_finalize() { MPI_Finalize(); }

#else

namespace {
[[noreturn]] void no_mpi() {
  throw std::runtime_error(
      "this sim_surrogate was built without MPI (CMake found none): start it with "
      "`tenax run` or srun, or rebuild with libopenmpi-dev installed");
}
}  // namespace

bool built_with_mpi() { return false; }
void mpi_init(int*, char***) { no_mpi(); }
int mpi_rank() { no_mpi(); }
int mpi_world_size() { no_mpi(); }
std::int32_t mpi_world_fortran_handle() { no_mpi(); }
void mpi_finalize() {}

#endif

}  // namespace sim
