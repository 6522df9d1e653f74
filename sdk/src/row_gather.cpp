#include "row_gather.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tenax/core/error.h"

namespace tenax::sdk::detail {
namespace {

// What one rank holds, as every rank must know it before the fixed-size allgather.
struct RowsInfo {
  std::int64_t rows = 0;
  bool defined = false;
  int dtype = -1;
  std::vector<std::int64_t> trailing;  // the shape after the row dimension
};

std::string encode(const RowsInfo& info) {
  std::ostringstream s;
  s << info.rows << ' ' << (info.defined ? 1 : 0) << ' ' << info.dtype << ' ' << info.trailing.size();
  for (auto d : info.trailing) s << ' ' << d;
  return s.str();
}

RowsInfo decode(const std::string& text, int rank) {
  std::istringstream s(text);
  RowsInfo info;
  int defined = 0;
  std::size_t dims = 0;
  s >> info.rows >> defined >> info.dtype >> dims;
  info.defined = defined != 0;
  info.trailing.resize(dims);
  for (auto& d : info.trailing) s >> d;
  if (!s) throw Error("allgather_rows: malformed shape record from rank " + std::to_string(rank) + ": '" + text + "'");
  return info;
}

std::string shape_string(const std::vector<std::int64_t>& trailing) {
  std::string out = "[rows";
  for (auto d : trailing) out += ", " + std::to_string(d);
  return out + "]";
}

}  // namespace

torch::Tensor allgather_rows(elastic::Communicator& comm, const torch::Tensor& mine, std::int64_t rows) {
  RowsInfo local;
  local.rows = rows;
  torch::Tensor data;
  if (mine.defined()) {
    if (mine.dim() < 1 || mine.size(0) != rows) {
      throw Error("allgather_rows: expected " + std::to_string(rows) + " rows, got a tensor of shape " +
                  c10::str(mine.sizes()));
    }
    data = mine.detach().to(torch::kCPU).contiguous();
    local.defined = true;
    local.dtype = static_cast<int>(data.scalar_type());
    local.trailing.assign(data.sizes().begin() + 1, data.sizes().end());
  }
  const std::vector<std::string> records = elastic::allgather_strings(comm, encode(local));
  std::vector<RowsInfo> infos;
  for (std::size_t r = 0; r < records.size(); ++r) infos.push_back(decode(records[r], static_cast<int>(r)));

  // Every rank sees the same records, so every rank reaches the same verdict below.
  const auto reference = std::find_if(infos.begin(), infos.end(), [](const RowsInfo& i) { return i.defined; });
  if (reference == infos.end()) return {};
  std::int64_t total = 0, longest = 0;
  for (std::size_t r = 0; r < infos.size(); ++r) {
    const RowsInfo& info = infos[r];
    total += info.rows;
    longest = std::max(longest, info.rows);
    if (info.rows > 0 && !info.defined) {
      throw Error("allgather_rows: rank " + std::to_string(r) + " has " + std::to_string(info.rows) +
                  " rows but no tensor while other ranks have one (e.g. labels on some batches only)");
    }
    if (info.defined && (info.dtype != reference->dtype || info.trailing != reference->trailing)) {
      throw Error("allgather_rows: rank " + std::to_string(r) + " has rows of shape " + shape_string(info.trailing) +
                  " and dtype " + std::to_string(info.dtype) + ", rank " + std::to_string(reference - infos.begin()) +
                  " has " + shape_string(reference->trailing) + " and dtype " + std::to_string(reference->dtype));
    }
  }
  const auto dtype = static_cast<torch::ScalarType>(reference->dtype);
  std::vector<std::int64_t> out_shape{total};
  out_shape.insert(out_shape.end(), reference->trailing.begin(), reference->trailing.end());
  torch::Tensor out = torch::empty(out_shape, torch::TensorOptions().dtype(dtype));
  std::int64_t row_elements = 1;
  for (auto d : reference->trailing) row_elements *= d;
  const auto row_bytes = static_cast<std::size_t>(row_elements) * c10::elementSize(dtype);
  const std::size_t slot = static_cast<std::size_t>(longest) * row_bytes;
  if (slot == 0) return out;

  // Padded to the longest shard for the fixed-size collective; the padding is dropped below.
  std::vector<std::uint8_t> send(slot, 0);
  if (rows > 0) std::memcpy(send.data(), data.data_ptr(), static_cast<std::size_t>(rows) * row_bytes);
  std::vector<std::uint8_t> received(slot * infos.size());
  comm.allgather(send.data(), received.data(), slot);
  auto* dst = static_cast<std::uint8_t*>(out.data_ptr());
  for (std::size_t r = 0; r < infos.size(); ++r) {
    const std::size_t bytes = static_cast<std::size_t>(infos[r].rows) * row_bytes;
    std::memcpy(dst, received.data() + r * slot, bytes);
    dst += bytes;
  }
  return out;
}

}  // namespace tenax::sdk::detail
