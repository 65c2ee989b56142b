// What a model file says that is legal but suspicious, found at load and logged as warnings (issue
// 30, finding 13), never errors: the file still loads.
//   - a tokenizer vocabulary (tokenizer.ggml.tokens) smaller than token_embd's rows: the ids past
//     it have no text (the model can still sample them);
//   - general.file_type (llama.cpp's LLAMA_FTYPE) naming a weight type that no layer matrix has,
//     e.g. "MOSTLY_Q4_0" over F32 tensors: tools that read the label are misled about the file.
#pragma once
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model_config.h"

namespace tessera {

// One line per finding, in the order above; empty for a consistent file.
std::vector<std::string> model_file_warnings(const gguf::GgufFile& file, const ModelConfig& config);

}  // namespace tessera
