// safetensors writer: the header laid out as the reference writer does, then atomic, fsynced saves.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "formats/file.h"
#include "formats/safetensors.h"
#include "formats/safetensors_detail.h"

namespace ember::formats {

using detail::json;
using detail::kSupported;
using detail::quote;

namespace {

const char* safetensors_code(DType dtype) {
  for (const auto& d : kSupported)
    if (d.dtype == dtype) return d.code;
  throw InternalError("safetensors_code: unknown dtype");
}

std::string json_string(const std::string& s, const char* what) {
  try {
    return json(s).dump();
  } catch (const json::exception&) {
    throw ValueError(ember::detail::concat("save_safetensors: ", what, " ", quote(s),
                                           " is not valid UTF-8; safetensors headers are UTF-8 JSON"));
  }
}

// ValueError for a tensor list no reader could take back: empty, reserved or repeated names, no data.
void check_tensors(const NamedTensors& tensors) {
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    EMBER_CHECK(!name.empty(), ValueError, "save_safetensors: tensor ", i,
                " has an empty name; give every tensor a name");
    EMBER_CHECK(name != "__metadata__", ValueError,
                "save_safetensors: \"__metadata__\" is reserved for the metadata; rename tensor ", i);
    EMBER_CHECK(names.insert(name).second, ValueError, "save_safetensors: tensor name ", quote(name),
                " appears twice; names must be unique");
    EMBER_CHECK(t.defined(), ValueError, "save_safetensors: tensor ", quote(name),
                " is undefined (default-constructed)");
    EMBER_CHECK(!t.device().is_meta(), ValueError, "save_safetensors: tensor ", quote(name),
                " is on meta: it has a shape but no data to save; run on cpu or cuda instead");
  }
}

// "name":{"dtype":"F32","shape":[2,3],"data_offsets":[begin,end]}
std::string tensor_entry(const std::string& name, const Tensor& t, uint64_t begin) {
  std::string h = json_string(name, "tensor name");
  h += ":{\"dtype\":\"";
  h += safetensors_code(t.dtype());
  h += "\",\"shape\":[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d) h += ',';
    h += std::to_string(t.shape()[static_cast<size_t>(d)]);
  }
  h += "],\"data_offsets\":[";
  h += std::to_string(begin);
  h += ',';
  h += std::to_string(begin + t.nbytes());
  h += "]}";
  return h;
}

// Header JSON as the reference writer lays it out ("__metadata__" first, then tensors with dtype,
// shape, data_offsets, no spaces), padded with spaces to a multiple of 8 so the data is aligned.
std::string build_header(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  check_tensors(tensors);
  std::string h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) h += ',';
      h += json_string(k, "metadata key");
      h += ':';
      h += json_string(v, "metadata value");
      first = false;
    }
    h += "}";
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (h.size() > 1) h += ",";
    h += tensor_entry(name, t, offset);
    offset += t.nbytes();
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  EMBER_CHECK(h.size() <= kSafetensorsMaxHeaderBytes, ValueError, "save_safetensors: the header would be ", h.size(),
              " bytes, over the ", kSafetensorsMaxHeaderBytes,
              "-byte cap readers enforce; save fewer tensors per file");
  return h;
}

std::string length_prefix(const std::string& header) {
  const uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out;
}

}  // namespace

// ---- public API --------------------------------------------------------------------------------

std::vector<uint8_t> safetensors_to_bytes(const NamedTensors& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  const std::string header = build_header(tensors, metadata);
  const std::string prefix = length_prefix(header);
  size_t total = prefix.size() + header.size();
  for (const auto& entry : tensors) total += entry.second.nbytes();
  std::vector<uint8_t> out(total);
  std::memcpy(out.data(), prefix.data(), prefix.size());
  std::memcpy(out.data() + prefix.size(), header.data(), header.size());
  size_t at = prefix.size() + header.size();
  for (const auto& [name, t] : tensors) {
    const Tensor host = t.to(Device::cpu()).contiguous();
    if (host.nbytes() > 0) std::memcpy(out.data() + at, host.raw_data(), host.nbytes());
    at += host.nbytes();
  }
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string header = build_header(tensors, metadata);  // every ValueError before touching the disk
  AtomicFile file(path, "checkpoint");
  const std::string prefix = length_prefix(header);
  file.write(prefix.data(), prefix.size());
  file.write(header.data(), header.size());
  for (const auto& [name, t] : tensors) {
    const Tensor host = t.to(Device::cpu()).contiguous();  // one tensor at a time bounds host memory
    if (host.nbytes() > 0) file.write(host.raw_data(), host.nbytes());
  }
  file.commit();
}

}  // namespace ember::formats
