// Whether this test program is built with AddressSanitizer (preset asan, TESSERA_SANITIZE: GCC and
// clang define __SANITIZE_ADDRESS__ or report address_sanitizer), for the statistical tests that
// run at a smaller size there: the same checks over fewer samples, a size shown to keep their power
// (see each use), so the ASan + UBSan stage of scripts/test.sh fits CI's time.
#pragma once

namespace tessera::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

}  // namespace tessera::testing
