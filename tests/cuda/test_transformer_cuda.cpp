// The Transformer modules on cuda:0 against the same modules on the CPU: both built from one seed (Philox draws
// the same weights and dropout masks on any device), run forward and backward, compared output, input gradient
// and every parameter gradient. Dropout stays on in training, so the attention kernels' masks must agree too.
// Small shapes: the emulated device runs every GPU thread as a fiber.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "core/ops.h"
#include "models/bert.h"
#include "models/vit.h"
#include "nn/nn.h"
#include "support/compare.h"

using namespace ember;

namespace {

struct Run {
  std::vector<double> out, grad_in;
  std::vector<std::vector<double>> grads;
};

template <typename Forward>
Run run(nn::Module& m, const Tensor& x, Forward forward, Device device) {
  m.zero_grad();
  const Tensor y = forward(x.to(device));
  const Tensor dx = m.backward(Tensor::randn(y.shape(), 7, y.dtype()).to(device));
  Run r{y.to(DType::F64).to_vector<double>(), {}, {}};
  if (dx.defined()) r.grad_in = dx.to(DType::F64).to_vector<double>();
  for (const auto& p : m.parameters()) r.grads.push_back(p->grad.to(DType::F64).to_vector<double>());
  return r;
}

void require_same(const Run& cuda, const Run& cpu, test::Tolerance tol) {
  REQUIRE_CLOSE(cuda.out, cpu.out, tol);
  REQUIRE_CLOSE(cuda.grad_in, cpu.grad_in, tol);
  REQUIRE(cuda.grads.size() == cpu.grads.size());
  for (size_t i = 0; i < cpu.grads.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE_CLOSE(cuda.grads[i], cpu.grads[i], tol);
  }
}

}  // namespace

TEST_CASE("TransformerEncoderLayer on cuda:0 matches the CPU, masks and dropout included", "[cuda][transformer]") {
  for (bool norm_first : {false, true}) {
    INFO("norm_first " << norm_first);
    const nn::TransformerEncoderLayerOptions o{.d_model = 8, .nhead = 2, .dim_feedforward = 12, .dropout = 0.2,
                                               .activation = "gelu", .batch_first = true, .norm_first = norm_first};
    Generator g_cpu(11), g_cuda(11);
    nn::TransformerEncoderLayer cpu(o, DType::F64, Device::cpu(), g_cpu);
    nn::TransformerEncoderLayer cuda(o, DType::F64, Device::cuda(0), g_cuda);
    const Tensor x = Tensor::randn({2, 5, 8}, 12, DType::F64);
    const Tensor pad = Tensor::from_vector<uint8_t>({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5});
    auto forward_on = [&](nn::TransformerEncoderLayer& layer, Device device) {
      return [&layer, device, &pad](const Tensor& in) {
        return layer.forward(in, nn::AttentionMask{pad.to(device), true});
      };
    };
    const Run a = run(cuda, x, forward_on(cuda, Device::cuda(0)), Device::cuda(0));
    const Run b = run(cpu, x, forward_on(cpu, Device::cpu()), Device::cpu());
    require_same(a, b, test::Tolerance{1e-10, 1e-8});
  }
}

TEST_CASE("The ViT trains on cuda:0 as on the CPU", "[cuda][transformer][vit]") {
  const models::Architecture arch = models::Architecture::vit(7, 8, 1, 2, 12);  // dropout 0.1, as trained
  Generator g_cpu(21), g_cuda(21);
  models::VisionTransformer cpu(arch, Device::cpu(), g_cpu), cuda(arch, Device::cuda(0), g_cuda);
  const Tensor x = Tensor::rand({2, 1, 28, 28}, 22);
  const Run a = run(cuda, x, [&](const Tensor& in) { return cuda.forward(in); }, Device::cuda(0));
  const Run b = run(cpu, x, [&](const Tensor& in) { return cpu.forward(in); }, Device::cpu());
  require_same(a, b, test::kF32Reduce);
}

TEST_CASE("BERT trains on cuda:0 as on the CPU, at every position and at chosen ones", "[cuda][transformer][bert]") {
  const models::Architecture arch = models::Architecture::bert(9, 8, 1, 2, 12);  // dropout 0.1, as trained
  Generator g_cpu(23), g_cuda(23);
  models::BertMaskedLM cpu(arch, Device::cpu(), g_cpu), cuda(arch, Device::cuda(0), g_cuda);
  const Tensor ids = Tensor::from_vector<int64_t>({72, 256, 108, 108, 111, 3, 256, 0, 255, 32, 1, 2, 256, 9}, {2, 7});
  const Tensor positions = Tensor::from_vector<int64_t>({1, 6, 12, 13}, {4});
  const Run a = run(cuda, ids, [&](const Tensor& in) { return cuda.forward(in); }, Device::cuda(0));
  const Run b = run(cpu, ids, [&](const Tensor& in) { return cpu.forward(in); }, Device::cpu());
  require_same(a, b, test::kF32Reduce);
  const Tensor at = positions.to(Device::cuda(0));
  const Run c = run(cuda, ids, [&](const Tensor& in) { return cuda.forward(in, at); }, Device::cuda(0));
  const Run d = run(cpu, ids, [&](const Tensor& in) { return cpu.forward(in, positions); }, Device::cpu());
  require_same(c, d, test::kF32Reduce);
}
