// RUN: triton-dist-opt --convert-distributed-to-nvvm="wait-timeout-from-runtime=true" %s | FileCheck %s --check-prefixes=CHECK,NVVM
// RUN: triton-dist-opt --convert-distributed-to-rocdl="wait-timeout-from-runtime=true" %s | FileCheck %s --check-prefixes=CHECK,ROCDL
// RUN: triton-dist-opt --triton-dist-lower-to-nvvm="wait-timeout-from-runtime=true wait-timeout-ns=7000" %s | FileCheck %s --check-prefix=PIPELINE
// RUN: triton-dist-opt --convert-distributed-to-nvvm %s | FileCheck %s --check-prefix=OFF

// The runtime-timeout mode (the watchdog device libraries): a wait without `timeout_ns` reads its timeout from
// @__triton_dist_wait_watchdog (field 0, written by the runtime per loaded module; 0 disables the check), and past it
// fills the record whose address is field 1 (host-mapped memory the host reads after the trap) instead of the
// module's @__triton_dist_wait_timeout. A wait with its own `timeout_ns` keeps the module record.

// CHECK-DAG:   llvm.mlir.global external @__triton_dist_wait_watchdog() {addr_space = 1 : i32, alignment = 8 : i64, externally_initialized} : !llvm.struct<(i64, i64)>
// CHECK-DAG:   llvm.mlir.global external @__triton_dist_wait_timeout()
// CHECK-DAG:   llvm.mlir.global external @__triton_dist_context()

// CHECK-LABEL: func.func @runtime_watched(
// CHECK-SAME:    %[[FLAGS:.*]]: !llvm.ptr<1>, %[[N:.*]]: i32, %[[V:.*]]: i32)
// CHECK:         %[[START:.*]] = llvm.call_intrinsic "llvm.readsteadycounter"() : () -> i64
// CHECK-NEXT:    %[[SETTINGS:.*]] = llvm.mlir.addressof @__triton_dist_wait_watchdog : !llvm.ptr<1>
// CHECK-NEXT:    %[[TIMEOUT_PTR:.*]] = llvm.getelementptr inbounds %[[SETTINGS]][0, 0] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i64, i64)>
// CHECK-NEXT:    %[[TIMEOUT:.*]] = llvm.load %[[TIMEOUT_PTR]] invariant {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:       ^[[POLL:bb[0-9]+]](%{{.*}}: i32, %{{.*}}: i32):
// CHECK:         %[[SEEN:.*]] = llvm.load %{{.*}} atomic acquire
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "eq" %[[SEEN]], %[[V]] : i32
// CHECK-NEXT:    llvm.cond_br %[[OK]], ^{{.*}}, ^[[RETRY:bb[0-9]+]]
// The clock is read only past the tight polls: a failed tight poll goes straight back to the load.
// CHECK:       ^[[RETRY]]:
// CHECK-NOT:     readsteadycounter
// CHECK:         %[[TIGHT:.*]] = llvm.icmp "ult" %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    llvm.cond_br %[[TIGHT]], ^[[POLL]](%{{.*}}, %{{.*}} : i32, i32), ^[[CHECK:bb[0-9]+]]
// CHECK:       ^[[CHECK]]:
// CHECK-NEXT:    %[[NOW:.*]] = llvm.call_intrinsic "llvm.readsteadycounter"() : () -> i64
// CHECK-NEXT:    %[[TICKS:.*]] = llvm.sub %[[NOW]], %[[START]] : i64
// NVVM-NEXT:     %[[PERIOD:.*]] = llvm.mlir.constant(1 : i64) : i64
// ROCDL-NEXT:    %[[PERIOD:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT:    %[[ELAPSED:.*]] = llvm.mul %[[TICKS]], %[[PERIOD]] : i64
// CHECK-NEXT:    %[[LATE:.*]] = llvm.icmp "ugt" %[[ELAPSED]], %[[TIMEOUT]] : i64
// CHECK-NEXT:    %[[ZERO:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT:    %[[ON:.*]] = llvm.icmp "ne" %[[TIMEOUT]], %[[ZERO]] : i64
// CHECK-NEXT:    %[[EXPIRED:.*]] = llvm.and %[[LATE]], %[[ON]] : i1
// CHECK-NEXT:    llvm.cond_br %[[EXPIRED]], ^[[EXPIRE:bb[0-9]+]], ^
// CHECK:       ^[[EXPIRE]]:
// CHECK-NEXT:    %[[SETTINGS2:.*]] = llvm.mlir.addressof @__triton_dist_wait_watchdog : !llvm.ptr<1>
// CHECK-NEXT:    %[[RECORD_PTR:.*]] = llvm.getelementptr inbounds %[[SETTINGS2]][0, 1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i64, i64)>
// CHECK-NEXT:    %[[RECORD_ADDR:.*]] = llvm.load %[[RECORD_PTR]] invariant {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK-NEXT:    %[[RECORD:.*]] = llvm.inttoptr %[[RECORD_ADDR]] : i64 to !llvm.ptr<1>
// CHECK-NEXT:    %[[STATE:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 0] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i32, i32, i64, i64, i64, i32, i32, i64)>
// CHECK:         %[[CLAIM:.*]] = llvm.cmpxchg %[[STATE]], %{{.*}}, %{{.*}} monotonic monotonic : !llvm.ptr<1>, i32
// CHECK:         llvm.cond_br %{{.*}}, ^[[FILL:bb[0-9]+]], ^[[TRAP:bb[0-9]+]]
// CHECK:       ^[[FILL]]:
// CHECK:         %[[RANK_AT:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 1]
// CHECK:         %[[PROGRAM_AT:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 2]
// CHECK:         %[[INDEX_AT:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 3]
// CHECK:         %[[ADDRESS_AT:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 4]
// CHECK:         %[[EXPECTED_AT:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 5]
// CHECK:         %[[SEEN_AT:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 6]
// CHECK:         %[[CMP_AT:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 7]
// CHECK:         %[[BITS_AT:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 8]
// CHECK:         %[[NS_AT:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 9]
// CHECK-NEXT:    llvm.store %[[TIMEOUT]], %[[NS_AT]] : i64, !llvm.ptr<1>
// CHECK-NEXT:    %[[STATE2:.*]] = llvm.getelementptr inbounds %[[RECORD]][0, 0]
// CHECK-NEXT:    %[[TWO:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT:    llvm.store %[[TWO]], %[[STATE2]] atomic release {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK:       ^[[TRAP]]:
// CHECK-NEXT:    llvm.intr.trap
// CHECK-NEXT:    llvm.unreachable
func.func @runtime_watched(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

// The op's own timeout wins over the runtime's: a constant limit and the module record.
// CHECK-LABEL: func.func @own_timeout(
// CHECK:         %[[LIMIT:.*]] = llvm.mlir.constant(3000 : i64) : i64
// CHECK:         llvm.mlir.addressof @__triton_dist_wait_timeout
// CHECK-LABEL: func.func @after
func.func @own_timeout(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(gpu) semantic(acquire) {timeout_ns = 3000 : i64} : !llvm.ptr<1>, i32
  return %t : !distributed.token
}
func.func @after() {
  return
}

// The pipeline option reaches the lowering and overrides wait-timeout-ns (no constant 7000 anywhere).
// PIPELINE:     llvm.mlir.global external @__triton_dist_wait_watchdog()
// PIPELINE-NOT: 7000 : i64
// PIPELINE-LABEL: llvm.func @runtime_watched(
// PIPELINE-NOT: 7000 : i64
// PIPELINE-LABEL: llvm.func @own_timeout(

// Without the option there is no watchdog settings global and no steady counter outside @own_timeout.
// OFF-NOT:     __triton_dist_wait_watchdog
// OFF-LABEL:   func.func @runtime_watched(
// OFF-NOT:     readsteadycounter
// OFF-LABEL:   func.func @own_timeout(
