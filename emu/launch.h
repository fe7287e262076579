// emu::launch<Kernel>(grid, block, shared_bytes, stream, args...): the emulated `kernel<<<...>>>(args...)`.
// The arguments are converted to the kernel's parameter types and copied once, as the CUDA runtime does.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "emu/api.h"
#include "emu/device.h"
#include "emu/exec.h"

namespace emu {
namespace detail {

template <typename F>
struct KernelParams;
template <typename... P>
struct KernelParams<void (*)(P...)> {
  using type = std::tuple<std::decay_t<P>...>;
};

// "... [with auto Kernel = ns::{anonymous}::name<float>]" -> "name<float>".
std::string kernel_name(const char* pretty_function);
// Calls the kernel once on the host with probing on: its entry reports its launch bounds and returns.
KernelInfo probe(std::string name, const std::function<void()>& call);
// Checks the launch as the runtime would, then queues it on `stream`; the result is cudaGetLastError's.
void submit(Launch&& launch, cudaStream_t stream);

template <auto Kernel>
const char* pretty_function() {
  return __PRETTY_FUNCTION__;
}

}  // namespace detail

template <auto Kernel, typename... Args>
void launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  using Params = typename detail::KernelParams<decltype(Kernel)>::type;
  static_assert(std::tuple_size_v<Params> == sizeof...(Args), "a kernel launch needs one argument per parameter");
  auto params = std::make_shared<const Params>(std::forward<Args>(args)...);
  static const detail::KernelInfo info =
      detail::probe(detail::kernel_name(detail::pretty_function<Kernel>()), [&] { std::apply(Kernel, *params); });
  detail::submit(detail::Launch{&info, grid, block, shared_bytes, [params] { std::apply(Kernel, *params); }}, stream);
}

}  // namespace emu
