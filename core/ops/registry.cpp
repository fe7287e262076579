// The op registry's table (the rows live in registry_<family>.cpp) and the helpers its cases and users share.
#include "core/ops/registry.h"

#include <algorithm>
#include <cmath>

#include "core/ops/registry_cases.h"

namespace ember::ops {

namespace registry {

Tensor grid_values(const Shape& shape, uint64_t seed, DType dtype, double low, double high) {
  Tensor t = Tensor::rand(shape, seed, DType::F64, Device::cpu(), low, high);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::round(p[i] * 64.0) / 64.0;
  return t.to(dtype);
}

Tensor smooth_values(const Shape& shape, uint64_t seed, DType dtype, double low, double high) {
  return Tensor::rand(shape, seed, dtype, Device::cpu(), low, high);
}

Tensor whole_values(const Shape& shape, uint64_t seed, DType dtype, double low, double high) {
  Tensor t = Tensor::rand(shape, seed, DType::F64, Device::cpu(), low, high + 1);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::min(std::floor(p[i]), high);
  return t.to(dtype);
}

Tensor class_labels(int64_t rows, int64_t classes, DType dtype) {
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) labels[static_cast<size_t>(r)] = (r * 7 + 3) % classes;
  return Tensor::from_vector(labels, {rows}).to(dtype);
}

DType label_dtype(DType logits) { return logits == DType::F64 ? DType::I32 : DType::I64; }

Matrix matrix(int64_t size, int64_t width) {
  if (size <= width) return {1, std::max<int64_t>(size, 1)};
  return {size / width, width};
}

int64_t odd_side(int64_t size, int64_t planes) {
  const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(size) / static_cast<double>(planes)));
  return std::max<int64_t>(side, 1) | 1;
}

std::string count_label(int64_t n) {
  if (n >= (int64_t(1) << 20) && n % (int64_t(1) << 20) == 0) return "n=" + std::to_string(n >> 20) + "M";
  if (n >= 1024 && n % 1024 == 0) return "n=" + std::to_string(n >> 10) + "K";
  return "n=" + std::to_string(n);
}

std::string shape_label(const Shape& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s.empty() ? "scalar" : s;
}

OpCase case_for(const Shape& main_shape) {
  OpCase c;
  c.elements = shape_numel(main_shape);
  c.label = main_shape.size() == 1 ? count_label(main_shape[0]) : shape_label(main_shape);
  return c;
}

}  // namespace registry

const std::vector<OpRow>& op_registry() {
  static const std::vector<OpRow> rows = [] {
    std::vector<OpRow> all;
    for (auto family : {registry::elementwise_rows, registry::copy_rows, registry::random_rows, registry::linear_rows,
                        registry::reduce_rows, registry::softmax_xent_rows, registry::optim_rows,
                        registry::guard_rows, registry::conv_rows, registry::pool_rows, registry::batchnorm_rows,
                        registry::layernorm_rows, registry::gelu_rows, registry::bmm_rows,
                        registry::embedding_rows, registry::heads_rows, registry::attention_rows,
                        registry::tokens_rows})
      for (OpRow& row : family()) all.push_back(std::move(row));
    return all;
  }();
  return rows;
}

const OpRow& op_row(const std::string& name) {
  std::string names;
  for (const OpRow& row : op_registry()) {
    if (name == row.name) return row;
    names += (names.empty() ? "" : ", ") + std::string(row.name);
  }
  throw ValueError(detail::concat("no op called '", name, "' in the op registry; its rows are: ", names));
}

std::vector<Tensor> inputs_on(const OpCase& c, Device device) {
  std::vector<Tensor> args;
  args.reserve(c.inputs.size());
  for (const Tensor& t : c.inputs) args.push_back(device.is_cpu() ? t.clone() : t.to(device));
  return args;
}

std::vector<Tensor> run_on(const OpCase& c, Device device) {
  std::vector<Tensor> args = inputs_on(c, device);
  return c.run(device, args);
}

double counted_bytes(const OpCase& c, const std::vector<Tensor>& outputs) {
  if (c.bytes > 0) return c.bytes;
  double bytes = 0;
  for (const Tensor& t : c.inputs) bytes += static_cast<double>(t.nbytes());
  for (const Tensor& t : outputs) bytes += static_cast<double>(t.nbytes());
  return bytes;
}

std::vector<std::string> kernel_names(const char* column) {
  std::vector<std::string> names(1);
  for (const char* p = column; *p != '\0'; ++p) {
    if (*p == ',') names.emplace_back();
    else if (*p != ' ') names.back() += *p;
  }
  names.erase(std::remove(names.begin(), names.end(), std::string()), names.end());
  return names;
}

}  // namespace ember::ops
