#include "tenax/sdk/text/vocab.h"

#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

Vocab::Vocab(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  if (tokens_.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw Error("Vocab: " + std::to_string(tokens_.size()) + " tokens do not fit 32-bit ids");
  }
  ids_.reserve(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    ids_[tokens_[i]] = static_cast<std::int32_t>(i);  // a repeated token keeps its last line
  }
}

Vocab Vocab::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("Vocab: cannot open " + path + " (a BERT model directory has vocab.txt; run tools/fetch_assets.sh?)");
  }
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    tokens.push_back(line);
  }
  if (in.bad()) throw Error("Vocab: read error in " + path);
  if (tokens.empty()) throw Error("Vocab: " + path + " holds no token");
  return Vocab(std::move(tokens));
}

std::optional<std::int32_t> Vocab::find(const std::string& token) const {
  auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::int32_t Vocab::at(const std::string& token, const std::string& what) const {
  if (auto id = find(token)) return *id;
  throw ConfigError(what + ": token '" + token + "' is not in the vocabulary (" + std::to_string(size()) +
                    " tokens); check the model directory's vocab.txt");
}

const std::string& Vocab::token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) {
    throw Error(fmt::format("Vocab::token: id {} outside [0, {})", id, tokens_.size()));
  }
  return tokens_[static_cast<std::size_t>(id)];
}

}  // namespace tenax::sdk
