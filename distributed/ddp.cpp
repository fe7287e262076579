// Broadcast of the start, the bucketed gradient reducer and the cross-rank parameter check.
#include "distributed/ddp.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/error.h"
#include "core/ops.h"

namespace ember::dist {

void broadcast_state(dist::Communicator& comm, nn::Module& model, int root) {
  if (comm.size() == 1) return;
  for (auto& [name, t] : model.state_dict()) comm.broadcast(t, root);
}

uint64_t parameter_checksum(const nn::Module& model) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor v = p->value.to(Device::cpu()).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(v.raw_data());
    for (size_t i = 0; i < v.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

uint64_t check_same_parameters(dist::Communicator& comm, const nn::Module& model, const std::string& when) {
  const std::vector<uint64_t> sums = comm.all_gather(parameter_checksum(model));
  std::string differ;
  for (size_t r = 1; r < sums.size(); ++r)
    if (sums[r] != sums[0]) differ += detail::concat(differ.empty() ? "" : ", ", r);
  EMBER_CHECK(differ.empty(), NumericalError, "the parameters of rank(s) ", differ, " differ from rank 0's ", when,
              " (checksums compared over ", sums.size(),
              " ranks); the ranks no longer train one model. This is a bug in ember's data-parallel step: please "
              "report it with the command line");
  return sums[0];
}

struct GradientReducer::Bucket {
  Tensor flat;
  int64_t params = 0, ready = 0;
  std::unique_ptr<dist::Work> work;
};

GradientReducer::GradientReducer(dist::Communicator& comm, nn::Module& model, int64_t bucket_bytes)
    : comm_(comm), hooked_(dynamic_cast<nn::Sequential*>(&model)) {
  if (comm.size() == 1) return;
  // The units backward finishes one by one: a Sequential's children, or else the whole model at once.
  std::vector<const nn::Module*> units{&model};
  if (hooked_ != nullptr) {
    units.clear();
    for (size_t i = 0; i < hooked_->size(); ++i) units.push_back(&(*hooked_)[i]);
  }
  // Buckets fill in the order backward finishes the gradients: last child first.
  struct Slot {
    nn::ParameterPtr p;
    size_t bucket;
    int64_t offset;
  };
  std::vector<Slot> slots;
  std::vector<int64_t> bucket_numel;
  buckets_of_child_.resize(units.size());
  int64_t open_bytes = 0;
  for (size_t i = units.size(); i-- > 0;) {
    for (const auto& p : units[i]->parameters()) {
      const auto bytes = static_cast<int64_t>(p->value.nbytes());
      if (bucket_numel.empty() || (open_bytes > 0 && open_bytes + bytes > bucket_bytes)) {
        bucket_numel.push_back(0);
        open_bytes = 0;
      }
      slots.push_back({p, bucket_numel.size() - 1, bucket_numel.back()});
      buckets_of_child_[i].push_back(bucket_numel.size() - 1);
      bucket_numel.back() += p->value.numel();
      open_bytes += bytes;
    }
  }
  const Device device = model.device();
  const DType dtype = model.dtype();
  for (int64_t n : bucket_numel) {
    auto b = std::make_unique<Bucket>();
    b->flat = Tensor::zeros({n}, dtype, device);
    buckets_.push_back(std::move(b));
  }
  for (const Slot& s : slots) {
    EMBER_CHECK(s.p->value.dtype() == dtype, DTypeError, "data-parallel training needs every parameter in ",
                dtype_name(dtype), ", got one in ", dtype_name(s.p->value.dtype()));
    Bucket& b = *buckets_[s.bucket];
    Tensor view = b.flat.slice(0, s.offset, s.offset + s.p->value.numel()).view(s.p->value.shape());
    view.copy_from(s.p->grad);
    s.p->grad = view;
    ++b.params;
    stats_.bytes_per_step += static_cast<int64_t>(s.p->value.nbytes());
  }
  stats_.buckets = static_cast<int64_t>(buckets_.size());
  if (hooked_ != nullptr) hooked_->set_backward_hook([this](size_t child) { child_done(child); });
}

GradientReducer::~GradientReducer() {
  if (comm_.size() == 1) return;
  if (hooked_ != nullptr) hooked_->set_backward_hook({});
  for (auto& b : buckets_)
    if (b->work) try {
        b->work->wait();  // never leave a collective writing into freed memory
      } catch (...) {
      }
}

void GradientReducer::child_done(size_t child) {
  backward_end_ = std::chrono::steady_clock::now();
  for (size_t k : buckets_of_child_[child]) {
    Bucket& b = *buckets_[k];
    if (++b.ready == b.params) launch(b);
  }
}

void GradientReducer::launch(Bucket& b) { b.work = comm_.all_reduce_sum_async(b.flat); }

void GradientReducer::finish() {
  if (comm_.size() == 1) return;
  // Exposed time runs from the end of backward (its last hook), not from this call: a main thread that
  // shares its core with the communication thread may not run again until the collective is over.
  const auto start = buckets_.front()->work ? backward_end_ : std::chrono::steady_clock::now();
  for (auto& b : buckets_)
    if (!b->work) launch(*b);  // a step with no local rows ran no backward: its zero gradients still count
  for (auto& b : buckets_) {
    std::unique_ptr<dist::Work> work = std::move(b->work);
    b->ready = 0;
    work->wait();
    stats_.collective_seconds += work->seconds();
  }
  stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++stats_.steps;
}

std::string GradientReducer::summary() const {
  if (stats_.steps == 0) return "no gradient all-reduce";
  char line[200];
  const double mb = double(stats_.bytes_per_step) / 1e6;
  const auto buckets = static_cast<long long>(stats_.buckets);
  if (stats_.collective_seconds == 0) {  // NCCL: the collectives run on the collective stream, the host never waits
    std::snprintf(line, sizeof line, "%lld bucket(s), %.2f MB a step on the device's collective stream (not timed)",
                  buckets, mb);
    return line;
  }
  const double per_step = stats_.collective_seconds / double(stats_.steps);
  const double hidden = std::clamp(1 - stats_.wait_seconds / stats_.collective_seconds, 0.0, 1.0);
  std::snprintf(line, sizeof line, "%lld bucket(s), %.2f MB a step, all-reduce %.2f ms a step, %.0f%% of it hidden behind backward",
                buckets, mb, 1e3 * per_step, 100 * hidden);
  return line;
}

}  // namespace ember::dist
