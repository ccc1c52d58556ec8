import Foundation
import Testing

@testable import JobKit

/// `LockedBox`: a thread that finds the mutex taken waits for it (a `contended` box's first spins,
/// with glibc, then sleeps); either way it gets the value to itself.
@Suite("LockedBox")
struct LockedBoxTests {
  /// Threads (more than this machine's cores) incrementing one counter under the lock, with
  /// sections long enough that they contend: none of the increments is lost, whether a waiter
  /// got the lock while spinning or after sleeping on it.
  @Test(arguments: [false, true])
  func contendingThreadsLoseNoUpdate(contended: Bool) {
    let threads = 6
    let rounds = 20_000
    let box = LockedBox((count: 0, inside: 0, overlaps: 0, work: 0), contended: contended)
    let done = DispatchGroup()
    for _ in 0..<threads {
      done.enter()
      Thread {
        for _ in 0..<rounds {
          box.withLock { state in
            state.inside += 1
            if state.inside != 1 { state.overlaps += 1 }
            // A section of a few hundred instructions, as JobKit's are.
            for step in 0..<64 { state.work = state.work &* 31 &+ step }
            state.count += 1
            state.inside -= 1
          }
        }
        done.leave()
      }.start()
    }
    #expect(done.wait(timeout: .now() + 60) == .success)
    let (count, _, overlaps, _) = box.withLock { $0 }
    #expect(count == threads * rounds)
    #expect(overlaps == 0)
  }

  /// A thread that cannot get the lock within its spins sleeps on it and gets it once the holder
  /// lets go: the holder waits until the other thread is about to lock, then holds on.
  @Test(arguments: [false, true])
  func aWaiterThatOutlastsItsSpinsGetsTheLockOnceItIsFree(contended: Bool) {
    let box = LockedBox(0, contended: contended)
    let holding = DispatchSemaphore(value: 0)
    let aboutToLock = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    Thread {
      box.withLock { value in
        holding.signal()
        // A contended box's waiter spins for microseconds at most, then sleeps: yielding
        // lets it get that far; its wait ends only when this thread lets go.
        _ = aboutToLock.wait(timeout: .now() + 30)
        for _ in 0..<1_000 { sched_yield() }
        value = 1
      }
    }.start()
    #expect(holding.wait(timeout: .now() + 30) == .success)
    Thread {
      aboutToLock.signal()
      box.withLock { value in value = value == 1 ? 2 : -1 }
      done.signal()
    }.start()
    #expect(done.wait(timeout: .now() + 30) == .success)
    #expect(box.withLock { $0 } == 2)
  }

  #if canImport(Glibc)
    /// A job's lock is the contended kind (adaptive with glibc); other boxes keep the plain
    /// mutex, whose unlock is cheaper.
    @Test func aJobsLockSpinsBeforeItSleepsAndOtherLocksDoNot() {
      #expect(JobController().jobState.isAdaptive)
      #expect(!LockedBox(0).isAdaptive)
      #expect(LockedBox(0, contended: true).isAdaptive)
    }
  #endif
}
