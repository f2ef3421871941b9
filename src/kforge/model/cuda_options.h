// The NVRTC options a `cuda` kernel may ask for in `metadata.compile_options`.
//
// Untrusted input: only an allow-list passes, because some NVRTC options reach the file
// system (-I, --pre-include) or override what kforge decides (-arch, the device's own
// architecture). Options are normalised to the spelling NVRTC accepts:
//   -O0..-O3              -> --ptxas-options=-O<n>  (NVRTC has no -O; ptxas does the optimising)
//   --use_fast_math, -lineinfo, -std=c++11|14|17|20, -D<name>[=value], -U<name>,
//   --ftz=, --prec-div=, --prec-sqrt=, --fmad= (true|false), --maxrregcount=N (1..255),
//   --extra-device-vectorization, --restrict, -w, -default-device, --dopt=on|off,
//   --ptxas-options=<-O0..-O3 | -v | --warn-on-spills | --warn-on-local-memory-usage>
//   (also as -Xptxas <value>).
// `metadata.compile_options` is a list of strings, or one string of space-separated options.
//
// Example:
//   KF_ASSIGN_OR_RETURN(auto opts, parse_cuda_compile_options(kernel.metadata,
//                                                             JsonPath("kernel.metadata")));
#pragma once

#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::model {

// Validated, normalised options in request order; kInvalidArgument naming
// `<metadata_path>.compile_options[i]` for an option outside the allow-list.
StatusOr<std::vector<std::string>> parse_cuda_compile_options(const Json& metadata,
                                                              const JsonPath& metadata_path);

// The allow-list in words, for error messages and docs.
std::string allowed_cuda_compile_options();

}  // namespace kforge::model
