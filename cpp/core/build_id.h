// The build id: a hash of the C++ sources this library was built from (generated at build time
// by cmake/build_id.cmake), so that cached code of another build is never used.
#pragma once

namespace coopjit {
const char* build_id();
}
