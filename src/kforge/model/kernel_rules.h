// The kernel rules (docs/compatibility.md §1 "Kernel types", docs/user-guide.md "Kernel types")
// on parsed model types: what each kernel_type needs, the metadata fields kforge reads, and a
// compare's two sides agreeing on their inputs. parse.h applies them to every request it reads;
// errors name the field as parse.h's do.
#pragma once

#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/request.h"

namespace kforge::model {

// A Python identifier of at most 128 characters.
bool is_identifier(const std::string& s);

// A `cuda` kernel's name is an NVRTC name expression: a qualified name, maybe a template
// instance ("ops::scale<128>"). It is never passed to a shell or a file path.
bool is_name_expression(const std::string& s);

// Checks the metadata fields kforge reads (bytes_moved, flops, flops_dtype, entry_point,
// kernel_name, the torch targets) and brings old spellings to kforge's: compiler_options (the
// old server's) becomes compile_options. `path` is the metadata's.
Status normalize_metadata(KernelCode& k, const JsonPath& path);

// What kernel_type needs: triton and cuda need an IOContract, multi_kernel needs an IOContract
// and metadata.entry_point, cuda its name, launch dimensions, C-callable args, an output and
// allow-listed compile options. `field` is the kernel's path ("kernel", "ref_kernel", ...).
Status check_kernel_rules(const KernelCode& k, std::string_view field);

// check_kernel_rules on both sides and, for compares, that the two sides' declared inputs
// agree (docs/evaluation-protocol.md, the compare rule).
Status check_request_consistency(const JobRequest& request, std::string_view kernel_field,
                                 std::string_view reference_field);

}  // namespace kforge::model
