#include <cstring>

#include "halo_exchange.h"
#include "tenax_check.h"

namespace sim {
namespace {

// One allgather per step carries every rank's first and last rows; each rank keeps the two it
// borders. With W ranks that moves W times what two point-to-point messages would, which is
// fine for the few ranks of a node: Tenax's collectives have no send/receive pair, and a
// solver without MPI needs no more than this.
class TenaxHalo final : public HaloExchange {
 public:
  TenaxHalo(tenax_context* ctx, int rank, int world_size) : ctx_(ctx), rank_(rank), world_size_(world_size) {}

  void exchange(HeatStrip& strip) override {
    if (world_size_ == 1) return;  // both ghost rows are walls
    const std::size_t n = static_cast<std::size_t>(strip.nx());
    mine_.resize(2 * n);
    all_.resize(2 * n * static_cast<std::size_t>(world_size_));
    std::memcpy(mine_.data(), strip.first_row(), n * sizeof(double));
    std::memcpy(mine_.data() + n, strip.last_row(), n * sizeof(double));
    check(tenax_allgather(ctx_, mine_.data(), all_.data(), static_cast<std::int64_t>(2 * n * sizeof(double))),
          "tenax_allgather (halo rows)");
    if (strip.has_top_neighbour()) {  // the last row of rank - 1
      std::memcpy(strip.top_ghost(), all_.data() + (2 * static_cast<std::size_t>(rank_ - 1) + 1) * n,
                  n * sizeof(double));
    }
    if (strip.has_bottom_neighbour()) {  // the first row of rank + 1
      std::memcpy(strip.bottom_ghost(), all_.data() + 2 * static_cast<std::size_t>(rank_ + 1) * n, n * sizeof(double));
    }
  }

  std::vector<double> gather_field(const HeatStrip& strip) override {
    const std::vector<double> piece = strip.interior();
    std::vector<double> all(piece.size() * static_cast<std::size_t>(world_size_));
    check(tenax_allgather(ctx_, piece.data(), all.data(), static_cast<std::int64_t>(piece.size() * sizeof(double))),
          "tenax_allgather (final field)");
    if (rank_ != 0) all.clear();
    return all;
  }

  const char* name() const override { return "tenax"; }

 private:
  tenax_context* ctx_;
  int rank_;
  int world_size_;
  std::vector<double> mine_;
  std::vector<double> all_;
};

}  // namespace

std::unique_ptr<HaloExchange> make_tenax_halo(tenax_context* ctx, int rank, int world_size) {
  return std::make_unique<TenaxHalo>(ctx, rank, world_size);
}

}  // namespace sim
