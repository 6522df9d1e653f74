// The simulation of the sim_surrogate example: the 2-D heat equation u_t = alpha (u_xx + u_yy)
// on the unit square, explicit finite differences (forward Euler in time, the 5-point stencil
// in space), decomposed across ranks in strips of whole rows.
//
// The square is nx x ny cells. Its walls are Dirichlet ghost cells: the top wall (above global
// row 0) is held at 1 (hot), the other three at 0; the start is two Gaussian bumps. Rank r owns
// global rows [r*rows, (r+1)*rows), stored with one ghost row above and below (filled by a
// HaloExchange before every step) and one ghost column on each side (the cold walls).
//
// Every cell is updated by the same expression whichever rank owns it, so the field after n
// steps is bit-for-bit the same for any number of ranks and any halo transport.
//
// Nothing here knows about Tenax or MPI: the bench's plain-libtorch baseline uses it too.
// Thread-safety: none; the solver's thread owns a HeatStrip.
#pragma once

#include <cstdint>
#include <vector>

namespace sim {

/// The 5 values of the stencil around one cell: centre, north, south, west, east.
constexpr int kStencil = 5;

struct HeatOptions {
  std::int64_t nx = 128;  ///< cells per row (global and local)
  std::int64_t ny = 128;  ///< rows of the whole square (a multiple of the world size)
  /// alpha dt / h^2; forward Euler is stable up to 0.25.
  double courant = 0.2;
};

/// A cell of the strip, in local coordinates (1..rows, 1..nx; 0 and rows+1 / nx+1 are ghosts).
struct Cell {
  std::int64_t i;
  std::int64_t j;
};

class HeatStrip {
 public:
  /// The strip of `rank` in a world of `world_size`; throws std::invalid_argument naming the
  /// option when ny is not a multiple of the world size or the sizes are out of range.
  HeatStrip(const HeatOptions& options, int rank, int world_size);

  std::int64_t nx() const { return nx_; }
  std::int64_t rows() const { return rows_; }
  /// Row stride of the stored array (nx + 2: the ghost columns).
  std::int64_t stride() const { return nx_ + 2; }
  double dt() const { return dt_; }

  /// The whole stored strip, ghosts included: (rows + 2) x (nx + 2) doubles, row-major. This is
  /// what a checkpoint registers: the pointer is stable for the strip's lifetime.
  double* data() { return u_.data(); }
  const double* data() const { return u_.data(); }
  std::int64_t stored_rows() const { return rows_ + 2; }

  /// First and last interior rows (what the neighbours need as their ghosts).
  const double* first_row() const { return &u_[static_cast<std::size_t>(stride() + 1)]; }
  const double* last_row() const { return &u_[static_cast<std::size_t>(rows_ * stride() + 1)]; }
  /// Ghost rows to fill from the neighbour above (rank - 1) / below (rank + 1). Rank 0's top
  /// ghost and the last rank's bottom ghost are walls: never overwrite them.
  double* top_ghost() { return &u_[1]; }
  double* bottom_ghost() { return &u_[static_cast<std::size_t>((rows_ + 1) * stride() + 1)]; }
  bool has_top_neighbour() const { return rank_ > 0; }
  bool has_bottom_neighbour() const { return rank_ + 1 < world_size_; }

  /// One forward-Euler step of the interior (the ghost rows must be current).
  void step();

  /// Deterministic training cells of solver step `step`: `count` interior cells of this strip,
  /// a pure function of (seed, step, rank), so a resumed run samples what an uninterrupted one
  /// would have sampled.
  std::vector<Cell> sample_cells(std::uint64_t seed, std::int64_t step, std::int64_t count) const;
  /// The 5-point stencils at `cells` into `out` (cells.size() x kStencil, row-major).
  void stencils(const std::vector<Cell>& cells, double* out) const;
  /// The values at `cells` into `out` (cells.size()).
  void values(const std::vector<Cell>& cells, double* out) const;

  /// Interior rows only, row-major (rows x nx): this rank's piece of the final field.
  std::vector<double> interior() const;

  /// What one forward-Euler step makes of a stencil (the surrogate's exact answer).
  double exact_update(const double* stencil) const;

 private:
  double& at(std::int64_t i, std::int64_t j) { return u_[static_cast<std::size_t>(i * stride() + j)]; }
  double at(std::int64_t i, std::int64_t j) const { return u_[static_cast<std::size_t>(i * stride() + j)]; }

  std::int64_t nx_;
  std::int64_t rows_;
  int rank_;
  int world_size_;
  double courant_;
  double dt_;
  std::vector<double> u_;     // registered with the checkpoint: never reallocated
  std::vector<double> next_;  // scratch of the update
};

/// The fixed probe stencils on which the final surrogate is evaluated (count x kStencil):
/// smooth fields at several levels and gradients, the same in every run.
std::vector<double> probe_stencils(std::int64_t count);

}  // namespace sim
