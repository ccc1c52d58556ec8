import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A limit on a group the job never tracked is reported as `limitNeverUsed` when the job
/// finishes, unless the job was stopped: then the limit was no mistake, the job stopped first.
@Suite("limitNeverUsed")
struct LimitNeverUsedTests {
  enum Stop: String, CaseIterable, CustomTestStringConvertible {
    case cancelBeforeStart, cancelInMain, failInMain, cancelByParent
    var testDescription: String { rawValue }
  }

  @Test(arguments: Stop.allCases)
  func aJobStoppedBeforeItTrackedALimitedGroupReportsNothing(stop: Stop) async throws {
    let job = ScriptedJob { job in
      switch stop {
      case .cancelInMain: job.cancel()
      case .failInMain: job.fail(TestError(1))
      case .cancelBeforeStart, .cancelByParent: break
      }
    }
    QuietMisuse.silence(job)
    job.setMaxConcurrentTasks(2, forGroup: InstantTask.self)
    switch stop {
    case .cancelBeforeStart:
      job.cancel()
      try? await job.run()
    case .cancelByParent:
      let parent = ConcurrentGroup([job])
      parent.cancel()
      try? await parent.run()
    case .cancelInMain, .failInMain:
      try? await job.run()
    }
    #expect(job.isFinished)
    #expect(!job.misuses.contains { $0.code == .limitNeverUsed })
  }

  enum GroupStop: String, CaseIterable, CustomTestStringConvertible {
    case cancelBeforeStart, cancelWhileRunning, taskCancelsItself, timeLimit
    var testDescription: String { rawValue }
  }

  @Test(arguments: GroupStop.allCases)
  func aGroupStoppedBeforeItTrackedALimitedGroupReportsNothing(stop: GroupStop) async throws {
    let running = ManualTask("running")
    let group = ConcurrentGroup([running])
    QuietMisuse.silence(group)
    group.propagatesTaskCancellation = true
    group.setMaxConcurrentTasks(2, forGroup: InstantTask.self)
    let clock = ManualClock()
    if stop == .timeLimit {
      group.clock = clock
      group.timeLimit = .seconds(1)
    }
    if stop == .cancelBeforeStart { group.cancel() }
    group.startJob()
    if stop != .cancelBeforeStart {
      #expect(await running.startedLatch.waitOpen())
    }
    switch stop {
    case .cancelBeforeStart: break
    case .cancelWhileRunning: group.cancel()
    case .taskCancelsItself: running.cancel()
    case .timeLimit:
      #expect(await clock.waitForScheduled(1))
      clock.advance(by: .seconds(1))
    }
    try? await group.run()
    #expect(group.isFinished)
    #expect(!group.misuses.contains { $0.code == .limitNeverUsed })
  }

  @Test func aJobThatRanToItsEndReportsItsUnusedLimit() async throws {
    let job = ScriptedJob { job in job.trackAndQueue(BlockOperation {}) }
    QuietMisuse.silence(job)
    job.setMaxConcurrentTasks(2, forGroup: InstantTask.self)
    try await job.run()
    #expect(job.misuses.map(\.code) == [.limitNeverUsed])
  }
}
