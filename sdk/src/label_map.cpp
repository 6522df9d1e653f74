#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "tenax/core/error.h"
#include "tenax/sdk/text_dataset.h"

namespace tenax::sdk {
namespace {

bool parse_integer(const std::string& s, long long& value) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  value = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size() && !std::isspace(static_cast<unsigned char>(s[0]));
}

}  // namespace

LabelMap::LabelMap(std::vector<std::string> names) : names_(std::move(names)) {
  if (names_.empty()) throw ConfigError("LabelMap: no labels (is the label column empty?)");
  std::sort(names_.begin(), names_.end());
  names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
  long long a, b;
  const bool integers =
      std::all_of(names_.begin(), names_.end(), [&](const std::string& s) { return parse_integer(s, a); });
  if (integers) {
    std::sort(names_.begin(), names_.end(), [&](const std::string& x, const std::string& y) {
      parse_integer(x, a);
      parse_integer(y, b);
      return a < b || (a == b && x < y);  // "1" and "01" are both kept, in a fixed order
    });
  }
  index();
}

LabelMap LabelMap::in_order(std::vector<std::string> names) {
  if (names.empty()) throw ConfigError("LabelMap: the label list is empty");
  LabelMap map;
  map.names_ = std::move(names);
  map.index();
  if (map.ids_.size() != map.names_.size()) {
    for (std::size_t i = 0; i < map.names_.size(); ++i) {
      if (map.ids_.at(map.names_[i]) != static_cast<std::int64_t>(i)) {
        throw ConfigError("the label list names '" + map.names_[i] + "' twice; each label once");
      }
    }
  }
  return map;
}

void LabelMap::index() {
  ids_.clear();
  // Backwards, so that a duplicate keeps the id of its first place (which in_order reports).
  for (std::size_t i = names_.size(); i-- > 0;) ids_[names_[i]] = static_cast<std::int64_t>(i);
}

LabelMap LabelMap::from_records(const TextRecords& records) {
  if (records.size() == 0) {
    throw ConfigError(records.path + ": no records, so no labels; check the file");
  }
  return LabelMap(records.labels);
}

const std::string& LabelMap::name(std::int64_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= names_.size()) {
    throw ConfigError("LabelMap: id " + std::to_string(id) + " outside [0, " + std::to_string(names_.size()) + ")");
  }
  return names_[static_cast<std::size_t>(id)];
}

std::int64_t LabelMap::id(const std::string& label) const {
  auto it = ids_.find(label);
  if (it != ids_.end()) return it->second;
  std::string known;
  for (const auto& n : names_) known += (known.empty() ? "'" : ", '") + n + "'";
  throw ConfigError("label '" + label + "' is not one of the " + std::to_string(names_.size()) + " known labels (" +
                    known +
                    "); every split's labels must be among the training file's (or the label list "
                    "given), in the same label column");
}

std::vector<std::int64_t> LabelMap::ids(const TextRecords& records) const {
  std::vector<std::int64_t> out;
  out.reserve(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    try {
      out.push_back(id(records.labels[i]));
    } catch (const ConfigError& e) {
      throw ConfigError(records.path + ":" + std::to_string(records.lines[i]) + ": " + e.what());
    }
  }
  return out;
}

}  // namespace tenax::sdk
