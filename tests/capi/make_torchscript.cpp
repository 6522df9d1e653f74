// Writes the TorchScript files the C API tests load, without Python: torch::jit::Module's own
// define() compiles TorchScript source, and save() writes what torch.jit.script(m).save() writes.
//   net.pt        forward(x): x {batch, 2} -> {batch, 1}; parameters fc1.weight ... (dotted names)
//   no_forward.pt a module with a parameter and a method, but no forward
//   corrupt.pt    bytes that are not a TorchScript archive
// Usage: make_torchscript DIR
#include <filesystem>
#include <fstream>
#include <iostream>

#include <torch/script.h>
#include <torch/torch.h>

namespace {

torch::jit::Module linear(const std::string& name, int64_t in, int64_t out) {
  torch::jit::Module m(name);
  m.register_parameter("weight", torch::randn({out, in}) * 0.5, /*is_buffer=*/false);
  m.register_parameter("bias", torch::zeros({out}), /*is_buffer=*/false);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_torchscript DIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  torch::manual_seed(0);

  torch::jit::Module net("Net");
  net.register_module("fc1", linear("Fc1", 2, 16));
  net.register_module("fc2", linear("Fc2", 16, 1));
  net.define(R"(
def forward(self, x):
    h = torch.tanh(torch.matmul(x, self.fc1.weight.t()) + self.fc1.bias)
    return torch.matmul(h, self.fc2.weight.t()) + self.fc2.bias
)");
  net.save((dir / "net.pt").string());

  torch::jit::Module no_forward("NoForward");
  no_forward.register_parameter("w", torch::ones({2}), /*is_buffer=*/false);
  no_forward.define(R"(
def scale(self, x):
    return x * self.w
)");
  no_forward.save((dir / "no_forward.pt").string());

  std::ofstream((dir / "corrupt.pt").string(), std::ios::binary) << "not a zip archive, not TorchScript";
  return 0;
}
