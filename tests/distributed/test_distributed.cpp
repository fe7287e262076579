// The data-parallel pieces on one process: the gradient reducer against a stand-in for a second rank, the
// cross-rank parameter check, the launcher's environment, and Sequential's backward hook.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/ops.h"
#include "distributed/communicator.h"
#include "nn/nn.h"
#include "distributed/ddp.h"
#include "models/architecture.h"

using namespace ember;

namespace {

// Rank 0 of two whose partner always holds the same gradients: an all-reduce doubles the tensor (when the
// collective is waited for), and each collective records how many backward calls had happened when it started.
class MirrorComm : public dist::Communicator {
 public:
  int* backward_calls = nullptr;
  std::vector<int> launched_after;     // backward calls before each asynchronous all-reduce began
  std::vector<int64_t> launched_numel;
  std::vector<uint64_t> gathered;      // what all_gather returns (empty: two copies of the value)

  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 2; }
  std::string describe(Device) const override { return "mirror"; }
  void all_reduce_sum(Tensor& t) override { t.copy_from(ops::scale(t, 2.0)); }
  std::unique_ptr<dist::Work> all_reduce_sum_async(Tensor t) override {
    launched_after.push_back(backward_calls ? *backward_calls : -1);
    launched_numel.push_back(t.numel());
    struct Doubling : dist::Work {
      Tensor t;
      void wait() override { t.copy_from(ops::scale(t, 2.0)); }
    };
    auto w = std::make_unique<Doubling>();
    w->t = t;
    return w;
  }
  void broadcast(Tensor&, int) override {}
  std::vector<double> all_reduce_sum(const std::vector<double>& v) override {
    std::vector<double> out;
    for (double x : v) out.push_back(2 * x);
    return out;
  }
  std::vector<uint64_t> all_gather(uint64_t value) override {
    return gathered.empty() ? std::vector<uint64_t>{value, value} : gathered;
  }
  void barrier() override {}
  [[noreturn]] void abort(int) override { throw InternalError("abort"); }
};

// A layer without parameters that counts the backward calls reaching it.
class Counter : public nn::Module {
 public:
  explicit Counter(int* calls) : calls_(calls) {}
  Tensor forward(const Tensor& x) override { return x; }
  Tensor backward(const Tensor& g) override {
    ++*calls_;
    return g;
  }
  std::string type_name() const override { return "Counter"; }

 private:
  int* calls_;
};

// Linear(6, 5) -> Counter -> ReLU -> Linear(5, 3) -> Counter, seeded: the counters mark where backward is.
std::shared_ptr<nn::Sequential> probe_model(int* calls) {
  Generator gen(3);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(6, 5, true, DType::F32, Device::cpu(), gen));
  m->push_back(std::make_shared<Counter>(calls));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(5, 3, true, DType::F32, Device::cpu(), gen));
  m->push_back(std::make_shared<Counter>(calls));
  return m;
}

// Every parameter's gradient after one forward of x (the probe model's input by default) and a backward of ones.
std::map<std::string, std::vector<float>> gradients_after_step(nn::Module& m, const Tensor& x = Tensor::randn({4, 6}, 9)) {
  m.zero_grad();
  const Tensor y = m.forward(x);
  m.backward(Tensor::ones(y.shape()));
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, p] : m.named_parameters()) out[name] = p->grad.to_vector<float>();
  return out;
}

}  // namespace

TEST_CASE("GradientReducer sums every gradient over the ranks, each bucket started during backward", "[distributed]") {
  int calls = 0;
  auto single = probe_model(&calls);
  const auto expected = gradients_after_step(*single);

  auto model = probe_model(&calls);
  MirrorComm comm;
  comm.backward_calls = &calls;
  // 64-byte buckets hold one tensor each: Linear(5, 3)'s weight and bias, then Linear(6, 5)'s.
  dist::GradientReducer reducer(comm, *model, 64);
  CHECK(reducer.stats().buckets == 4);
  for (int step = 0; step < 2; ++step) {  // twice: the buckets are reusable and zero_grad clears the views
    calls = 0;
    comm.launched_after.clear();
    comm.launched_numel.clear();
    gradients_after_step(*model);
    reducer.finish();
    for (const auto& [name, p] : model->named_parameters()) {
      const std::vector<float> got = p->grad.to_vector<float>();
      const std::vector<float>& want = expected.at(name);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == 2 * want[i]);
    }
    // Backward order: Linear(5, 3) is done after the first counter's backward, Linear(6, 5) after the second.
    CHECK(comm.launched_numel == std::vector<int64_t>{15, 3, 30, 5});
    CHECK(comm.launched_after == std::vector<int>{1, 1, 2, 2});
  }
  CHECK(reducer.stats().steps == 2);
  CHECK(reducer.stats().bytes_per_step == (15 + 3 + 30 + 5) * 4);
}

TEST_CASE("GradientReducer sums a CNN's gradients too: convolutions and BatchNorm accumulate into the buckets",
          "[distributed]") {
  const Tensor x = Tensor::randn({4, 1, 28, 28}, 21);
  models::Architecture arch = models::Architecture::cnn({4, 6}, {16});
  arch.dropout = 0;
  Generator g1(5), g2(5);
  auto single = models::make_model(arch, Device::cpu(), g1);
  auto model = models::make_model(arch, Device::cpu(), g2);
  const auto expected = gradients_after_step(*single, x);
  MirrorComm comm;
  dist::GradientReducer reducer(comm, *model, 256);
  CHECK(reducer.stats().buckets > 4);
  gradients_after_step(*model, x);
  reducer.finish();
  for (const auto& [name, p] : model->named_parameters()) {
    INFO(name);
    const std::vector<float> got = p->grad.to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == 2 * expected.at(name)[i]);
  }
}

TEST_CASE("GradientReducer starts a bucket that spans layers only after backward has passed all of them", "[distributed]") {
  int calls = 0;
  auto model = probe_model(&calls);
  MirrorComm comm;
  comm.backward_calls = &calls;
  dist::GradientReducer reducer(comm, *model, 1 << 20);  // one bucket: both Linear layers
  CHECK(reducer.stats().buckets == 1);
  gradients_after_step(*model);
  CHECK(comm.launched_after == std::vector<int>{2});
  reducer.finish();
}

TEST_CASE("GradientReducer starts every bucket of a step that ran no backward", "[distributed]") {
  int calls = 0;
  auto model = probe_model(&calls);
  MirrorComm comm;
  dist::GradientReducer reducer(comm, *model, 1 << 20);
  model->zero_grad();
  reducer.finish();  // a rank whose share of a small last batch was empty
  CHECK(comm.launched_numel == std::vector<int64_t>{53});
  for (const auto& p : model->parameters())
    for (float g : p->grad.to_vector<float>()) CHECK(g == 0);
}

TEST_CASE("GradientReducer with one process leaves the gradients alone", "[distributed]") {
  int calls = 0;
  auto model = probe_model(&calls);
  auto one = dist::make_single_process();
  const auto before = gradients_after_step(*model);
  dist::GradientReducer reducer(*one, *model, 64);
  const auto after = gradients_after_step(*model);
  reducer.finish();
  for (const auto& [name, p] : model->named_parameters()) CHECK(p->grad.to_vector<float>() == before.at(name));
  CHECK(after == before);
  CHECK(reducer.stats().steps == 0);
}

TEST_CASE("check_same_parameters names the ranks whose parameters differ from rank 0's", "[distributed]") {
  int calls = 0;
  auto model = probe_model(&calls);
  MirrorComm comm;
  const uint64_t mine = dist::parameter_checksum(*model);
  CHECK(dist::check_same_parameters(comm, *model, "after epoch 1") == mine);
  comm.gathered = {mine, mine, mine + 1, mine, mine + 7};
  CHECK_THROWS_WITH(dist::check_same_parameters(comm, *model, "after epoch 3"),
                    Catch::Contains("rank(s) 2, 4 differ from rank 0's after epoch 3"));
  // The checksum sees a single changed bit.
  auto p = model->parameters().front();
  std::vector<float> w = p->value.to_vector<float>();
  w[0] = std::nextafter(w[0], 1.0f);
  p->value.copy_from(Tensor::from_vector(w, p->value.shape()));
  CHECK(dist::parameter_checksum(*model) != mine);
}

TEST_CASE("Sequential's backward hook reports each child after its backward, last child first", "[distributed][nn]") {
  int calls = 0;
  auto model = probe_model(&calls);
  std::vector<std::pair<size_t, int>> seen;
  model->set_backward_hook([&](size_t child) { seen.emplace_back(child, calls); });
  gradients_after_step(*model);
  CHECK(seen == std::vector<std::pair<size_t, int>>{{4, 1}, {3, 1}, {2, 1}, {1, 2}, {0, 2}});
  model->set_backward_hook({});
  seen.clear();
  gradients_after_step(*model);
  CHECK(seen.empty());
}

TEST_CASE("launcher_world_size reads OpenMPI's and MPICH's variables", "[distributed]") {
  std::map<std::string, std::string> env;
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK(dist::launcher_world_size(get) == 0);
  env["PMI_SIZE"] = "3";
  CHECK(dist::launcher_world_size(get) == 3);
  env["OMPI_COMM_WORLD_SIZE"] = "2";
  CHECK(dist::launcher_world_size(get) == 2);
  env["OMPI_COMM_WORLD_SIZE"] = "two";
  CHECK_THROWS_WITH(dist::launcher_world_size(get), Catch::Contains("OMPI_COMM_WORLD_SIZE='two'"));
}

TEST_CASE("world() without a launcher is this process alone", "[distributed]") {
  dist::Communicator& w = dist::world();
  CHECK(w.size() == 1);
  CHECK(w.rank() == 0);
  CHECK(dist::multi_rank_world() == nullptr);
}
