// ember._C.nn's Transformer modules under PyTorch's names and argument orders: LayerNorm, GELU,
// MultiheadAttention (self-attention: one input), TransformerEncoderLayer and TransformerEncoder, whose forward
// takes PyTorch's src_key_padding_mask and is_causal.
#include "nn/nn.h"
#include "python/src/bindings.h"

namespace ember::python {
namespace {

using nn::Module;
template <typename M>
using ModuleClass = py::class_<M, Module, std::shared_ptr<M>>;
using dt = py::object;

nn::AttentionMask mask_of(const py::object& key_padding_mask, bool is_causal) {
  return {key_padding_mask.is_none() ? Tensor() : key_padding_mask.cast<Tensor>(), is_causal};
}

void init_norm_activation(py::module_& nn) {
  ModuleClass<nn::LayerNorm>(nn, "LayerNorm")
      .def(py::init([](int64_t n, double eps, bool affine, const dt& d, const dt& dev) {
        return std::make_shared<nn::LayerNorm>(n, eps, affine, to_dtype(d), to_device(dev));
      }), py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true, py::kw_only(),
           py::arg("dtype") = py::none(), py::arg("device") = py::none())
      .def_property_readonly("weight", [](const nn::LayerNorm& l) { return l.weight(); })
      .def_property_readonly("bias", [](const nn::LayerNorm& l) { return l.bias(); });
  ModuleClass<nn::GELU>(nn, "GELU").def(py::init<std::string>(), py::arg("approximate") = "none");
}

void init_attention(py::module_& nn) {
  ModuleClass<nn::MultiheadAttention>(nn, "MultiheadAttention")
      .def(py::init([](int64_t e, int64_t h, double p, bool bias, bool batch_first, const dt& d, const dt& dev) {
        return std::make_shared<nn::MultiheadAttention>(e, h, p, bias, batch_first, to_dtype(d), to_device(dev));
      }), py::arg("embed_dim"), py::arg("num_heads"), py::arg("dropout") = 0.0, py::arg("bias") = true,
           py::arg("batch_first") = false, py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none())
      .def("__call__", [](nn::MultiheadAttention& m, const Tensor& x, const py::object& mask, bool causal) {
        return m.forward(x, mask_of(mask, causal));
      }, py::arg("input"), py::arg("key_padding_mask") = py::none(), py::arg("is_causal") = false,
           "Self-attention of input (query = key = value); returns the output only (no attention weights)")
      .def_property_readonly("in_proj_weight", [](const nn::MultiheadAttention& m) { return m.in_proj_weight(); })
      .def_property_readonly("in_proj_bias", [](const nn::MultiheadAttention& m) { return m.in_proj_bias(); });
}

nn::TransformerEncoderLayerOptions layer_options(int64_t d_model, int64_t nhead, int64_t ff, double dropout,
                                                 const std::string& activation, double eps, bool batch_first,
                                                 bool norm_first) {
  return {d_model, nhead, ff, dropout, activation, eps, batch_first, norm_first};
}

void init_encoder(py::module_& nn) {
  ModuleClass<nn::TransformerEncoderLayer>(nn, "TransformerEncoderLayer")
      .def(py::init([](int64_t d_model, int64_t nhead, int64_t ff, double p, const std::string& act, double eps,
                       bool batch_first, bool norm_first, const dt& d, const dt& dev) {
        return std::make_shared<nn::TransformerEncoderLayer>(
            layer_options(d_model, nhead, ff, p, act, eps, batch_first, norm_first), to_dtype(d), to_device(dev));
      }), py::arg("d_model"), py::arg("nhead"), py::arg("dim_feedforward") = 2048, py::arg("dropout") = 0.1,
           py::arg("activation") = "relu", py::arg("layer_norm_eps") = 1e-5, py::arg("batch_first") = false,
           py::arg("norm_first") = false, py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none())
      .def("__call__", [](nn::TransformerEncoderLayer& m, const Tensor& x, const py::object& mask, bool causal) {
        return m.forward(x, mask_of(mask, causal));
      }, py::arg("src"), py::arg("src_key_padding_mask") = py::none(), py::arg("is_causal") = false);
  ModuleClass<nn::TransformerEncoder>(nn, "TransformerEncoder")
      .def(py::init([](const nn::TransformerEncoderLayer& layer, int64_t n, bool final_norm, const dt& dev) {
        const Module& m = layer;
        return std::make_shared<nn::TransformerEncoder>(layer.options(), n, final_norm, m.dtype(),
                                                        to_device(dev, m.device()));
      }), py::arg("encoder_layer"), py::arg("num_layers"), py::arg("final_norm") = false, py::kw_only(),
           py::arg("device") = py::none(),
           "num_layers fresh layers with encoder_layer's options (their own weights, as PyTorch's deep copies "
           "start alike only in shape); final_norm adds PyTorch's norm=LayerNorm(d_model)")
      .def("__call__", [](nn::TransformerEncoder& m, const Tensor& x, const py::object& mask, bool causal) {
        return m.forward(x, mask_of(mask, causal));
      }, py::arg("src"), py::arg("src_key_padding_mask") = py::none(), py::arg("is_causal") = false);
}

}  // namespace

void init_nn_transformer(py::module_& nn) {
  init_norm_activation(nn);
  init_attention(nn);
  init_encoder(nn);
}

}  // namespace ember::python
