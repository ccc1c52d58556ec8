import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A job whose `main()` is a closure, for tests that track `Work` from it.
final class ClosureJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `body` is immutable.
  let body: @Sendable (JobController) -> Void

  init(_ body: @escaping @Sendable (JobController) -> Void) {
    self.body = body
    super.init()
  }

  override func main() { body(self) }
}

/// A `Work` subclass with the same output as `Work<Int>`, in a group of its own.
final class Doubling: Work<Int>, @unchecked Sendable {}

@Suite("Work", .timeLimit(.minutes(1)))
struct WorkTests {
  enum Kind: String, CaseIterable, Sendable {
    case sync, async, callback

    func make(_ outcome: Result<Int, TestError>) -> Work<Int> {
      switch self {
      case .sync: return Work { try outcome.get() }
      case .async: return Work(async: { try outcome.get() })
      case .callback:
        return Work(callback: { complete in
          DispatchQueue.global().async { complete(outcome.mapError { $0 }) }
        })
      }
    }
  }

  @Test(arguments: Kind.allCases)
  func successSetsResultAndOutput(kind: Kind) async throws {
    let work = kind.make(.success(42))
    #expect(work.result == nil && work.output == nil)
    #expect(try await work.run() == 42)
    #expect(work.output == 42 && work.error == nil && !work.isCancelled)
  }

  @Test(arguments: Kind.allCases)
  func failureFinishesWithTheError(kind: Kind) async {
    let work = kind.make(.failure(TestError(7)))
    await #expect(throws: TestError(7)) { try await work.run() }
    #expect(work.error as? TestError == TestError(7))
    guard case .failure(let error) = work.result else {
      Issue.record("expected a failure, got \(String(describing: work.result))")
      return
    }
    #expect(error as? TestError == TestError(7) && work.output == nil)
  }

  @Test(arguments: Kind.allCases)
  func cancelledBeforeStartNeverRunsTheBody(kind: Kind) async {
    let ran = Locked(false)
    let work: Work<Int>
    switch kind {
    case .sync:
      work = Work {
        ran.mutate { $0 = true }
        return 1
      }
    case .async:
      work = Work(async: {
        ran.mutate { $0 = true }
        return 1
      })
    case .callback:
      work = Work(callback: { complete in
        ran.mutate { $0 = true }
        complete(.success(1))
      })
    }
    work.cancel()
    await #expect(throws: CancellationError.self) { try await work.run() }
    guard case .failure(let error) = work.result else {
      Issue.record("expected a failure, got \(String(describing: work.result))")
      return
    }
    #expect(error is CancellationError && !ran.value && work.error == nil)
  }

  @Test func cancelWhileAnAsyncBodyRunsCancelsItsTask() async {
    let started = Latch()
    let sawCancel = Locked(false)
    let work = Work<Int>(async: {
      started.open()
      do {
        try await suspendUntilCancelled()
      } catch {
        sawCancel.mutate { $0 = Task.isCancelled }
        throw error
      }
      return 1
    })
    let running = Task { try await work.run() }
    #expect(await started.waitOpen())
    work.cancel()
    await #expect(throws: CancellationError.self) { try await running.value }
    #expect(sawCancel.value && work.isCancelled && work.error == nil)
  }

  @Test func aSecondCompleteIsIgnoredAndReported() async throws {
    // run() can return as soon as the first complete finished the work: wait for the second.
    let secondReturned = Latch()
    let work = Work<Int>(callback: { complete in
      complete(.success(1))
      complete(.success(2))
      secondReturned.open()
    })
    QuietMisuse.silence(work)
    #expect(try await work.run() == 1)
    #expect(await secondReturned.waitOpen())
    #expect(work.misuses == [JobKitError(.completedTwice)])
    #expect(work.output == 1)
  }

  @Test func trackAndQueueResultOfHandsTheCompletionTheResult() async throws {
    let results = Locked<[String]>([])
    let job = ClosureJob { job in
      job.trackAndQueue(resultOf: Work { "listing" }) { result in
        results.mutate { $0.append((try? result.get()) ?? "failed") }
      }
      job.trackAndQueue(resultOf: Work<String> { throw TestError(1) }) { result in
        if case .failure(let error) = result, error as? TestError == TestError(1) {
          results.mutate { $0.append("error 1") }
        }
      }
    }
    try await job.run()
    #expect(results.value.sorted() == ["error 1", "listing"])
  }

  /// `Work<Int>`, `Work<String>` and the empty subclass `Doubling` are three groups: the
  /// `Work<Int>` and `Work<String>` handlers fire while a `Doubling` still runs (the second of
  /// them releases it).
  @Test func eachSpecialisationAndEmptySubclassIsItsOwnGroup() async throws {
    let log = EventLog()
    let release = Latch()
    let groupsDone = Locked(0)
    let groupDone: @Sendable () -> Void = {
      let done = groupsDone.mutate { count in
        count += 1
        return count
      }
      if done == 2 { release.open() }
    }
    let job = ClosureJob { job in
      job.setCompletion(forGroup: Work<Int>.self) {
        log.record("Work<Int>")
        groupDone()
      }
      job.setCompletion(forGroup: Work<String>.self) {
        log.record("Work<String>")
        groupDone()
      }
      job.setCompletion(forGroup: Doubling.self) { log.record("Doubling") }
      job.trackAndQueue(
        Doubling(callback: { complete in
          // Completes once both Work groups finished, waiting on a thread of its own (see `onThread`).
          Thread {
            _ = release.wait()
            complete(.success(2))
          }.start()
        }))
      job.trackAndQueue(Work { 1 })
      job.trackAndQueue(Work { 2 })
      job.trackAndQueue(Work { "s" })
    }
    try await job.run()
    #expect(log.all.filter { $0 == "Work<Int>" }.count == 1)
    #expect(log.all.filter { $0 == "Work<String>" }.count == 1)
    #expect(log.all.last == "Doubling")
  }

  /// A limit set for `Work<Int>` runs those one at a time; `Work<String>` is not limited: its two
  /// tasks wait for each other, which only works when both run at once. (They wait on threads of
  /// their own, not on the queue's worker threads; see `onThread`.)
  @Test func limitsApplyPerSpecialisation() async throws {
    let log = EventLog()
    let bothStrings = Locked(0)
    let bothStarted = Latch()
    let job = ClosureJob { job in
      job.setMaxConcurrentTasks(1, forGroup: Work<Int>.self)
      for index in 0..<3 {
        job.trackAndQueue(
          Work<Int>(callback: { complete in
            log.record("start \(index)")
            DispatchQueue.global().async {
              log.record("end \(index)")
              complete(.success(index))
            }
          }))
      }
      for _ in 0..<2 {
        job.trackAndQueue(
          Work<String>(callback: { complete in
            let started = bothStrings.mutate { count -> Int in
              count += 1
              return count
            }
            if started == 2 { bothStarted.open() }
            Thread {
              complete(bothStarted.wait() ? .success("ok") : .failure(TestError(2)))
            }.start()
          }))
      }
    }
    try await job.run()
    #expect(log.all == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"])
    #expect(job.failures.isEmpty)
  }

  /// The value comes back as the body returned it, whatever `Output` is: an existential (its box
  /// holds the dynamic type), an optional that is `nil`, a value too large for a box's inline
  /// buffer, a class instance; through the job's completion and through `run()`.
  @Test func everyKindOfOutputComesBackAsReturned() async throws {
    struct Large: Sendable, Equatable { var a = 1, b = 2, c = 3, d = 4, e = 5 }
    final class Reference: Sendable {}
    let reference = Reference()
    let seen = Locked<[String]>([])
    let job = ClosureJob { job in
      job.trackAndQueue(resultOf: Work<any Sendable> { 5 }) { result in
        if case .success(let value) = result, value as? Int == 5 { seen.mutate { $0.append("existential") } }
      }
      job.trackAndQueue(resultOf: Work<Int?> { nil }) { result in
        if case .success(let value) = result, value == nil { seen.mutate { $0.append("nil") } }
      }
      job.trackAndQueue(resultOf: Work { Large() }) { result in
        if case .success(let value) = result, value == Large() { seen.mutate { $0.append("large") } }
      }
      job.trackAndQueue(resultOf: Work { reference }) { result in
        if case .success(let value) = result, value === reference { seen.mutate { $0.append("reference") } }
      }
    }
    try await job.run()
    #expect(seen.value.sorted() == ["existential", "large", "nil", "reference"])
    #expect(try await Work<any Sendable> { "text" }.run() as? String == "text")
    #expect(try await Work<Large?> { Large() }.run() == Large())
  }

  /// `Work` and `BlockTask` keep Foundation's `isReady` and `isCancelled`, so a job that starts
  /// them itself reads neither (Foundation's lock); a subclass of `Work` may override them.
  @Test func onlyJobKitsOwnClassesAreStartedWithoutFoundationsAnswers() {
    #expect(Work { 1 }.inheritsFoundationsAnswers)
    #expect(BlockTask {}.inheritsFoundationsAnswers)
    #expect(!Doubling { 1 }.inheritsFoundationsAnswers)
    #expect(!ConcurrentOperation().inheritsFoundationsAnswers)
  }

  /// A `Work` subclass that overrides `isReady` is not started by its job until it says it is
  /// ready: it goes to the job's queue, which starts it once it posts the change.
  @Test func aSubclassThatIsNotReadyWaitsForItsReadiness() async throws {
    final class Gated: Work<Int>, @unchecked Sendable {
      let gate = ReadinessGate()
      override var isReady: Bool { gate.isOpen && super.isReady }
    }
    let ran = Locked<[String]>([])
    let gated = Gated {
      ran.mutate { $0.append("gated") }
      return 1
    }
    let other = Work {
      ran.mutate { $0.append("other") }
      return 2
    }
    let otherDone = Latch()
    let job = ClosureJob { job in
      job.trackAndQueue(gated)
      job.trackAndQueue(resultOf: other) { _ in otherDone.open() }
    }
    job.startJob()
    #expect(await otherDone.waitOpen())
    #expect(ran.value == ["other"])
    gated.gate.open(gated)
    try await job.run()
    #expect(ran.value == ["other", "gated"])
    #expect(gated.output == 1)
  }
}
