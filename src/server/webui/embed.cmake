# Build-time step (cmake -P): writes OUT, a C++ source whose webui_page_source() returns the bytes
# of IN (the chat page), so the binary serves the page with no file read at run time.
#   cmake -DIN=index.html -DOUT=webui_page.cpp -P embed.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){24})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp" "// Generated from src/server/webui/index.html by src/server/webui/embed.cmake: do not edit.
#include \"server/webui.h\"

namespace tessera::server {
namespace {
const unsigned char kPage[${size} + 1] = {
${bytes}0};
}  // namespace

std::string_view webui_page_source() { return {reinterpret_cast<const char*>(kPage), ${size}}; }

}  // namespace tessera::server
")
file(RENAME "${OUT}.tmp" "${OUT}")
