// tessera quantize IN.gguf OUT.gguf TYPE: rewrites a model with its weight matrices in TYPE
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), as llama.cpp's quantize tool does. Metadata is
// copied; 1-D tensors (norms, biases) stay F32; a matrix whose rows are not a multiple of the
// type's block keeps its type. Also the way to make a draft model (e.g. Q4_0 of an F16 target).
#include <cstdio>
#include <vector>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant.h"

namespace tessera::cli {

namespace {

// llama.cpp's LLAMA_FTYPE numbers for general.file_type.
uint32_t file_type_of(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q8_0: return 7;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::BF16: return 32;
    default: return 0;
  }
}

}  // namespace

int quantize_main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: tessera quantize IN.gguf OUT.gguf TYPE   (TYPE: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1)\n");
    return 2;
  }
  const std::string in_path = argv[1], out_path = argv[2];
  const auto type = dtype_from_name(argv[3]);
  if (!type || !kernels::dtype_supported_for_quantize(*type)) {
    std::fprintf(stderr, "tessera quantize: error: cannot quantize to '%s'\n", argv[3]);
    return 2;
  }
  auto in = gguf::GgufFile::open(in_path);
  if (!in) {
    std::fprintf(stderr, "tessera quantize: error: %s\n", in.error().message.c_str());
    return 1;
  }
  gguf::GgufWriter writer;
  for (const auto& [key, value] : in->metadata()) {
    if (key == "general.alignment") continue;
    writer.set_value(key, value);
  }
  writer.set_uint32("general.file_type", file_type_of(*type));
  std::vector<std::vector<uint8_t>> buffers;
  buffers.reserve(in->tensors().size());
  size_t bytes_in = 0, bytes_out = 0;
  for (const gguf::TensorInfo& t : in->tensors()) {
    const int64_t cols = t.dims[0];
    const bool matrix = t.dims.size() >= 2;
    DType target = matrix ? *type : DType::F32;
    if (cols % dtype_block_size(target) != 0 || !kernels::dtype_supported_for_dequantize(t.type)) target = t.type;
    bytes_in += t.num_bytes;
    if (target == t.type) {
      if (auto s = writer.add_tensor_ref(t.name, t.dims, t.type, {t.data, t.num_bytes}); !s.ok()) {
        std::fprintf(stderr, "tessera quantize: error: %s\n", s.error().message.c_str());
        return 1;
      }
      bytes_out += t.num_bytes;
      continue;
    }
    const int64_t rows = t.num_elements / cols;
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t>& out = buffers.emplace_back(dtype_row_bytes(target, cols) * static_cast<size_t>(rows));
    const size_t in_row = dtype_row_bytes(t.type, cols), out_row = dtype_row_bytes(target, cols);
    for (int64_t r = 0; r < rows; ++r) {
      kernels::dequantize_row_ref(t.type, t.data + static_cast<size_t>(r) * in_row, row.data(), cols);
      kernels::quantize_row_ref(target, row.data(), out.data() + static_cast<size_t>(r) * out_row, cols);
    }
    bytes_out += out.size();
    if (auto s = writer.add_tensor_ref(t.name, t.dims, target, out); !s.ok()) {
      std::fprintf(stderr, "tessera quantize: error: %s\n", s.error().message.c_str());
      return 1;
    }
  }
  if (auto s = writer.write(out_path); !s.ok()) {
    std::fprintf(stderr, "tessera quantize: error: %s\n", s.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "tessera quantize: %s -> %s (%s): %.1f MiB -> %.1f MiB\n", in_path.c_str(),
               out_path.c_str(), argv[3], bytes_in / 1048576.0, bytes_out / 1048576.0);
  return 0;
}

}  // namespace tessera::cli
