// A WordPiece vocabulary: token <-> id, read from a BERT `vocab.txt` (one token a line, the
// line number is the id).
// Thread-safety: immutable after construction; const calls are safe from any thread.
//
//   auto vocab = tenax::sdk::Vocab::from_file("model/vocab.txt");
//   std::optional<std::int32_t> id = vocab.find("hello");
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tenax::sdk {

class Vocab {
 public:
  /// Tokens in id order. A token listed twice maps to its last line (as Hugging Face's
  /// load_vocab does); id_to_token keeps every line.
  explicit Vocab(std::vector<std::string> tokens);

  /// Reads `path`: lines end in "\n" (a "\r" before it is dropped too). Throws tenax::Error
  /// naming the file when it cannot be read or holds no token.
  static Vocab from_file(const std::string& path);

  std::size_t size() const { return tokens_.size(); }
  /// The id of `token`, or nullopt.
  std::optional<std::int32_t> find(const std::string& token) const;
  /// The id of `token`; throws tenax::ConfigError naming the token and `what` when absent.
  std::int32_t at(const std::string& token, const std::string& what) const;
  /// The token of `id`; throws tenax::Error for an id outside [0, size()).
  const std::string& token(std::int32_t id) const;

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int32_t> ids_;
};

}  // namespace tenax::sdk
