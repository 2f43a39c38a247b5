// RUN: triton-dist-opt --convert-distributed-to-nvvm %s | FileCheck %s --check-prefixes=CHECK,NVVM
// RUN: triton-dist-opt --convert-distributed-to-rocdl %s | FileCheck %s --check-prefixes=CHECK,ROCDL
// RUN: triton-dist-opt --convert-distributed-to-nvvm="wait-timeout-ns=7000" %s | FileCheck %s --check-prefix=OPTION
// RUN: triton-dist-opt --triton-dist-lower-to-rocdl="wait-timeout-ns=7000" %s | FileCheck %s --check-prefix=OPTION
// RUN: triton-dist-opt --convert-distributed-to-nvvm="max-sleep-ns=0" %s | FileCheck %s --check-prefix=NOSLEEP

// The wait watchdog: a wait with `timeout_ns` (or, for the others, the pass option wait-timeout-ns) reads the
// steady counter before polling; past its tight polls, before each sleep (without sleeps: after each run of
// tight-polls failed polls), it checks the elapsed time (ticks x the target's period: 1 ns on NVIDIA's
// %globaltimer, 10 ns on AMD's 100 MHz s_memrealtime) and past the timeout claims the record
// @__triton_dist_wait_timeout (state 0 -> 1), fills it, publishes it (state 2, release at system scope) and traps.
// A wait satisfied within its tight polls thus runs no watchdog instruction but the first clock read.

// CHECK:       llvm.mlir.global external @__triton_dist_wait_timeout() {addr_space = 1 : i32, alignment = 8 : i64, externally_initialized} : !llvm.struct<(i32, i32, i32, i32, i64, i64, i64, i32, i32, i64)>
// CHECK:       llvm.mlir.global external @__triton_dist_context()

// CHECK-LABEL: func.func @watched(
// CHECK-SAME:    %[[FLAGS:.*]]: !llvm.ptr<1>, %[[N:.*]]: i32, %[[V:.*]]: i64)
// CHECK:         %[[START:.*]] = llvm.call_intrinsic "llvm.readsteadycounter"() : () -> i64
// CHECK:       ^bb1(%[[INDEX:.*]]: i32):
// CHECK:         %[[WORD:.*]] = llvm.getelementptr %[[FLAGS]][%[[INDEX]]]
// CHECK:       ^[[POLL:bb[0-9]+]](%{{.*}}: i32, %{{.*}}: i32):
// CHECK:         %[[SEEN:.*]] = llvm.load %[[WORD]] atomic acquire
// CHECK-NEXT:    %[[OK:.*]] = llvm.icmp "sge" %[[SEEN]], %[[V]] : i64
// CHECK-NEXT:    llvm.cond_br %[[OK]], ^{{.*}}, ^[[RETRY:bb[0-9]+]]
// The clock is read only past the tight polls: a failed tight poll goes straight back to the load.
// CHECK:       ^[[RETRY]]:
// CHECK-NOT:     readsteadycounter
// CHECK:         %[[TIGHT:.*]] = llvm.icmp "ult" %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    llvm.cond_br %[[TIGHT]], ^[[POLL]](%{{.*}}, %{{.*}} : i32, i32), ^[[CLOCK:bb[0-9]+]]
// CHECK:       ^[[CLOCK]]:
// CHECK-NEXT:    %[[NOW:.*]] = llvm.call_intrinsic "llvm.readsteadycounter"() : () -> i64
// CHECK-NEXT:    %[[TICKS:.*]] = llvm.sub %[[NOW]], %[[START]] : i64
// NVVM-NEXT:     %[[PERIOD:.*]] = llvm.mlir.constant(1 : i64) : i64
// ROCDL-NEXT:    %[[PERIOD:.*]] = llvm.mlir.constant(10 : i64) : i64
// CHECK-NEXT:    %[[ELAPSED:.*]] = llvm.mul %[[TICKS]], %[[PERIOD]] : i64
// CHECK-NEXT:    %[[LIMIT:.*]] = llvm.mlir.constant(5000000000 : i64) : i64
// CHECK-NEXT:    %[[LATE:.*]] = llvm.icmp "ugt" %[[ELAPSED]], %[[LIMIT]] : i64
// CHECK-NEXT:    llvm.cond_br %[[LATE]], ^[[EXPIRE:bb[0-9]+]], ^[[SLEEP:bb[0-9]+]]
// CHECK:       ^[[EXPIRE]]:
// CHECK:         %[[STATE:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 0] : (!llvm.ptr<1>) -> !llvm.ptr<1>, !llvm.struct<(i32, i32, i32, i32, i64, i64, i64, i32, i32, i64)>
// CHECK:         %[[CLAIM:.*]] = llvm.cmpxchg %[[STATE]], %{{.*}}, %{{.*}} monotonic monotonic : !llvm.ptr<1>, i32
// CHECK:         %[[WON:.*]] = llvm.extractvalue %[[CLAIM]][1]
// CHECK:         llvm.cond_br %[[WON]], ^[[FILL:bb[0-9]+]], ^[[TRAP:bb[0-9]+]]
// CHECK:       ^[[FILL]]:
// CHECK:         %[[RANK:.*]] = llvm.load {{.*}} invariant {{.*}} -> i32
// CHECK:         llvm.store %[[RANK]], %{{.*}} : i32, !llvm.ptr<1>
// NVVM:          %[[PROGRAM:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// ROCDL:         %[[PROGRAM:.*]] = rocdl.workgroup.id.x : i32
// CHECK:         llvm.store %[[PROGRAM]], %{{.*}} : i32, !llvm.ptr<1>
// CHECK:         llvm.store %[[INDEX]], %{{.*}} : i32, !llvm.ptr<1>
// CHECK:         %[[ADDRESS:.*]] = llvm.ptrtoint %[[WORD]] : !llvm.ptr<1> to i64
// CHECK:         llvm.store %[[ADDRESS]], %{{.*}} : i64, !llvm.ptr<1>
// CHECK:         llvm.store %[[V]], %{{.*}} : i64, !llvm.ptr<1>
// CHECK:         llvm.store %[[SEEN]], %{{.*}} : i64, !llvm.ptr<1>
// The comparison ge (enum value 2) into field 7:
// CHECK:         %[[GE:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK:         %[[CMP_FIELD:.*]] = llvm.getelementptr inbounds %{{.*}}[0, 7]
// CHECK:         llvm.store %[[GE]], %[[CMP_FIELD]] : i32, !llvm.ptr<1>
// CHECK:         %[[BITS:.*]] = llvm.mlir.constant(64 : i32) : i32
// CHECK:         llvm.store %[[BITS]]
// CHECK:         llvm.store %[[LIMIT]]
// CHECK:         %[[WRITTEN:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK:         llvm.store %[[WRITTEN]], %{{.*}} atomic release
// CHECK:         llvm.br ^[[TRAP]]
// CHECK:       ^[[TRAP]]:
// CHECK-NEXT:    llvm.intr.trap
// CHECK-NEXT:    llvm.unreachable
// CHECK:       ^[[SLEEP]]:
// NVVM:          nvvm.nanosleep
// CHECK:         llvm.br ^[[POLL]]
// Without sleeps, the failed polls are counted and every tight-polls-th reads the clock, then polls again from 0.
// NOSLEEP-LABEL: func.func @watched(
// NOSLEEP:       ^[[POLL:bb[0-9]+]](%[[ATTEMPT:.*]]: i32, %{{.*}}: i32):
// NOSLEEP:         llvm.cond_br %{{.*}}, ^{{.*}}, ^[[RETRY:bb[0-9]+]]
// NOSLEEP:       ^[[RETRY]]:
// NOSLEEP:         %[[NEXT:.*]] = llvm.add %[[ATTEMPT]], %{{.*}} : i32
// NOSLEEP:         %[[SIXTEEN:.*]] = llvm.mlir.constant(16 : i32) : i32
// NOSLEEP:         %[[TIGHT:.*]] = llvm.icmp "ult" %[[NEXT]], %[[SIXTEEN]] : i32
// NOSLEEP-NEXT:    llvm.cond_br %[[TIGHT]], ^[[POLL]](%[[NEXT]], %{{.*}} : i32, i32), ^[[CLOCK:bb[0-9]+]]
// NOSLEEP:       ^[[CLOCK]]:
// NOSLEEP-NEXT:    llvm.call_intrinsic "llvm.readsteadycounter"
// NOSLEEP:         llvm.cond_br %{{.*}}, ^{{.*}}, ^[[POLL]](%{{.*}}, %{{.*}} : i32, i32)
// NOSLEEP-NOT:     nanosleep
// NOSLEEP-LABEL: func.func @watched_i32(
func.func @watched(%flags: !llvm.ptr<1>, %n: i32, %v: i64) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) cmp(ge) {timeout_ns = 5000000000 : i64} : !llvm.ptr<1>, i64
  return %t : !distributed.token
}

// An i32 flag: the values are sign-extended into the record.
// CHECK-LABEL: func.func @watched_i32(
// CHECK:         llvm.sext %{{.*}} : i32 to i64
// CHECK:         llvm.sext %{{.*}} : i32 to i64
// CHECK:         llvm.intr.trap
func.func @watched_i32(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(gpu) semantic(relaxed) cmp(lt) {timeout_ns = 1000 : i64} : !llvm.ptr<1>, i32
  return %t : !distributed.token
}

// Without the attribute and the option: no watchdog.
// CHECK-LABEL: func.func @unwatched(
// CHECK-NOT:     readsteadycounter
// CHECK-NOT:     llvm.intr.trap
// CHECK:         return
// With wait-timeout-ns, every wait without the attribute is watched with that timeout; the attribute wins.
// OPTION-LABEL: @watched(
// OPTION:         llvm.mlir.constant(5000000000 : i64)
// OPTION-LABEL: @unwatched(
// OPTION:         llvm.call_intrinsic "llvm.readsteadycounter"
// OPTION:         llvm.mlir.constant(7000 : i64)
// OPTION:         llvm.intr.trap
func.func @unwatched(%flags: !llvm.ptr<1>, %n: i32, %v: i32) -> !distributed.token {
  %t = distributed.wait %flags, %n, %v scope(sys) semantic(acquire) : !llvm.ptr<1>, i32
  return %t : !distributed.token
}
