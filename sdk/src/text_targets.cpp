#include "tenax/sdk/text_targets.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

std::optional<double> parse_number(const std::string& s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front())) != 0) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

bool is_integer_text(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin() + (s[0] == '-' ? 1 : 0), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string where(const TextRecords& records, std::size_t i) {
  return records.path + ":" + std::to_string(records.lines[i]) + ": ";
}

bool looks_like_list(const std::string& field) { return !field.empty() && field.front() == '['; }

}  // namespace

std::vector<std::string> split_multi_label(const std::string& field, const std::string& separator) {
  std::vector<std::string> out;
  if (looks_like_list(field)) {
    const auto json = nlohmann::json::parse(field, nullptr, /*allow_exceptions=*/false);
    if (!json.is_array()) throw ConfigError("label field '" + field + "' is not a valid JSON array");
    for (const auto& element : json) {
      if (element.is_string()) {
        out.push_back(element.get<std::string>());
      } else if (element.is_number_integer()) {
        out.push_back(element.dump());
      } else {
        throw ConfigError("label list '" + field + "' holds " + element.dump() +
                          "; the labels of a multi-label field must be strings or integers");
      }
    }
    return out;
  }
  if (field.empty()) return out;
  if (separator.empty()) {
    throw ConfigError("label field '" + field +
                      "' is not a list; set data.label_separator to split it (e.g. \"|\"), or write JSON arrays");
  }
  for (std::size_t begin = 0;;) {
    const std::size_t end = field.find(separator, begin);
    std::string part = field.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (part.empty()) throw ConfigError("label field '" + field + "' has an empty label between separators");
    out.push_back(std::move(part));
    if (end == std::string::npos) break;
    begin = end + separator.size();
  }
  return out;
}

ProblemType infer_problem_type(const TextRecords& records, const std::string& separator) {
  if (records.size() == 0) throw ConfigError(records.path + ": no records; check the file");
  const bool lists = !separator.empty() || std::any_of(records.labels.begin(), records.labels.end(), looks_like_list);
  if (lists) return ProblemType::kMultiLabelClassification;
  bool all_numbers = true, all_integers = true;
  for (const auto& label : records.labels) {
    all_numbers = all_numbers && parse_number(label).has_value();
    all_integers = all_integers && is_integer_text(label);
  }
  return all_numbers && !all_integers ? ProblemType::kRegression : ProblemType::kSingleLabelClassification;
}

std::vector<std::string> label_names(const TextRecords& records, ProblemType type, const std::string& separator) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (type == ProblemType::kRegression) break;
    if (type == ProblemType::kSingleLabelClassification) {
      names.insert(records.labels[i]);
      continue;
    }
    try {
      for (auto& n : split_multi_label(records.labels[i], separator)) names.insert(std::move(n));
    } catch (const ConfigError& e) {
      throw ConfigError(where(records, i) + e.what());
    }
  }
  return {names.begin(), names.end()};
}

torch::Tensor text_targets(const TextRecords& records, ProblemType type, const LabelMap& labels,
                           const std::string& separator) {
  const auto n = static_cast<std::int64_t>(records.size());
  if (type == ProblemType::kSingleLabelClassification) {
    return torch::tensor(labels.ids(records), torch::kInt64);
  }
  if (type == ProblemType::kRegression) {
    torch::Tensor out = torch::empty({n}, torch::kFloat32);
    auto a = out.accessor<float, 1>();
    for (std::size_t i = 0; i < records.size(); ++i) {
      const auto value = parse_number(records.labels[i]);
      if (!value) {
        throw ConfigError(where(records, i) + "label '" + records.labels[i] +
                          "' is not a number, and the task is regression; fix the row or set model.problem_type");
      }
      a[static_cast<std::int64_t>(i)] = static_cast<float>(*value);
    }
    return out;
  }
  torch::Tensor out = torch::zeros({n, static_cast<std::int64_t>(labels.size())}, torch::kFloat32);
  auto a = out.accessor<float, 2>();
  for (std::size_t i = 0; i < records.size(); ++i) {
    try {
      for (const auto& name : split_multi_label(records.labels[i], separator)) {
        a[static_cast<std::int64_t>(i)][labels.id(name)] = 1.0F;
      }
    } catch (const ConfigError& e) {
      throw ConfigError(where(records, i) + e.what());
    }
  }
  return out;
}

}  // namespace tenax::sdk
