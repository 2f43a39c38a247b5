# Writes the device library's source: the hand-written functions of triton_dist.mlir followed by one function per
# wait symbol, __triton_dist_wait_{scope}_{semantic}_{cmp}_{flag} (3 x 2 x 6 x 2 = 72 one-op functions, the same but
# for their attributes).
#
#   cmake -DSOURCE=<triton_dist.mlir> -DOUTPUT=<generated .mlir> -P GenerateDeviceLibrary.cmake
#
# The agreement test (test/python/test_abi_agreement.py) checks the built libraries against
# python/triton_dist/abi.py, so these lists cannot drift from the Python side unnoticed.

set(scopes cta gpu sys)
set(semantics acquire relaxed)
set(comparisons eq ne ge gt le lt)
set(flag_types i32 i64)

file(READ "${SOURCE}" text)
string(APPEND text "
//===----------------------------------------------------------------------===//
// Generated from ${SOURCE} by GenerateDeviceLibrary.cmake: the wait functions.
//===----------------------------------------------------------------------===//
")

set(attributes "attributes {always_inline, passthrough = [\"convergent\"]}")
foreach(scope IN LISTS scopes)
  foreach(semantic IN LISTS semantics)
    foreach(flag IN LISTS flag_types)
      foreach(cmp IN LISTS comparisons)
        string(APPEND text "
func.func @__triton_dist_wait_${scope}_${semantic}_${cmp}_${flag}(%addr: i64, %n: i32, %value: ${flag}) -> !distributed.token
    ${attributes} {
  %flags = llvm.inttoptr %addr : i64 to !llvm.ptr<1>
  %token = distributed.wait %flags, %n, %value scope(${scope}) semantic(${semantic}) cmp(${cmp}) : !llvm.ptr<1>, ${flag}
  return %token : !distributed.token
}
")
      endforeach()
    endforeach()
  endforeach()
endforeach()

file(WRITE "${OUTPUT}.tmp" "${text}")
# Rewrite only on change, so the libraries are not rebuilt for nothing.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
