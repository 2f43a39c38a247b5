%ptr = llvm.mlir.zero : !llvm.ptr<1>
%one = arith.constant 1 : i32
%peer = distributed.symm_at %ptr, %one : !llvm.ptr<1>
