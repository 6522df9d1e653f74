// Choice<Enum>: an option with a fixed set of spellings, held as its enum. Like transformers'
// ExplicitEnum options (eval_strategy="steps" and IntervalStrategy.STEPS are the same value), it
// takes either: a spelling is parsed once, where it is assigned (a TOML file, a `--key value`
// override, code); one outside the set is kept as written, so that TrainingArguments::validate()
// can refuse it naming the key (ConfigError, exit 2). Code compares the enum, never the text;
// name() gives the spelling back for printouts and the manifest.
// An enum takes part by a specialisation of ChoiceSpellings whose kNames[i] spells the value i.
// Thread-safety: a plain value.
//
//   args.eval_strategy = "steps";                         // or IntervalStrategy::kSteps
//   if (args.eval_strategy == IntervalStrategy::kNo) ...
//   std::string shown = args.eval_strategy.name();        // "steps"
#pragma once

#include <cstddef>
#include <iterator>
#include <ostream>
#include <string>

namespace tenax::sdk {

/// Specialised per enum: `static constexpr const char* kNames[]`, kNames[i] spelling value i.
template <typename Enum>
struct ChoiceSpellings;

/// What every Choice has, whatever its enum: the spelling, whether it is one of the set, and
/// assignment from text (the TOML file and the command line go through this).
class ChoiceBase {
 public:
  /// The canonical spelling, or the text as written when it is not one of the set.
  const std::string& name() const { return name_; }
  bool valid() const { return index_ >= 0; }
  /// The accepted spellings, comma-separated ("no, steps, epoch").
  std::string accepted() const;
  /// Parses `spelling`; one outside the set makes the choice invalid (validate() refuses it).
  void assign(const std::string& spelling);

 protected:
  ChoiceBase(const char* const* names, std::size_t count, int index)
      : names_(names), count_(count), index_(index), name_(names[index]) {}
  ChoiceBase(const char* const* names, std::size_t count, const std::string& spelling) : names_(names), count_(count) {
    assign(spelling);
  }
  int index() const { return index_ < 0 ? 0 : index_; }

 private:
  const char* const* names_;
  std::size_t count_;
  int index_ = -1;
  std::string name_;
};

template <typename Enum>
class Choice : public ChoiceBase {
  using Spellings = ChoiceSpellings<Enum>;

 public:
  Choice(Enum value) : ChoiceBase(Spellings::kNames, std::size(Spellings::kNames), static_cast<int>(value)) {}
  Choice(const char* spelling) : Choice(std::string(spelling)) {}
  Choice(const std::string& spelling) : ChoiceBase(Spellings::kNames, std::size(Spellings::kNames), spelling) {}

  /// The enum (its first value when !valid(); validate() refuses such arguments first).
  Enum value() const { return static_cast<Enum>(index()); }

  friend bool operator==(const Choice& a, Enum b) { return a.valid() && a.value() == b; }
  friend bool operator!=(const Choice& a, Enum b) { return !(a == b); }
  friend bool operator==(const Choice& a, const Choice& b) { return a.name() == b.name(); }
  friend bool operator!=(const Choice& a, const Choice& b) { return !(a == b); }
  friend bool operator==(const Choice& a, const char* spelling) { return a.name() == spelling; }
  friend bool operator!=(const Choice& a, const char* spelling) { return !(a == spelling); }
  friend std::ostream& operator<<(std::ostream& out, const Choice& c) { return out << c.name(); }
};

}  // namespace tenax::sdk
