#include "tenax/sdk/choice.h"

namespace tenax::sdk {

std::string ChoiceBase::accepted() const {
  std::string list;
  for (std::size_t i = 0; i < count_; ++i) list += (i == 0 ? "" : ", ") + std::string(names_[i]);
  return list;
}

void ChoiceBase::assign(const std::string& spelling) {
  name_ = spelling;
  index_ = -1;
  for (std::size_t i = 0; i < count_; ++i) {
    if (spelling == names_[i]) index_ = static_cast<int>(i);
  }
}

}  // namespace tenax::sdk
