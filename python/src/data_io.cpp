// ember._C.data (Fashion-MNIST from Debian's IDX files, the seeded DataLoader), ember.save/load of safetensors, and
// ember._C.train.defaults: the recipe `ember train` starts from, so Python runs train with the same settings.
#include "data/dataset.h"
#include "data/loader.h"
#include "formats/safetensors.h"
#include "python/src/bindings.h"
#include "train/config.h"

namespace ember::python {
namespace {

void init_dataset(py::module_& data) {
  data.attr("FASHION_MNIST_CLASSES") = py::cast(std::vector<std::string>(data::kFashionMnistClassNames.begin(),
                                                                         data::kFashionMnistClassNames.end()));
  data.def("default_fashion_mnist_dir", &data::default_fashion_mnist_dir);
  py::class_<data::Dataset>(data, "Dataset", "Images (N, H, W) uint8 and labels (N) int64 in host memory")
      .def(py::init([](const Tensor& images, const Tensor& labels) {
        data::Dataset d{images, labels};
        d.check();
        return d;
      }), py::arg("images"), py::arg("labels"))
      .def_readonly("images", &data::Dataset::images)
      .def_readonly("labels", &data::Dataset::labels)
      .def("__len__", &data::Dataset::size)
      .def("head", &data::Dataset::head, py::arg("n"));
  data.def("load_fashion_mnist", [](const py::object& dir, const std::string& split, int64_t limit) {
    EMBER_CHECK(split == "train" || split == "test", ValueError, "split must be \"train\" or \"test\", got \"", split, "\"");
    return data::load_fashion_mnist(dir.is_none() ? data::default_fashion_mnist_dir() : dir.cast<std::string>(),
                                    split == "train" ? data::Split::Train : data::Split::Test, limit);
  }, py::arg("root") = py::none(), py::arg("split") = "train", py::arg("limit") = -1);
  data.def("images_to_input", &data::images_to_input, py::arg("images"), py::arg("sample_shape"),
           py::arg("device") = Device::cpu(), "u8 images (N, H, W) as f32 model inputs (N, *sample_shape) in [0, 1]");
}

void init_loader(py::module_& data) {
  py::class_<data::DataLoader>(data, "_DataLoader")
      .def(py::init([](const data::Dataset& d, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last,
                       const py::object& device, bool pin_memory, const Shape& sample_shape) {
        return std::make_unique<data::DataLoader>(
            d, data::DataLoaderOptions{.batch_size = batch_size, .shuffle = shuffle, .seed = seed,
                                       .drop_last = drop_last, .device = to_device(device), .pin_memory = pin_memory,
                                       .sample_shape = sample_shape});
      }), py::keep_alive<1, 2>(), py::arg("dataset"), py::arg("batch_size") = 128, py::arg("shuffle") = true,
           py::arg("seed") = 0, py::arg("drop_last") = false, py::arg("device") = py::none(),
           py::arg("pin_memory") = true, py::arg("sample_shape") = Shape{})
      .def("start_epoch", &data::DataLoader::start_epoch, py::arg("epoch"))
      .def("next", [](data::DataLoader& l) -> py::object {
        data::Batch b;
        if (!l.next(b)) return py::none();
        return py::make_tuple(b.x, b.y);
      }, "The next (x, y) of the epoch, or None when it is done")
      .def("__len__", &data::DataLoader::batches_per_epoch)
      .def_property_readonly("epoch", &data::DataLoader::epoch)
      .def("order", &data::DataLoader::order);
}

void init_io(py::module_& m) {
  m.def("_save", [](const py::dict& tensors, const std::string& path, const std::map<std::string, std::string>& meta) {
    formats::NamedTensors named;
    for (auto [name, t] : tensors) named.emplace_back(name.cast<std::string>(), t.cast<Tensor>());
    formats::save_safetensors(path, named, meta);
  }, py::arg("tensors"), py::arg("path"), py::arg("metadata") = std::map<std::string, std::string>{});
  m.def("_load", [](const std::string& path, const py::object& device) {
    formats::SafetensorsFile file = formats::load_safetensors(path);
    Device d = to_device(device);
    py::dict out;
    for (auto& [name, t] : file.tensors) out[py::str(name)] = t.to(d);
    return py::make_tuple(out, file.metadata);
  }, py::arg("path"), py::arg("map_location") = py::none());
}

void init_train(py::module_& m) {
  py::module_ train = m.def_submodule("train", "The recipe of `ember train`");
  train.def("defaults", [](const std::string& model) {
    py::dict out;
    train::TrainConfig c = train::TrainConfig::defaults_for(model);
    train::TrainConfig::fields([&](const char* name, train::TrainConfig::Kind, const auto& value) {
      out[name] = py::cast(value);
    }, c);
    return out;
  }, py::arg("model") = "mlp", "Every setting of `ember train --model <model>`, by TrainConfig's field names");
}

}  // namespace

void init_data_io(py::module_& m) {
  py::module_ data = m.def_submodule("data", "Fashion-MNIST and the DataLoader");
  init_dataset(data);
  init_loader(data);
  init_io(m);
  init_train(m);
}

}  // namespace ember::python
