// Device parsing, printing and choosing the best device.
#include "core/device.h"

#include <charconv>

#include "base/error.h"

namespace ember {

Device Device::parse(std::string_view text) {
  auto bad = [&](const char* why) {
    return ValueError(detail::concat("invalid device string '", text, "': ", why,
                                     ". Expected cpu, cuda, cuda:N (N >= 0) or meta."));
  };
  if (text == "cpu") return cpu();
  if (text == "meta") return meta();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    std::string_view num = text.substr(5);
    int index = -1;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
    if (num.empty() || ec != std::errc() || ptr != num.data() + num.size()) throw bad("the index is not a number");
    if (index < 0) throw bad("the index is negative");
    return cuda(index);
  }
  throw bad("unknown device type");
}

Device Device::best() { return cuda::is_available() && !cuda::is_emulated() ? cuda(0) : cpu(); }

std::string Device::str() const {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::Meta: return "meta";
    case DeviceType::CUDA: return "cuda:" + std::to_string(index);
  }
  return "?";
}

}  // namespace ember
