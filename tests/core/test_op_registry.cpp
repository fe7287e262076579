// The op registry (core/ops/registry.h) is complete and right: every op core/ops/*.h declares has a row, every CUDA
// kernel kernels/*.h declares is named by one, the names a row gives exist, and every row runs on the cpu and
// infers its outputs' shapes and dtypes on the meta device. The CUDA twins: tests/cuda/test_op_registry_cuda.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/registry.h"

namespace fs = std::filesystem;
using namespace ember;

namespace {

const fs::path kSource = EMBER_SOURCE_DIR;

// Declared in core/ops/*.h but not ops: no row runs them, each for its reason.
const std::map<std::string, std::string> kOpExemptions = {
    {"set_gemm_backend", "a setting, not an op: the matmul_cublas row runs ops::matmul under GemmBackend::Cublas"},
    {"gemm_backend", "reads the setting above"},
};
// Declared in a `namespace cuda` of kernels/*.h but computing nothing a row could compare.
const std::map<std::string, std::string> kCudaExemptions = {
    {"sum_workspace_elems", "the scratch size ops::sum allocates for cuda::sum"},
    {"conv2d_backward_weight_workspace_elems", "the scratch size ops::conv2d_backward_weight_ allocates"},
    {"release_cublas_handles", "frees the cached cuBLAS handles at exit"},
};
// Entry points outside core/ops/*.h that reach a kernel: each must be some row's op.
const std::vector<std::string> kTensorPaths = {"Tensor::contiguous", "Tensor::rand", "Tensor::randn",
                                               "NonFiniteGuard::check"};

std::string read(const fs::path& p) {
  std::ifstream f(p);
  REQUIRE(f.good());
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A header as the parser sees it: comments gone, line continuations joined, function-like macros collected and
// every preprocessor line dropped.
struct Header {
  std::string code;
  std::map<std::string, std::string> macros;  // name -> body
};

Header preprocess(const std::string& text) {
  static const std::regex comments(R"(//[^\n]*|/\*[\s\S]*?\*/)");
  static const std::regex define(R"(^\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)$)");
  std::string joined = std::regex_replace(std::regex_replace(text, comments, " "), std::regex(R"(\\\n)"), " ");
  Header h;
  std::istringstream lines(joined);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, define)) h.macros[m[1]] = m[3];
    if (line.find_first_not_of(" \t") != std::string::npos && line[line.find_first_not_of(" \t")] == '#') continue;
    h.code += line + '\n';
  }
  return h;
}

// The name a declaration statement declares, when it declares a function: the first identifier before a '('.
std::string function_name(const std::string& statement) {
  static const std::regex name(R"(([A-Za-z_]\w*)\s*\()");
  std::smatch m;
  return std::regex_search(statement, m, name) ? std::string(m[1]) : std::string();
}

// Names of the functions declared at the top level of every `namespace <ns> {` block (bodies of structs, enums and
// inline functions skipped); a statement that calls a function-like macro of the header is the macro's body.
std::vector<std::string> declared_functions(const Header& h, const std::string& ns) {
  std::vector<std::string> names;
  auto add_statement = [&](const std::string& statement, auto& self) -> void {
    for (const auto& [macro, body] : h.macros) {
      std::smatch call;
      if (!std::regex_search(statement, call, std::regex("\\b" + macro + R"(\s*\()"))) continue;
      std::istringstream parts(body);
      for (std::string part; std::getline(parts, part, ';');) self(part, self);
      // What follows the call's closing parenthesis is a statement of its own.
      size_t end = size_t(call.position() + call.length());
      for (int open = 1; end < statement.size() && open > 0; ++end)
        open += statement[end] == '(' ? 1 : statement[end] == ')' ? -1 : 0;
      self(statement.substr(end), self);
      return;
    }
    if (std::string name = function_name(statement); !name.empty()) names.push_back(name);
  };
  const std::regex open("namespace\\s+" + ns + "\\s*\\{");
  for (std::sregex_iterator it(h.code.begin(), h.code.end(), open), end; it != end; ++it) {
    std::string statement;
    int depth = 1;
    for (size_t i = size_t(it->position() + it->length()); i < h.code.size() && depth > 0; ++i) {
      const char ch = h.code[i];
      if (ch == '{') ++depth;
      if (ch == '}') --depth;
      if (depth == 1 && ch != '}' && ch != ';') statement += ch;
      if ((depth == 1 && (ch == ';' || ch == '}')) || depth == 0) {
        add_statement(statement, add_statement);
        statement.clear();
      }
    }
  }
  return names;
}

std::vector<fs::path> headers(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".h") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Function name -> the header declaring it, for namespace `ns` of every header in `dir`.
std::map<std::string, std::string> declared_in(const fs::path& dir, const std::string& ns) {
  std::map<std::string, std::string> out;
  for (const fs::path& p : headers(dir)) {
    if (p.filename().string().rfind("registry", 0) == 0) continue;  // the registry itself declares no op
    for (const std::string& name : declared_functions(preprocess(read(p)), ns)) out[name] = p.filename().string();
  }
  return out;
}

std::string strip_prefix(const std::string& name, const std::string& prefix) {
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : std::string();
}

}  // namespace

TEST_CASE("The header parser finds plain, templated and macro-declared functions and skips bodies", "[core]") {
  const Header h = preprocess(
      "#define API(...) template <typename T> void fill(T* out __VA_ARGS__); /* c */ \\\n"
      "  void twice(int x __VA_ARGS__);\n"
      "namespace ember::ops {\nstruct S { int f(int); };\nenum class E { A, B };\n// Tensor commented(int);\n"
      "Tensor add(const Tensor& a,\n           const Tensor& b);\ninline int g(int x) { return h(x); }\n}\n"
      "namespace cuda {\nAPI(, Stream s)\ntemplate <typename T, typename L> void count(const T* x, L y);\n}\n");
  CHECK(declared_functions(h, "ember::ops") == std::vector<std::string>{"add", "g"});
  CHECK(declared_functions(h, "cuda") == std::vector<std::string>{"fill", "twice", "count"});
}

TEST_CASE("Every op core/ops declares has a row in the op registry", "[core]") {
  const auto ops = declared_in(kSource / "core" / "ops", "ember::ops");
  REQUIRE(ops.size() > 30);  // the parser found the ops at all
  std::set<std::string> covered;
  for (const ops::OpRow& row : ops::op_registry()) covered.insert(row.op);
  for (const auto& [name, header] : ops) {
    if (kOpExemptions.count(name) != 0) continue;
    INFO("core/ops/" << header << " declares ops::" << name << ": add a row for it to core/ops/registry_*.cpp");
    CHECK(covered.count("ops::" + name) == 1);
  }
  for (const std::string& path : kTensorPaths) {
    INFO(path << " reaches a kernel: the registry needs a row for it");
    CHECK(covered.count(path) == 1);
  }
  for (const auto& [name, reason] : kOpExemptions) {
    INFO("the exemption of " << name << " (" << reason << ") names no declared function");
    CHECK(ops.count(name) == 1);
  }
  for (const std::string& op : covered) {
    INFO("a row runs " << op << ", which core/ops/*.h does not declare");
    const std::string name = strip_prefix(op, "ops::");
    CHECK((ops.count(name) == 1 || std::count(kTensorPaths.begin(), kTensorPaths.end(), op) == 1));
  }
}

TEST_CASE("Every CUDA kernel kernels/*.h declares is named by a row of the op registry", "[core]") {
  const auto kernels = declared_in(kSource / "kernels", "cuda");
  REQUIRE(kernels.count("add") == 1);  // the elementwise macro API was expanded
  std::set<std::string> named;
  for (const ops::OpRow& row : ops::op_registry())
    for (const std::string& k : ops::kernel_names(row.cuda)) named.insert(strip_prefix(k, "cuda::"));
  for (const auto& [name, header] : kernels) {
    if (kCudaExemptions.count(name) != 0) continue;
    INFO("kernels/" << header << " declares cuda::" << name << ", but no row's cuda column names it");
    CHECK(named.count(name) == 1);
  }
  for (const auto& [name, reason] : kCudaExemptions) {
    INFO("the exemption of cuda::" << name << " (" << reason << ") names no declared kernel");
    CHECK(kernels.count(name) == 1);
  }
}

TEST_CASE("Each row names its family's files and kernels that exist, and its name once", "[core]") {
  const auto cpu = declared_in(kSource / "kernels", "cpu");
  const auto cuda = declared_in(kSource / "kernels", "cuda");
  std::set<std::string> names;
  for (const ops::OpRow& row : ops::op_registry()) {
    INFO("row " << row.name << " (family " << row.family << ")");
    CHECK(names.insert(row.name).second);
    const std::string family = row.family;
    CHECK(fs::exists(kSource / "kernels" / (family + ".h")));
    CHECK(fs::exists(kSource / "kernels" / "cpu" / (family + ".cpp")));
    CHECK(fs::exists(kSource / "kernels" / "cuda" / (family + ".cu")));
    CHECK(!row.dtypes.empty());
    CHECK(row.make != nullptr);
    for (auto [column, declared, prefix] :
         {std::tuple{row.cpu, &cpu, "cpu::"}, std::tuple{row.cuda, &cuda, "cuda::"}}) {
      const std::vector<std::string> kernels = ops::kernel_names(column);
      REQUIRE(!kernels.empty());
      for (size_t i = 0; i < kernels.size(); ++i) {
        INFO("kernel " << kernels[i]);
        const std::string name = strip_prefix(kernels[i], prefix);
        REQUIRE(declared->count(name) == 1);
        if (i == 0) CHECK(declared->at(name) == family + ".h");  // the first is the family's own
      }
    }
  }
}

namespace {

const std::vector<int64_t> kSizes = {1, 7, 1000, 4099};

std::string what(const ops::OpRow& row, DType dtype, const ops::OpCase& c) {
  return std::string(row.name) + " " + dtype_name(dtype) + " " + c.label;
}

}  // namespace

TEST_CASE("Every row runs on the cpu, and on meta infers the cpu outputs' shapes and dtypes", "[core]") {
  for (const ops::OpRow& row : ops::op_registry())
    for (DType dtype : row.dtypes)
      for (int64_t size : kSizes) {
        const ops::OpCase c = row.make(size, dtype);
        INFO(what(row, dtype, c));
        CHECK(c.elements >= 1);
        CHECK(c.tolerance >= 0);
        for (const Tensor& t : c.inputs) CHECK((t.defined() && t.device().is_cpu()));
        const std::vector<Tensor> cpu = ops::run_on(c, Device::cpu());
        REQUIRE(!cpu.empty());
        for (const Tensor& t : cpu) REQUIRE((t.defined() && t.device().is_cpu()));
        if (row.no_meta != nullptr) {
          INFO("the row says it refuses meta tensors: " << row.no_meta);
          CHECK_THROWS_AS(ops::run_on(c, Device::meta()), ValueError);
          continue;
        }
        const std::vector<Tensor> meta = ops::run_on(c, Device::meta());
        REQUIRE(meta.size() == cpu.size());
        for (size_t i = 0; i < cpu.size(); ++i) {
          INFO("output " << i);
          CHECK(meta[i].device().is_meta());
          CHECK(shape_str(meta[i].shape()) == shape_str(cpu[i].shape()));
          CHECK(dtype_name(meta[i].dtype()) == std::string(dtype_name(cpu[i].dtype())));
        }
      }
}

TEST_CASE("Registry cases are deterministic: the same inputs and cpu outputs every time they are made", "[core]") {
  auto bytes_of = [](const Tensor& t) {
    const Tensor c = t.contiguous();
    const auto* p = static_cast<const unsigned char*>(c.raw_data());
    return std::vector<unsigned char>(p, p + c.nbytes());
  };
  for (const ops::OpRow& row : ops::op_registry()) {
    const DType dtype = row.dtypes.front();
    const ops::OpCase a = row.make(1000, dtype), b = row.make(1000, dtype);
    INFO(what(row, dtype, a));
    REQUIRE(a.inputs.size() == b.inputs.size());
    for (size_t i = 0; i < a.inputs.size(); ++i) CHECK(bytes_of(a.inputs[i]) == bytes_of(b.inputs[i]));
    const std::vector<Tensor> x = ops::run_on(a, Device::cpu()), y = ops::run_on(b, Device::cpu());
    REQUIRE(x.size() == y.size());
    for (size_t i = 0; i < x.size(); ++i) CHECK(bytes_of(x[i]) == bytes_of(y[i]));
  }
}

TEST_CASE("op_row finds a row by name and names the rows when there is none", "[core]") {
  CHECK(std::string(ops::op_row("linear_relu").op) == "ops::linear");
  CHECK_THROWS_WITH(ops::op_row("lienar"), Catch::Contains("no op called 'lienar'") && Catch::Contains("linear_relu"));
  CHECK(ops::kernel_names(" cuda::a, cuda::b ,cuda::c") == std::vector<std::string>{"cuda::a", "cuda::b", "cuda::c"});
}
