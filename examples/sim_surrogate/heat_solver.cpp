#include "heat_solver.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace sim {
namespace {

// splitmix64: a full-period mixer, so neighbouring (step, rank, k) give unrelated cells.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double bump(double x, double y, double cx, double cy, double width, double height) {
  const double dx = x - cx;
  const double dy = y - cy;
  return height * std::exp(-(dx * dx + dy * dy) / (width * width));
}

}  // namespace

HeatStrip::HeatStrip(const HeatOptions& options, int rank, int world_size)
    : nx_(options.nx), rows_(0), rank_(rank), world_size_(world_size), courant_(options.courant) {
  if (options.nx < 4 || options.nx > 65536) {
    throw std::invalid_argument("--nx " + std::to_string(options.nx) + " is out of range (4..65536)");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("rank " + std::to_string(rank) + " is not in a world of " + std::to_string(world_size));
  }
  if (options.ny < world_size || options.ny % world_size != 0) {
    throw std::invalid_argument("--ny " + std::to_string(options.ny) + " must be a multiple of the world size " +
                                std::to_string(world_size) + " (every rank owns a strip of equal rows)");
  }
  if (!(options.courant > 0.0 && options.courant <= 0.25)) {
    throw std::invalid_argument("--courant " + std::to_string(options.courant) +
                                " must be in (0, 0.25]: forward Euler is unstable beyond 0.25");
  }
  rows_ = options.ny / world_size;
  const double h = 1.0 / static_cast<double>(nx_);
  dt_ = courant_ * h * h;  // alpha = 1
  u_.assign(static_cast<std::size_t>((rows_ + 2) * stride()), 0.0);
  next_.assign(static_cast<std::size_t>(2 * stride()), 0.0);
  const std::int64_t first_global_row = rank * rows_;
  for (std::int64_t i = 1; i <= rows_; ++i) {
    const double y = (static_cast<double>(first_global_row + i - 1) + 0.5) / static_cast<double>(options.ny);
    for (std::int64_t j = 1; j <= nx_; ++j) {
      const double x = (static_cast<double>(j - 1) + 0.5) / static_cast<double>(nx_);
      at(i, j) = bump(x, y, 0.3, 0.6, 0.12, 0.9) + bump(x, y, 0.7, 0.35, 0.08, 0.6);
    }
  }
  if (!has_top_neighbour()) {
    for (std::int64_t j = 1; j <= nx_; ++j) at(0, j) = 1.0;  // the hot wall
  }
}

void HeatStrip::step() {
  // In place, row by row: `above` holds the old values of row i - 1 and `row` those of row i
  // (row i + 1 is still old in u_). Two rows of scratch instead of a second field: the
  // checkpoint holds a pointer to u_, so the field cannot be swapped with a buffer, and a copy
  // of the whole field every step would cost as much as the update.
  const double r = courant_;
  const std::size_t width = static_cast<std::size_t>(stride());
  double* above = next_.data();
  double* row = next_.data() + width;
  std::copy(u_.begin(), u_.begin() + static_cast<std::ptrdiff_t>(width), above);  // ghost row 0
  for (std::int64_t i = 1; i <= rows_; ++i) {
    double* out = &u_[static_cast<std::size_t>(i) * width];
    const double* down = out + width;
    std::copy(out, out + width, row);
    for (std::int64_t j = 1; j <= nx_; ++j) {
      out[j] = row[j] + r * (above[j] + down[j] + row[j - 1] + row[j + 1] - 4.0 * row[j]);
    }
    std::swap(above, row);
  }
}

double HeatStrip::exact_update(const double* s) const {
  return s[0] + courant_ * (s[1] + s[2] + s[3] + s[4] - 4.0 * s[0]);
}

std::vector<Cell> HeatStrip::sample_cells(std::uint64_t seed, std::int64_t step, std::int64_t count) const {
  std::vector<Cell> cells;
  cells.reserve(static_cast<std::size_t>(count));
  const std::uint64_t base =
      mix(seed ^ mix(static_cast<std::uint64_t>(step) * 0x100000001b3ull + static_cast<std::uint64_t>(rank_)));
  for (std::int64_t k = 0; k < count; ++k) {
    const std::uint64_t h = mix(base + static_cast<std::uint64_t>(k));
    cells.push_back({1 + static_cast<std::int64_t>((h & 0xffffffffu) % static_cast<std::uint64_t>(rows_)),
                     1 + static_cast<std::int64_t>((h >> 32) % static_cast<std::uint64_t>(nx_))});
  }
  return cells;
}

void HeatStrip::stencils(const std::vector<Cell>& cells, double* out) const {
  for (const Cell& c : cells) {
    *out++ = at(c.i, c.j);
    *out++ = at(c.i - 1, c.j);
    *out++ = at(c.i + 1, c.j);
    *out++ = at(c.i, c.j - 1);
    *out++ = at(c.i, c.j + 1);
  }
}

void HeatStrip::values(const std::vector<Cell>& cells, double* out) const {
  for (const Cell& c : cells) *out++ = at(c.i, c.j);
}

std::vector<double> HeatStrip::interior() const {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(rows_ * nx_));
  for (std::int64_t i = 1; i <= rows_; ++i) {
    for (std::int64_t j = 1; j <= nx_; ++j) out.push_back(at(i, j));
  }
  return out;
}

std::vector<double> probe_stencils(std::int64_t count) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(count * kStencil));
  for (std::int64_t p = 0; p < count; ++p) {
    const double level = (static_cast<double>(p) + 0.5) / static_cast<double>(count);
    const double slope = 0.05 * std::sin(1.7 * static_cast<double>(p));
    const double curve = 0.03 * std::cos(2.3 * static_cast<double>(p));
    out.push_back(level);
    out.push_back(level + slope + curve);        // north
    out.push_back(level - slope + curve);        // south
    out.push_back(level + 0.5 * slope + curve);  // west
    out.push_back(level - 0.5 * slope + curve);  // east: a Laplacian of 4 curve
  }
  return out;
}

}  // namespace sim
