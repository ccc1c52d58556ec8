import Foundation
import JobKit
import JobKitTesting

// The latch and the manual task come from JobKitTesting, the kit JobKit offers for users' tests;
// these names keep the suites short.
typealias Latch = JobKitTesting.Latch
typealias ManualTask = JobKitTesting.TestTask

/// A task that finishes as soon as it starts, optionally with an error.
final class InstantTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let label: String
  let failure: (any Error)?

  init(_ label: String = "", failure: (any Error)? = nil) {
    self.label = label
    self.failure = failure
    super.init()
  }

  override func operationStart() { operationDone(error: failure) }
}

/// A lock-protected value for tests.
final class Locked<Value>: @unchecked Sendable {
  // @unchecked Sendable: `stored` is only touched under `lock`.
  private let lock = NSLock()
  private var stored: Value
  init(_ value: Value) { stored = value }
  var value: Value {
    lock.lock()
    defer { lock.unlock() }
    return stored
  }
  func mutate<R>(_ body: (inout Value) -> R) -> R {
    lock.lock()
    defer { lock.unlock() }
    return body(&stored)
  }
}

/// What an operation that overrides `isReady` reads: closed until `open(_:)`, which posts the
/// operation's `isReady` change around it, as Foundation requires.
final class ReadinessGate: Sendable {
  private let isOpenNow = Locked(false)
  var isOpen: Bool { isOpenNow.value }
  func open(_ operation: Operation) {
    operation.willChangeValue(forKey: "isReady")
    isOpenNow.mutate { $0 = true }
    operation.didChangeValue(forKey: "isReady")
  }
}

/// Records strings in order from any thread.
final class EventLog: @unchecked Sendable {
  // @unchecked Sendable: wraps a `Locked`.
  private let events = Locked<[String]>([])
  func record(_ event: String) { events.mutate { $0.append(event) } }
  var all: [String] { events.value }
}

struct TestError: Error, Equatable {
  let id: Int
  init(_ id: Int = 0) { self.id = id }
}

extension Operation {
  /// Waits (with a timeout) for the operation to finish; returns `false` on timeout.
  ///
  /// `waitUntilFinished()` runs on a thread of its own (not a pool thread, which a blocked wait
  /// would take from the tasks under test). It does not use a dependency: on corelibs Foundation,
  /// `addDependency` racing with the dependency's finish can leave the dependent ready but never
  /// scheduled (see the DocC article RoutingAndThreads).
  func finishes(within seconds: Double = 30) -> Bool {
    let latch = Latch()
    let waiter = Thread { [self] in
      waitUntilFinished()
      latch.open()
    }
    waiter.start()
    return latch.wait(timeout: seconds)
  }
}

/// Tests that misuse operations on purpose silence the reports about those operations only, so
/// the expected reports do not flood the test log while a misuse of any other operation still
/// reaches the standard handler. Each report is still recorded in the operation's `misuses`,
/// which the tests check.
enum QuietMisuse {
  static func silence(_ operations: Operation...) {
    silence(operations)
  }

  static func silence(_ operations: some Sequence<Operation>) {
    for operation in operations {
      JobKitDiagnostics.setMisuseHandler({ _, _ in }, for: operation)
    }
  }
}

/// Polls `condition` every millisecond until it holds (returns `true`) or `timeout` passed
/// (returns `false`): for effects that land a moment after the event a test awaited, such as a
/// `completionBlock` Foundation runs on a global queue after an operation finished. Waits as
/// long as the latches do (30 s): a whole test process can stall for 15 s and more on 2 shared
/// cores (seen in CI: trivial synchronous tests "passed after 15 s"), and a hang still fails.
func eventually(within timeout: Duration = .seconds(30), _ condition: @Sendable () -> Bool) async -> Bool {
  let deadline = ContinuousClock.now + timeout
  while !condition() {
    if ContinuousClock.now >= deadline { return false }
    try? await Task.sleep(for: .milliseconds(1))
  }
  return true
}

/// Runs `body(0..<iterations)` at once, each on a thread of its own, and suspends until all
/// returned. With `barrier`, the bodies wait (up to 30 s) until every thread was started.
///
/// Not `DispatchQueue.concurrentPerform`: on Linux its iterations run on libdispatch's global
/// worker threads, the same few threads (about two per core) that run Swift concurrency's jobs,
/// OperationQueue operations and `DispatchQueue.global()` blocks. A stress test's burst there
/// starves every concurrently running test of threads (under ThreadSanitizer for tens of seconds).
func concurrently(_ iterations: Int, barrier: Bool = false, _ body: @escaping @Sendable (Int) -> Void) async {
  let go = Latch()
  await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
    let remaining = Locked(iterations)
    for index in 0..<iterations {
      Thread {
        if barrier { _ = go.wait(timeout: 30) }
        body(index)
        if remaining.mutate({ count -> Int in
          count -= 1
          return count
        }) == 0 {
          continuation.resume()
        }
      }.start()
    }
    go.open()
    if iterations <= 0 { continuation.resume() }
  }
}

/// How many levels the deep-nesting tests nest: `JOBKIT_DEEP_LEVELS` if set (CI runs them alone
/// with 100,000, issue 23's target), else 20,000, which keeps the parallel `swift test` light on
/// this 2-core machine. Either is far past the ~4,000 levels that crashed a debug build when
/// finishing recursed per level.
let deepNestingLevels = ProcessInfo.processInfo.environment["JOBKIT_DEEP_LEVELS"].flatMap(Int.init) ?? 20_000
