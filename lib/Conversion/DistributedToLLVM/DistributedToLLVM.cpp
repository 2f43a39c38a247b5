//===- DistributedToLLVM.cpp - the shared lowering core -------------------===//
//
// Lowers the `distributed` ops to the LLVM dialect through a target's hooks
// (TargetInfoBase). Every op is executed by every thread of the program.
//
//   get_rank / get_num_ranks  invariant loads of the runtime context; axis
//                             node: rank (num_ranks) divided by
//                             local_num_ranks (at least 1)
//   get_heap_size             likewise
//   symm_at                   addr - heap_bases[me] + heap_bases[rank]
//   heap_offset               addr - heap_bases[me]
//   wait                      every lane of the first warp polls flag words
//                             (lane l: words l, l+W, ... if l < n, else word
//                             0) with atomic loads and backoff until
//                             `flag <cmp> value` (signed), then the program
//                             barrier; the token is an opaque i32 produced
//                             after the barrier
//   consume_token             an opaque register copy of the value that also
//                             reads the token
//   notify                    the program barrier, then the first warp stores
//                             (set) or thread 0 adds (add) the signal with
//                             release ordering
//   put_signal                the program barrier, then every thread calls the
//                             target's one-sided block put with signal
//   get                       the program barrier, the block get, the barrier
//   signal_wait               every thread calls the one-sided wait, then the
//                             program barrier; the token as for wait
// The last three exist only on a target with a one-sided library
// (TargetInfoBase::getOneSidedLibrary); elsewhere they are rejected.
//
//===----------------------------------------------------------------------===//

#include "TritonDistributed/Conversion/DistributedToLLVM/DistributedToLLVM.h"

#include "TritonDistributed/Conversion/DistributedToLLVM/RuntimeContext.h"

#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/ControlFlow/Transforms/StructuralTypeConversions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::triton_dist;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

Value createI32Constant(OpBuilder &b, Location loc, int64_t value) {
  return LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                  b.getI32IntegerAttr(value));
}

/// Symmetric heaps are global memory: memory operations use a global pointer,
/// a generic one is cast (a no-op on both targets for global addresses).
Value castToGlobal(OpBuilder &b, Location loc, Value ptr) {
  auto type = cast<LLVM::LLVMPointerType>(ptr.getType());
  if (type.getAddressSpace() == kGlobalAddressSpace)
    return ptr;
  return LLVM::AddrSpaceCastOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), kGlobalAddressSpace),
      ptr);
}

/// `ptr - heap_bases[me] + heap_bases[rank]`, computed on the integer address
/// so that the result is the same byte of the other heap (heap bases are
/// 4096-byte aligned: the alignment of `ptr` carries over).
Value translateToRank(OpBuilder &b, Location loc, Value ptr, Value rank) {
  Type i64 = b.getI64Type();
  Value me = loadContextRank(b, loc);
  Value myBase = loadContextHeapBase(b, loc, me);
  Value peerBase = loadContextHeapBase(b, loc, rank);
  Value address = LLVM::PtrToIntOp::create(b, loc, i64, ptr);
  Value offset = LLVM::SubOp::create(b, loc, address, myBase);
  Value moved = LLVM::AddOp::create(b, loc, offset, peerBase);
  return LLVM::IntToPtrOp::create(b, loc, ptr.getType(), moved);
}

/// `flag <cmp> value`, signed.
LLVM::ICmpPredicate getPollPredicate(WaitComparison cmp) {
  switch (cmp) {
  case WaitComparison::eq:
    return LLVM::ICmpPredicate::eq;
  case WaitComparison::ne:
    return LLVM::ICmpPredicate::ne;
  case WaitComparison::ge:
    return LLVM::ICmpPredicate::sge;
  case WaitComparison::gt:
    return LLVM::ICmpPredicate::sgt;
  case WaitComparison::le:
    return LLVM::ICmpPredicate::sle;
  case WaitComparison::lt:
    return LLVM::ICmpPredicate::slt;
  }
  llvm_unreachable("unknown wait comparison");
}

MemSyncScope getReleaseScope(CommScope scope) {
  switch (scope) {
  case CommScope::gpu:
    return MemSyncScope::gpu;
  case CommScope::intra_node:
  case CommScope::inter_node:
    return MemSyncScope::sys;
  }
  llvm_unreachable("unknown comm scope");
}

/// Ops that become control flow need a region that can hold several blocks.
bool needsMultiBlockRegion(Operation *op) { return isa<WaitOp, NotifyOp>(op); }

bool readsContext(Operation *op) {
  return isa<GetRankOp, GetNumRanksOp, GetHeapSizeOp, SymmAtOp, HeapOffsetOp,
             NotifyOp>(op);
}

/// A wait or notify splits its block: only a function body is known to hold
/// several blocks. Emits the reason when `op` is elsewhere.
LogicalResult checkMultiBlockRegion(Operation *op) {
  Operation *owner = op->getParentOp();
  if (isa<FunctionOpInterface>(owner))
    return success();
  InFlightDiagnostic diag = op->emitOpError();
  diag << "lowers to control flow (several blocks), but its region belongs "
          "to '"
       << owner->getName() << "', not to a function body";
  if (isa_and_nonnull<scf::SCFDialect>(owner->getDialect()))
    diag << "; lower structured control flow to the cf dialect first "
            "(--convert-scf-to-cf)";
  else
    diag << "; move the op out of that region";
  diag.attachNote(owner->getLoc()) << "the region's op";
  return failure();
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

template <typename SourceOp>
class DistributedPattern : public ConvertOpToLLVMPattern<SourceOp> {
public:
  DistributedPattern(const LLVMTypeConverter &converter,
                     const TargetInfoBase &target)
      : ConvertOpToLLVMPattern<SourceOp>(converter), target(target) {}

protected:
  const TargetInfoBase &target;
};

template <typename SourceOp>
class RankQueryLowering : public DistributedPattern<SourceOp> {
public:
  using DistributedPattern<SourceOp>::DistributedPattern;

  LogicalResult
  matchAndRewrite(SourceOp op, typename SourceOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    constexpr bool isRank = std::is_same_v<SourceOp, GetRankOp>;
    Value result;
    switch (op.getAxis()) {
    case RankAxis::world:
      result = isRank ? loadContextRank(rewriter, loc)
                      : loadContextNumRanks(rewriter, loc);
      break;
    case RankAxis::local:
      result = isRank ? loadContextLocalRank(rewriter, loc)
                      : loadContextLocalNumRanks(rewriter, loc);
      break;
    case RankAxis::node: {
      // Every node holds local_num_ranks consecutive ranks (torchrun's
      // layout). A context that was never filled holds 0 there: divide by 1
      // instead, so the division is never undefined.
      Value world = isRank ? loadContextRank(rewriter, loc)
                           : loadContextNumRanks(rewriter, loc);
      Value perNode = loadContextLocalNumRanks(rewriter, loc);
      Type i32 = rewriter.getI32Type();
      Value zero = LLVM::ConstantOp::create(rewriter, loc, i32, 0);
      Value one = LLVM::ConstantOp::create(rewriter, loc, i32, 1);
      Value unfilled = LLVM::ICmpOp::create(
          rewriter, loc, LLVM::ICmpPredicate::eq, perNode, zero);
      Value divisor =
          LLVM::SelectOp::create(rewriter, loc, unfilled, one, perNode);
      result = LLVM::UDivOp::create(rewriter, loc, world, divisor);
      break;
    }
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

class SymmAtLowering : public DistributedPattern<SymmAtOp> {
public:
  using DistributedPattern::DistributedPattern;

  LogicalResult
  matchAndRewrite(SymmAtOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       translateToRank(rewriter, op.getLoc(), adaptor.getPtr(),
                                       adaptor.getRank()));
    return success();
  }
};

class HeapOffsetLowering : public DistributedPattern<HeapOffsetOp> {
public:
  using DistributedPattern::DistributedPattern;

  LogicalResult
  matchAndRewrite(HeapOffsetOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value me = loadContextRank(rewriter, loc);
    Value myBase = loadContextHeapBase(rewriter, loc, me);
    Value address = LLVM::PtrToIntOp::create(
        rewriter, loc, rewriter.getI64Type(), adaptor.getPtr());
    rewriter.replaceOp(op, LLVM::SubOp::create(rewriter, loc, address, myBase));
    return success();
  }
};

class GetHeapSizeLowering : public DistributedPattern<GetHeapSizeOp> {
public:
  using DistributedPattern::DistributedPattern;

  LogicalResult
  matchAndRewrite(GetHeapSizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, loadContextHeapSize(rewriter, op.getLoc()));
    return success();
  }
};

class WaitLowering : public DistributedPattern<WaitOp> {
public:
  WaitLowering(const LLVMTypeConverter &converter, const TargetInfoBase &target,
               const LoweringOptions &options)
      : DistributedPattern(converter, target), backoff(options.backoff),
        defaultTimeoutNs(options.waitTimeoutNs),
        timeoutFromRuntime(options.waitTimeoutFromRuntime) {}

  // entry:           cond_br tid < W, word(tid < n ? tid : 0), done
  // word(i):         cond_br i < n, poll(0, minSleep), done
  // poll(k, ns):     v = atomic load flags[i]; cond_br v == value, next, retry
  // retry:           cond_br k + 1 < tightPolls, poll(k + 1, ns), sleep
  // sleep:           sleep(ns); br poll(k, min(2 ns, maxSleep))
  // next:            br word(i + W)
  // done:            program barrier; token
  // With a timeout, the clock is read only off the tight-poll path: where a
  // wait would sleep (or, without sleeps, after each run of tightPolls failed
  // polls), it goes through
  // check:           cond_br (now - start) * period > timeout, expire, sleep
  //                  (without sleeps: poll(0, ns))
  // expire:          claim and fill @__triton_dist_wait_timeout; trap
  // so a wait that is satisfied within its tight polls (the latency-bound
  // case: a flag round trip) adds only the entry's clock read (and, in the
  // runtime-timeout mode, the timeout's load) to an unwatched wait's
  // instructions. In the runtime-timeout mode the timeout is loaded from
  // @__triton_dist_wait_watchdog (0: the check never expires) and the record
  // filled is the one its pointer names.
  LogicalResult
  matchAndRewrite(WaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type();
    Value flags = castToGlobal(rewriter, loc, adaptor.getBarriers());
    Value count = adaptor.getNumBarriers();
    Value expected = adaptor.getWaitValue();
    Type flagType = expected.getType();
    auto globalPtr = cast<LLVM::LLVMPointerType>(flags.getType());
    bool sleeps = backoff.maxSleepNs != 0;
    unsigned firstSleep = std::min(backoff.minSleepNs, backoff.maxSleepNs);

    bool runtimeTimeout = !op.getTimeoutNs() && timeoutFromRuntime;
    uint64_t timeoutNs =
        runtimeTimeout ? 0 : op.getTimeoutNs().value_or(defaultTimeoutNs);
    bool watched = runtimeTimeout || timeoutNs != 0;

    Value tid = target.getThreadId(rewriter, loc);
    Value warpSize = target.getWarpSize(rewriter, loc);
    Value polls = LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::ult,
                                       tid, warpSize);
    Value start = watched ? readSteadyCounter(rewriter, loc) : Value();
    Value runtimeLimit =
        runtimeTimeout ? loadWaitWatchdogTimeoutNs(rewriter, loc) : Value();

    // Lanes past the last word poll word 0 with the lanes that own it rather
    // than idle: with one word (a flag round trip) the whole warp then polls
    // in step, as one request per poll, and leaves the loop together instead
    // of waiting for one divergent lane (measured on 2xH200: the divergent
    // single-lane loop cost about 3% of a round trip, 2.573 against 2.494 us).
    Value owns = LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::slt,
                                      tid, count);
    Value firstWord = LLVM::SelectOp::create(
        rewriter, loc, owns, tid, createI32Constant(rewriter, loc, 0));

    Block *entry = rewriter.getInsertionBlock();
    Block *done = rewriter.splitBlock(entry, op->getIterator());
    Block *word = rewriter.createBlock(done, {i32}, {loc});
    Block *poll = rewriter.createBlock(done, {i32, i32}, {loc, loc});
    // Without sleeps, a watched wait still counts its failed polls in `retry`
    // so the clock is read once per tightPolls of them.
    Block *retry = sleeps || watched ? rewriter.createBlock(done) : nullptr;
    Block *check = watched ? rewriter.createBlock(done) : nullptr;
    Block *expire = watched ? rewriter.createBlock(done) : nullptr;
    Block *sleep = sleeps ? rewriter.createBlock(done) : nullptr;
    Block *next = rewriter.createBlock(done);

    rewriter.setInsertionPointToEnd(entry);
    LLVM::CondBrOp::create(rewriter, loc, polls, word, ValueRange{firstWord},
                           done, ValueRange{});

    rewriter.setInsertionPointToEnd(word);
    Value index = word->getArgument(0);
    Value inRange = LLVM::ICmpOp::create(
        rewriter, loc, LLVM::ICmpPredicate::slt, index, count);
    Value flag = LLVM::GEPOp::create(rewriter, loc, globalPtr, flagType, flags,
                                     ArrayRef<LLVM::GEPArg>{index});
    Value zero = createI32Constant(rewriter, loc, 0);
    Value initialSleep = createI32Constant(rewriter, loc, firstSleep);
    LLVM::CondBrOp::create(rewriter, loc, inRange, poll,
                           ValueRange{zero, initialSleep}, done, ValueRange{});

    rewriter.setInsertionPointToEnd(poll);
    Value attempt = poll->getArgument(0);
    Value sleepNs = poll->getArgument(1);
    Value seen = target.createPollLoad(rewriter, loc, flagType, flag,
                                       op.getScope(), op.getSemantic());
    Value arrived = LLVM::ICmpOp::create(
        rewriter, loc, getPollPredicate(op.getCmp()), seen, expected);
    // A failed poll goes on to the next tight poll or past them (`retry`), or,
    // unwatched and without sleeps, straight back to the poll.
    if (retry)
      LLVM::CondBrOp::create(rewriter, loc, arrived, next, ValueRange{}, retry,
                             ValueRange{});
    else
      LLVM::CondBrOp::create(rewriter, loc, arrived, next, ValueRange{}, poll,
                             ValueRange{attempt, sleepNs});

    if (retry) {
      rewriter.setInsertionPointToEnd(retry);
      Value nextAttempt = LLVM::AddOp::create(
          rewriter, loc, attempt, createI32Constant(rewriter, loc, 1));
      Value tight = LLVM::ICmpOp::create(
          rewriter, loc, LLVM::ICmpPredicate::ult, nextAttempt,
          createI32Constant(rewriter, loc, backoff.tightPolls));
      LLVM::CondBrOp::create(rewriter, loc, tight, poll,
                             ValueRange{nextAttempt, sleepNs},
                             watched ? check : sleep, ValueRange{});
    }

    if (watched) {
      rewriter.setInsertionPointToEnd(check);
      Type i64 = rewriter.getI64Type();
      Value ticks = LLVM::SubOp::create(
          rewriter, loc, readSteadyCounter(rewriter, loc), start);
      Value elapsed = LLVM::MulOp::create(
          rewriter, loc, ticks,
          LLVM::ConstantOp::create(
              rewriter, loc, i64,
              rewriter.getI64IntegerAttr(target.getSteadyCounterPeriodNs())));
      Value limit =
          runtimeTimeout
              ? runtimeLimit
              : LLVM::ConstantOp::create(
                    rewriter, loc, i64,
                    rewriter.getI64IntegerAttr(static_cast<int64_t>(timeoutNs)))
                    .getResult();
      Value expired = LLVM::ICmpOp::create(
          rewriter, loc, LLVM::ICmpPredicate::ugt, elapsed, limit);
      if (runtimeTimeout) {
        Value zero64 = LLVM::ConstantOp::create(rewriter, loc, i64,
                                                rewriter.getI64IntegerAttr(0));
        Value enabled = LLVM::ICmpOp::create(
            rewriter, loc, LLVM::ICmpPredicate::ne, limit, zero64);
        expired = LLVM::AndOp::create(rewriter, loc, expired, enabled);
      }
      // Not expired: sleep, or start the next run of tight polls.
      if (sleeps)
        LLVM::CondBrOp::create(rewriter, loc, expired, expire, ValueRange{},
                               sleep, ValueRange{});
      else
        LLVM::CondBrOp::create(rewriter, loc, expired, expire, ValueRange{},
                               poll, ValueRange{zero, sleepNs});

      rewriter.setInsertionPointToEnd(expire);
      Value record =
          runtimeTimeout ? loadWaitWatchdogRecord(rewriter, loc) : Value();
      recordTimeout(rewriter, loc, op, record, flag, index, expected, seen,
                    limit);
    }

    if (sleeps) {
      rewriter.setInsertionPointToEnd(sleep);
      target.createSleep(rewriter, loc, sleepNs);
      Value doubled = LLVM::ShlOp::create(rewriter, loc, sleepNs,
                                          createI32Constant(rewriter, loc, 1));
      // icmp + select, not llvm.intr.umin: LLVM 22.1 gives min/max intrinsics
      // an attribute (nocreateundeforpoison) that Triton 3.6's LLVM cannot
      // read, and a library it cannot parse links into no kernel.
      Value cap = createI32Constant(rewriter, loc, backoff.maxSleepNs);
      Value belowCap = LLVM::ICmpOp::create(
          rewriter, loc, LLVM::ICmpPredicate::ult, doubled, cap);
      Value capped =
          LLVM::SelectOp::create(rewriter, loc, belowCap, doubled, cap);
      LLVM::BrOp::create(rewriter, loc, ValueRange{attempt, capped}, poll);
    }

    rewriter.setInsertionPointToEnd(next);
    Value nextIndex = LLVM::AddOp::create(rewriter, loc, index, warpSize);
    LLVM::BrOp::create(rewriter, loc, ValueRange{nextIndex}, word);

    rewriter.setInsertionPointToStart(done);
    target.createProgramBarrier(rewriter, loc);
    rewriter.replaceOp(op, target.createToken(rewriter, loc));
    return success();
  }

private:
  static Value readSteadyCounter(OpBuilder &b, Location loc) {
    return LLVM::CallIntrinsicOp::create(
               b, loc, b.getI64Type(),
               b.getStringAttr("llvm.readsteadycounter"), ValueRange{})
        .getResult(0);
  }

  // The first lane to time out claims the record (state 0 -> 1), fills it and
  // publishes it (state 2, release at system scope, so the host sees the
  // fields); every lane that times out then traps. `record` is the record's
  // address, or null for the module's @__triton_dist_wait_timeout.
  void recordTimeout(ConversionPatternRewriter &rewriter, Location loc,
                     WaitOp op, Value record, Value flag, Value index,
                     Value expected, Value seen, Value timeout) const {
    auto field = [&](WaitTimeoutField name) {
      return record ? getWaitTimeoutField(rewriter, loc, record, name)
                    : getWaitTimeoutField(rewriter, loc, name);
    };
    Type i64 = rewriter.getI64Type();
    Block *expire = rewriter.getInsertionBlock();
    Region *region = expire->getParent();
    Block *claimed =
        rewriter.createBlock(region, std::next(expire->getIterator()));
    Block *trap =
        rewriter.createBlock(region, std::next(claimed->getIterator()));
    rewriter.setInsertionPointToEnd(expire);
    Value state = field(kTimeoutState);
    auto claim = LLVM::AtomicCmpXchgOp::create(
        rewriter, loc, state, createI32Constant(rewriter, loc, 0),
        createI32Constant(rewriter, loc, 1), LLVM::AtomicOrdering::monotonic,
        LLVM::AtomicOrdering::monotonic);
    Value won = LLVM::ExtractValueOp::create(rewriter, loc, claim, 1);
    LLVM::CondBrOp::create(rewriter, loc, won, claimed, ValueRange{}, trap,
                           ValueRange{});

    rewriter.setInsertionPointToEnd(claimed);
    auto store = [&](WaitTimeoutField name, Value value) {
      LLVM::StoreOp::create(rewriter, loc, value, field(name));
    };
    auto widen = [&](Value value) -> Value {
      return value.getType() == i64
                 ? value
                 : LLVM::SExtOp::create(rewriter, loc, i64, value).getResult();
    };
    store(kTimeoutRank, loadContextRank(rewriter, loc));
    store(kTimeoutProgramId, target.getProgramId(rewriter, loc));
    store(kTimeoutFlagIndex, index);
    store(kTimeoutFlagAddress,
          LLVM::PtrToIntOp::create(rewriter, loc, i64, flag));
    store(kTimeoutExpected, widen(expected));
    store(kTimeoutLastSeen, widen(seen));
    store(kTimeoutComparison,
          createI32Constant(rewriter, loc, static_cast<int32_t>(op.getCmp())));
    store(kTimeoutFlagBits,
          createI32Constant(rewriter, loc,
                            expected.getType().getIntOrFloatBitWidth()));
    store(kTimeoutNs, timeout);
    target.createReleaseStore(rewriter, loc, field(kTimeoutState),
                              createI32Constant(rewriter, loc, 2),
                              MemSyncScope::sys);
    LLVM::BrOp::create(rewriter, loc, ValueRange{}, trap);

    rewriter.setInsertionPointToEnd(trap);
    LLVM::Trap::create(rewriter, loc);
    LLVM::UnreachableOp::create(rewriter, loc);
  }

  WaitBackoff backoff;
  uint64_t defaultTimeoutNs;
  bool timeoutFromRuntime;
};

class ConsumeTokenLowering : public DistributedPattern<ConsumeTokenOp> {
public:
  using DistributedPattern::DistributedPattern;

  LogicalResult
  matchAndRewrite(ConsumeTokenOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value value = adaptor.getValue();
    Value token = adaptor.getToken();
    Type type = value.getType();
    Value result;
    if (isa<IntegerType>(type)) {
      result = target.createOpaqueCopy(rewriter, loc, value, token);
    } else if (auto floatType = dyn_cast<FloatType>(type)) {
      Type intType = rewriter.getIntegerType(floatType.getWidth());
      Value bits = LLVM::BitcastOp::create(rewriter, loc, intType, value);
      Value copy = target.createOpaqueCopy(rewriter, loc, bits, token);
      result = LLVM::BitcastOp::create(rewriter, loc, type, copy);
    } else if (isa<LLVM::LLVMPointerType>(type)) {
      Type i64 = rewriter.getI64Type();
      Value address = LLVM::PtrToIntOp::create(rewriter, loc, i64, value);
      Value copy = target.createOpaqueCopy(rewriter, loc, address, token);
      result = LLVM::IntToPtrOp::create(rewriter, loc, type, copy);
    } else {
      return rewriter.notifyMatchFailure(op, "unsupported value type");
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

class NotifyLowering : public DistributedPattern<NotifyOp> {
public:
  using DistributedPattern::DistributedPattern;

  // current: program barrier; cond_br writer, signal, done
  // signal:  release store / add of the signal at symm_at(ptr, rank); br done
  // The writers are the first warp for `set` (every lane stores the same
  // value: one request, and no lane of the warp waits behind a divergent one;
  // measured on 2xH200, about 1% of a flag round trip), thread 0 for `add`.
  LogicalResult
  matchAndRewrite(NotifyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    target.createProgramBarrier(rewriter, loc);
    Value tid = target.getThreadId(rewriter, loc);
    bool stores = op.getSigOp() == SignalOp::set;
    Value isWriter =
        stores ? LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::ult,
                                      tid, target.getWarpSize(rewriter, loc))
               : LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::eq,
                                      tid, createI32Constant(rewriter, loc, 0));

    Block *current = rewriter.getInsertionBlock();
    Block *done = rewriter.splitBlock(current, op->getIterator());
    Block *signal = rewriter.createBlock(done);
    rewriter.setInsertionPointToEnd(current);
    LLVM::CondBrOp::create(rewriter, loc, isWriter, signal, ValueRange{}, done,
                           ValueRange{});

    rewriter.setInsertionPointToEnd(signal);
    Value peerFlag = castToGlobal(
        rewriter, loc,
        translateToRank(rewriter, loc, adaptor.getPtr(), adaptor.getRank()));
    MemSyncScope scope = getReleaseScope(op.getCommScope());
    if (stores)
      target.createReleaseStore(rewriter, loc, peerFlag, adaptor.getSignal(),
                                scope);
    else
      target.createReleaseAdd(rewriter, loc, peerFlag, adaptor.getSignal(),
                              scope);
    LLVM::BrOp::create(rewriter, loc, ValueRange{}, done);

    rewriter.eraseOp(op);
    return success();
  }
};

class PutSignalLowering : public DistributedPattern<PutSignalOp> {
public:
  using DistributedPattern::DistributedPattern;

  LogicalResult
  matchAndRewrite(PutSignalOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    // Every thread's writes of the source are made before any thread copies.
    target.createProgramBarrier(rewriter, loc);
    if (failed(target.createPutSignal(
            rewriter, loc, adaptor.getDest(), adaptor.getSrc(),
            adaptor.getBytes(), adaptor.getSignalPtr(), adaptor.getSignal(),
            op.getSigOp(), adaptor.getRank())))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

class GetLowering : public DistributedPattern<GetOp> {
public:
  using DistributedPattern::DistributedPattern;

  LogicalResult
  matchAndRewrite(GetOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    target.createProgramBarrier(rewriter, loc);
    if (failed(target.createGet(rewriter, loc, adaptor.getDest(),
                                adaptor.getSrc(), adaptor.getBytes(),
                                adaptor.getRank())))
      return failure();
    // Every thread may read what any thread of the program received.
    target.createProgramBarrier(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

class SignalWaitLowering : public DistributedPattern<SignalWaitOp> {
public:
  using DistributedPattern::DistributedPattern;

  // Every thread waits (a warp's polls of the one word are one request), so
  // each is ordered after the signal by the library's own acquire; the barrier
  // makes the program return together, as from distributed.wait.
  LogicalResult
  matchAndRewrite(SignalWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    if (failed(target.createSignalWaitUntil(rewriter, loc,
                                            adaptor.getSignalPtr(), op.getCmp(),
                                            adaptor.getValue())))
      return failure();
    target.createProgramBarrier(rewriter, loc);
    rewriter.replaceOp(op, target.createToken(rewriter, loc));
    return success();
  }
};

/// The identity on every type but `!distributed.token`, for the ops the token
/// may cross (function signatures, calls, returns, branches, scf).
class TokenTypeConverter : public TypeConverter {
public:
  TokenTypeConverter() {
    addConversion([](Type type) { return type; });
    populateDistributedTypeConversion(*this);
    auto cast = [](OpBuilder &b, Type type, ValueRange inputs,
                   Location loc) -> Value {
      return UnrealizedConversionCastOp::create(b, loc, type, inputs)
          .getResult(0);
    };
    addSourceMaterialization(cast);
    addTargetMaterialization(cast);
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

void mlir::triton_dist::populateDistributedTypeConversion(
    TypeConverter &converter) {
  converter.addConversion([](TokenType type) -> Type {
    return IntegerType::get(type.getContext(), 32);
  });
}

void mlir::triton_dist::populateDistributedToLLVMPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const TargetInfoBase &target, const LoweringOptions &options) {
  patterns.add<RankQueryLowering<GetRankOp>, RankQueryLowering<GetNumRanksOp>,
               SymmAtLowering, HeapOffsetLowering, GetHeapSizeLowering,
               ConsumeTokenLowering, NotifyLowering, PutSignalLowering,
               GetLowering, SignalWaitLowering>(converter, target);
  patterns.add<WaitLowering>(converter, target, options);
}

LogicalResult mlir::triton_dist::checkLowerable(Operation *root) {
  bool ok = true;
  root->walk([&](Operation *op) {
    if (!isa_and_nonnull<TritonDistributedDialect>(op->getDialect()))
      return;
    if (!op->getParentOfType<FunctionOpInterface>()) {
      op->emitOpError() << "is outside any function: it lowers to "
                           "instructions, and LLVM IR has instructions only in "
                           "function bodies";
      ok = false;
      return;
    }
    if (needsMultiBlockRegion(op) && failed(checkMultiBlockRegion(op)))
      ok = false;
  });
  return success(ok);
}

LogicalResult
mlir::triton_dist::checkTargetAttributes(ModuleOp module,
                                         const TargetInfoBase &target) {
  bool ok = true;
  module.walk([&](ModuleOp scope) {
    for (StringRef name : {LLVM::LLVMDialect::getTargetTripleAttrName(),
                           LLVM::LLVMDialect::getDataLayoutAttrName()}) {
      Attribute attr = scope->getAttr(name);
      if (attr && !isa<StringAttr>(attr)) {
        scope.emitError() << "'" << name << "' must be a string, got " << attr;
        ok = false;
      }
    }
    auto triple = scope->getAttrOfType<StringAttr>(
        LLVM::LLVMDialect::getTargetTripleAttrName());
    if (triple && !target.acceptsTriple(triple.getValue())) {
      scope.emitError() << "the module targets '" << triple.getValue()
                        << "', but this lowering emits code for '"
                        << target.getTriple() << "'";
      ok = false;
    }
  });
  return success(ok);
}

LogicalResult
mlir::triton_dist::checkOneSidedSupport(Operation *root,
                                        const TargetInfoBase &target) {
  bool supported = !target.getOneSidedLibrary().empty();
  bool ok = true;
  root->walk([&](Operation *op) {
    if (!isa<PutSignalOp, GetOp, SignalWaitOp>(op))
      return;
    if (supported) {
      if (failed(target.declareOneSidedFunction(op)))
        ok = false;
      return;
    }
    op->emitOpError() << "has no lowering for '" << target.getTriple()
                      << "': the one-sided inter-node ops lower to NVSHMEM "
                         "device calls, on NVIDIA targets only (a rocSHMEM "
                         "lowering is not implemented; docs/design.md)";
    ok = false;
  });
  return success(ok);
}

LogicalResult
mlir::triton_dist::lowerDistributedToLLVM(ModuleOp module,
                                          const TargetInfoBase &target,
                                          const LoweringOptions &options) {
  MLIRContext *context = module.getContext();
  if (failed(checkTargetAttributes(module, target)) ||
      failed(checkLowerable(module)) ||
      failed(checkOneSidedSupport(module, target)))
    return failure();

  // `llvm.mlir.addressof` resolves in the nearest symbol table: each module
  // (nested ones included) that holds a reader gets its own declaration.
  // A watched wait reads the context (its rank) and writes the record.
  // A wait watched with the runtime's timeout reads the watchdog's settings
  // instead of writing the module's record.
  llvm::SetVector<Operation *> contextScopes, recordScopes, watchdogScopes;
  module.walk([&](Operation *op) {
    auto wait = dyn_cast<WaitOp>(op);
    bool runtimeWatched =
        wait && !wait.getTimeoutNs() && options.waitTimeoutFromRuntime;
    bool watched = wait && !runtimeWatched &&
                   wait.getTimeoutNs().value_or(options.waitTimeoutNs) != 0;
    if (!readsContext(op) && !watched && !runtimeWatched)
      return;
    // An unregistered op on the way up might be a symbol table: MLIR then
    // gives none, and the enclosing module is the best guess.
    Operation *scope = SymbolTable::getNearestSymbolTable(op);
    if (!scope)
      scope = op->getParentOfType<ModuleOp>();
    contextScopes.insert(scope);
    if (watched)
      recordScopes.insert(scope);
    if (runtimeWatched)
      watchdogScopes.insert(scope);
  });
  for (Operation *scope : contextScopes)
    if (failed(getOrInsertContextGlobal(scope)))
      return failure();
  for (Operation *scope : recordScopes)
    if (failed(getOrInsertWaitTimeoutGlobal(scope)))
      return failure();
  for (Operation *scope : watchdogScopes)
    if (failed(getOrInsertWaitWatchdogGlobal(scope)))
      return failure();

  LLVMTypeConverter llvmConverter(context);
  populateDistributedTypeConversion(llvmConverter);
  TokenTypeConverter tokenConverter;

  ConversionTarget conversionTarget(*context);
  conversionTarget.addIllegalDialect<TritonDistributedDialect>();
  conversionTarget.addLegalDialect<LLVM::LLVMDialect>();
  target.addLegalDialects(conversionTarget);
  conversionTarget.markUnknownOpDynamicallyLegal([&](Operation *op) {
    if (auto function = dyn_cast<FunctionOpInterface>(op))
      return tokenConverter.isLegal(function.getArgumentTypes()) &&
             tokenConverter.isLegal(function.getResultTypes());
    return tokenConverter.isLegal(op);
  });

  RewritePatternSet patterns(context);
  populateDistributedToLLVMPatterns(llvmConverter, patterns, target, options);
  populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(
      patterns, tokenConverter);
  populateCallOpTypeConversionPattern(patterns, tokenConverter);
  populateReturnOpTypeConversionPattern(patterns, tokenConverter);
  cf::populateCFStructuralTypeConversions(tokenConverter, patterns);
  scf::populateSCFStructuralTypeConversions(tokenConverter, patterns);

  return applyPartialConversion(module, conversionTarget, std::move(patterns));
}
