// Run directories written before the layout of issue 26 (by ember at d1930e9, tests/fixtures/checkpoints/d1930e9)
// still work: `ember eval` reads their models and reports what that ember reported, and `--resume` continues
// their runs to the very bits that ember's resume wrote.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "formats/safetensors.h"
#include "support/run_ember.h"

namespace fs = std::filesystem;
using ember::test::fresh_dir;
using ember::test::have_dataset;
using ember::test::run_ember;

namespace {

const fs::path kOld = fs::path(EMBER_SOURCE_DIR) / "tests" / "fixtures" / "checkpoints" / "d1930e9";

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

// `ember eval --json` on `model` matches {accuracy, loss} as that ember printed them: the accuracy exactly, the loss
// to float precision (it is a float sum of batch means, and the evaluation batch is 250 images now, 1000 then).
void check_eval(const fs::path& model, const nlohmann::json& expected) {
  const auto r = run_ember("eval --device cpu --json --checkpoint " + model.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  const nlohmann::json got = nlohmann::json::parse(r.output);
  CHECK(got.at("accuracy").get<double>() == expected.at("accuracy").get<double>());
  CHECK(got.at("loss").get<double>() == Approx(expected.at("loss").get<double>()).epsilon(1e-6));
}

// The fixtures were written with OpenBLAS's SkylakeX (AVX-512) kernels. Its other kernels sum the same products in
// other orders: its AVX2 kernels (OPENBLAS_CORETYPE=Haswell, set on some machines here, DESIGN.md) within their blocks
// (13 of the resumed tensors differ), its Cooperlake kernels in depth blocks of 320 rather than 448. So the resume
// runs on the SkylakeX kernels wherever the CPU has AVX-512 (ember's own convolution products sum as they do,
// kernels/cpu/conv_packed.h); where it has not, the bits cannot be those of the fixtures' machine.
std::string fixture_blas() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "OPENBLAS_CORETYPE=SkylakeX ";
#endif
  return "";
}

}  // namespace

TEST_CASE("Run directories written by d1930e9's ember evaluate and resume to the same bits", "[apps]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed; `make test` installs it");
    return;
  }
  for (const char* kind : {"mlp", "cnn"}) {
    INFO(kind << ", OpenBLAS core pinned: " << (fixture_blas().empty() ? "no" : fixture_blas()));
    const fs::path old = kOld / kind;
    const nlohmann::json expected = read_json(old / "expected.json");
    check_eval(old / "model.safetensors", expected.at("eval"));
    const fs::path dir = fresh_dir(std::string("old-") + kind);
    fs::copy_file(old / "model.safetensors", dir / "model.safetensors");
    fs::copy_file(old / "state.safetensors", dir / "state.safetensors");
    const auto r = ember::test::run_command(fixture_blas() + EMBER_BINARY + " train --resume " + dir.string() +
                                            " --epochs 2 --device cpu --quiet");
    INFO(r.output);
    REQUIRE(r.code == 0);
    const auto resumed = ember::formats::load_safetensors((dir / "model.safetensors").string());
    const auto then = ember::formats::load_safetensors((old / "resumed-model.safetensors").string());
    REQUIRE(resumed.tensors.size() == then.tensors.size());
    CHECK(resumed.metadata == then.metadata);
    for (size_t i = 0; i < then.tensors.size(); ++i) {
      const auto& [name, want] = then.tensors[i];
      const auto& got = resumed.tensors[i].second;
      INFO(name);
      CHECK(resumed.tensors[i].first == name);
      REQUIRE(got.nbytes() == want.nbytes());
      CHECK(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()) == 0);
    }
    check_eval(dir / "model.safetensors", expected.at("resumed_eval"));
    fs::remove_all(dir);
  }
}
