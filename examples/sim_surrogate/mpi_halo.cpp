#include <stdexcept>
#include <string>

#include "halo_exchange.h"

#ifdef SIM_WITH_MPI
#include <mpi.h>
#endif

namespace sim {

#ifdef SIM_WITH_MPI
namespace {

void check_mpi(int code, const char* call) {
  if (code != MPI_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed with MPI error " + std::to_string(code));
}

// Point-to-point with the two neighbours on the program's own communicator. MPI_PROC_NULL at
// the ends of the stack leaves the wall rows alone.
class MpiHalo final : public HaloExchange {
 public:
  MpiHalo() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  }

  void exchange(HeatStrip& strip) override {
    const int n = static_cast<int>(strip.nx());
    const int up = strip.has_top_neighbour() ? rank_ - 1 : MPI_PROC_NULL;
    const int down = strip.has_bottom_neighbour() ? rank_ + 1 : MPI_PROC_NULL;
    check_mpi(MPI_Sendrecv(strip.first_row(), n, MPI_DOUBLE, up, 0, strip.bottom_ghost(), n, MPI_DOUBLE, down, 0,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Sendrecv (halo rows upwards)");
    check_mpi(MPI_Sendrecv(strip.last_row(), n, MPI_DOUBLE, down, 1, strip.top_ghost(), n, MPI_DOUBLE, up, 1,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Sendrecv (halo rows downwards)");
  }

  std::vector<double> gather_field(const HeatStrip& strip) override {
    const std::vector<double> piece = strip.interior();
    std::vector<double> all(rank_ == 0 ? piece.size() * static_cast<std::size_t>(world_size_) : 0);
    check_mpi(MPI_Gather(piece.data(), static_cast<int>(piece.size()), MPI_DOUBLE, all.data(),
                         static_cast<int>(piece.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD),
              "MPI_Gather (final field)");
    return all;
  }

  const char* name() const override { return "mpi"; }

 private:
  int rank_ = 0;
  int world_size_ = 1;
};

}  // namespace

std::unique_ptr<HaloExchange> make_mpi_halo() { return std::make_unique<MpiHalo>(); }

#else

std::unique_ptr<HaloExchange> make_mpi_halo() {
  throw std::runtime_error("--halo mpi: this sim_surrogate was built without MPI (CMake found none)");
}

#endif

}  // namespace sim
