#include "tenax/elastic/communicator.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "tenax/core/error.h"

namespace tenax::elastic {

std::size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return 4;
    case ElementType::kFloat64: return 8;
    case ElementType::kInt64: return 8;
    case ElementType::kUInt8: return 1;
  }
  throw Error(fmt::format("unknown ElementType {}", static_cast<int>(type)));
}

std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine,
                                           std::chrono::milliseconds timeout) {
  const auto world = static_cast<std::size_t>(comm.size());
  const std::int64_t my_length = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> lengths(world, 0);
  comm.allgather(&my_length, lengths.data(), sizeof(std::int64_t), timeout);

  const auto longest = static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<std::string> out(world);
  if (longest == 0) return out;  // every rank knows this: all skip the second round together

  std::vector<char> padded(longest, '\0');
  std::memcpy(padded.data(), mine.data(), mine.size());
  std::vector<char> gathered(world * longest);
  comm.allgather(padded.data(), gathered.data(), longest, timeout);
  for (std::size_t r = 0; r < world; ++r) {
    out[r].assign(gathered.data() + r * longest, static_cast<std::size_t>(lengths[r]));
  }
  return out;
}

}  // namespace tenax::elastic
