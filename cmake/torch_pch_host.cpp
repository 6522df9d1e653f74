// The one translation unit of tenax_torch_pch (cmake/TenaxTorchPch.cmake): it exists so that
// CMake compiles the precompiled <torch/torch.h> that the other targets reuse.
namespace tenax::detail {
int torch_pch_host() { return 0; }
}  // namespace tenax::detail
