// A model of one's own on ember, built against the installed package: a residual block written as an
// nn::Module (its forward and its backward, following the gradient contract of <ember/nn/module.h>), put
// in a Sequential with ember's layers, trained with AdamW under a cosine schedule, saved as safetensors under
// PyTorch's state_dict names and loaded back into a fresh model. Exits 1 if training did not learn or the
// loaded model answers differently, so a test that runs it can fail.
#include <ember/ember.h>

#include <cstdio>
#include <filesystem>
#include <memory>

using namespace ember;

namespace {

// y = x + fc2(relu(fc1(x))): the gradient flows through both branches, and backward adds them.
class ResidualBlock : public nn::Module {
 public:
  explicit ResidualBlock(int64_t width)
      : fc1_(register_module("fc1", std::make_shared<nn::Linear>(width, width))),
        relu_(register_module("relu", std::make_shared<nn::ReLU>())),
        fc2_(register_module("fc2", std::make_shared<nn::Linear>(width, width))) {}

  Tensor forward(const Tensor& x) override { return x + fc2_->forward(relu_->forward(fc1_->forward(x))); }
  Tensor backward(const Tensor& grad_out) override {
    return grad_out + fc1_->backward(relu_->backward(fc2_->backward(grad_out)));
  }
  std::string type_name() const override { return "ResidualBlock"; }

 private:
  std::shared_ptr<nn::Linear> fc1_;
  std::shared_ptr<nn::ReLU> relu_;
  std::shared_ptr<nn::Linear> fc2_;
};

std::shared_ptr<nn::Sequential> make_model() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(16, 64), std::make_shared<nn::ReLU>(), std::make_shared<ResidualBlock>(64),
      std::make_shared<nn::Linear>(64, 4)});
}

// Four classes: the quadrant of the first two inputs. Batch `seed` of a fixed set of eight.
std::pair<Tensor, Tensor> batch(uint64_t seed) {
  Tensor x = Tensor::randn({64, 16}, seed % 8);
  std::vector<float> v = x.to_vector<float>();
  std::vector<int64_t> labels(64);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = (v[i * 16] > 0 ? 1 : 0) + (v[i * 16 + 1] > 0 ? 2 : 0);
  return {x, Tensor::from_vector(labels, {64})};
}

double accuracy(nn::Module& model, Device device) {
  model.eval();
  int64_t correct = 0;
  for (uint64_t s = 0; s < 8; ++s) {
    auto [x, y] = batch(s);
    correct += ops::count_correct(model.forward(x.to(device)), y.to(device)).item<int64_t>();
  }
  model.train();
  return static_cast<double>(correct) / (8 * 64);
}

}  // namespace

int main() {
  try {
    Device device = Device::best();
    manual_seed(1);
    auto model = make_model();
    model->to(device);
    (*model)[0].set_input_grad(false);  // the first layer's input is data
    optim::AdamW optimizer(model->parameters(), {.lr = 3e-3, .weight_decay = 1e-2});
    optim::CosineLr schedule(3e-3, 200);
    nn::CrossEntropyLoss loss_fn;
    for (int step = 0; step < 200; ++step) {
      auto [x, y] = batch(static_cast<uint64_t>(step));
      optimizer.set_lr(schedule.lr_at(step));
      optimizer.zero_grad();
      loss_fn.forward(model->forward(x.to(device)), y.to(device));
      model->backward(loss_fn.backward());
      optimizer.step();
    }
    double trained = accuracy(*model, device);

    std::string path = (std::filesystem::temp_directory_path() / "ember_custom_model.safetensors").string();
    formats::save_safetensors(path, model->state_dict());
    auto loaded = make_model();
    loaded->load_state_dict(formats::load_safetensors(path).tensors);  // strict: the names must match
    loaded->to(device);
    std::filesystem::remove(path);
    double reloaded = accuracy(*loaded, device);

    std::printf("%s on %s: accuracy %.3f after training, %.3f after save and load; parameters: %lld\n",
                model->type_name().c_str(), device.str().c_str(), trained, reloaded,
                static_cast<long long>(model->num_parameters()));
    for (const auto& [name, tensor] : model->state_dict()) {
      std::printf("  %s %s\n", name.c_str(), shape_str(tensor.shape()).c_str());
    }
    return trained >= 0.9 && reloaded == trained ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "custom_model: %s\n", e.what());
    return 1;
  }
}
