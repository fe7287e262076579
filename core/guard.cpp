// NonFiniteGuard: argument checks, the report's memory, and the dispatch to the guard kernels.
#include "core/guard.h"

#include <string>

#include "core/checks.h"
#include "core/dispatch.h"

namespace ember {

namespace k = kernels;

NonFiniteGuard::NonFiniteGuard(Device device, Mode mode)
    : device_(device), mode_(mode), state_(Tensor::zeros({sizeof(k::GuardState) / sizeof(int64_t)}, DType::I64, device)) {
  EMBER_CHECK(!device.is_meta(), ValueError, "NonFiniteGuard: a meta device holds no values to check; use cpu or cuda");
  if (device.is_cuda()) {
    void* device_address = nullptr;
    report_host_ = static_cast<k::GuardReport*>(cuda::runtime::malloc_mapped(sizeof(k::GuardReport), &device_address));
    report_device_ = static_cast<k::GuardReport*>(device_address);
    *report_host_ = k::GuardReport{};
  } else {
    report_host_ = report_device_ = new k::GuardReport{};
  }
}

NonFiniteGuard::~NonFiniteGuard() {
  if (device_.is_cuda()) {
    // A queued check may still write the report: let it finish before the memory goes.
    try {
      cuda::runtime::stream_synchronize(detail::stream_of(device_));
    } catch (const Error&) {  // a failed device: freeing is all that is left to do
    }
    cuda::runtime::free_pinned(report_host_);
  } else {
    delete report_host_;
  }
}

void NonFiniteGuard::check(int64_t step, const std::vector<Tensor>& tensors) {
  constexpr const char* op = "NonFiniteGuard::check";
  EMBER_CHECK(tensors.size() <= static_cast<size_t>(k::kGuardMaxTensors), ValueError, op, "(): ", tensors.size(),
              " tensors, at most ", k::kGuardMaxTensors, " per step; check the gradients in several guards");
  const DType dtype = tensors.empty() ? DType::F32 : tensors.front().dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = "tensors[" + std::to_string(i) + "]";
    check_defined(op, {name.c_str(), tensors[i]});
    check_floating(op, {name.c_str(), tensors[i]});
    check_same_device(op, {{"guard", state_}, {name.c_str(), tensors[i]}});
    check_same_dtype(op, {{"tensors[0]", tensors.front()}, {name.c_str(), tensors[i]}});
    EMBER_CHECK(tensors[i].is_contiguous(), ValueError, op, "(): ", name, " must be contiguous (call .contiguous())");
  }
  auto* state = reinterpret_cast<k::GuardState*>(state_.data<int64_t>());
  const bool sticky = mode_ == Mode::Stop;
  visit_floating(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    k::GuardTensors<T> list{};
    list.count = static_cast<int>(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      list.data[i] = tensors[i].data<T>();
      list.numel[i] = tensors[i].numel();
    }
    if (device_.is_cpu()) k::cpu::check_finite<T>(list, step, sticky, state, report_device_);
    else EMBER_CUDA_CALL(k::cuda::check_finite<T>(list, step, sticky, state, report_device_, detail::stream_of(device_)));
  });
}

int64_t NonFiniteGuard::first_bad_step() const {
  // The device writes this word while the host reads it; volatile keeps the read from being cached.
  return *static_cast<volatile const int64_t*>(&report_host_->first_step);
}

k::GuardReport NonFiniteGuard::report() const {
  if (device_.is_cuda()) cuda::runtime::stream_synchronize(detail::stream_of(device_));
  return *report_host_;
}

const k::GuardState* NonFiniteGuard::state() const {
  return reinterpret_cast<const k::GuardState*>(state_.data<int64_t>());
}

}  // namespace ember
