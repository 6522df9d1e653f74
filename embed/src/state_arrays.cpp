#include "state_arrays.h"

#include <cstring>

#include "arrays.h"
#include "tenax/core/error.h"

namespace tenax::capi {
namespace {

std::string header_of(const torch::Tensor& array) { return "float64 " + shape_string(array.sizes()) + "\n"; }

}  // namespace

void register_array(sdk::UserState& state, const std::string& name, const torch::Tensor& array,
                    sdk::UserState::Scope scope) {
  if (array.scalar_type() != torch::kFloat64) {
    state.add_tensor(name, array, scope);
    return;
  }
  // The blob is taken when the checkpoint is captured, i.e. before tenax_checkpoint_save
  // returns: the solver may overwrite its array at once.
  const auto save = [array] {
    const std::string header = header_of(array);
    const auto bytes = static_cast<std::size_t>(array.numel()) * sizeof(double);
    std::string blob(header.size() + bytes, '\0');
    std::memcpy(blob.data(), header.data(), header.size());
    std::memcpy(blob.data() + header.size(), array.data_ptr(), bytes);
    return blob;
  };
  const auto restore = [array, name](const std::string& blob) {
    const std::string header = header_of(array);
    const auto bytes = static_cast<std::size_t>(array.numel()) * sizeof(double);
    if (blob.compare(0, header.size(), header) != 0 || blob.size() != header.size() + bytes) {
      const std::string saved = blob.substr(0, std::min(blob.find('\n'), std::size_t{64}));
      throw StorageError("state array '" + name + "' is '" + saved + "' in the checkpoint but " +
                         header.substr(0, header.size() - 1) + " registered; register the array that was saved");
    }
    std::memcpy(array.data_ptr(), blob.data() + header.size(), bytes);
  };
  state.add_blob(name, save, restore, scope);
}

}  // namespace tenax::capi
