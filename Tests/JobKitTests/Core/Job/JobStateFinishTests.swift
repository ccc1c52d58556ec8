import Foundation
import Testing

@testable import JobKit

/// Issue 20: a job's finish says whether a cancel stopped it (a group calls its `onCancelled`
/// handler then), not a fail, not a normal end. Fed one by one on one thread.
@Suite("JobState: how the job finished")
struct JobStateFinishTests {
  @Test(arguments: ["cancel", "fail", "none"])
  func theFinishSaysWhetherACancelStoppedTheJob(stop: String) {
    var state = JobState()
    _ = state.beginMain(on: 1)
    state.mainReturned()
    switch stop {
    case "cancel": _ = state.stop(JobState.Stop.cancelled)
    case "fail": _ = state.stop(JobState.Stop.failed(TestError(1)))
    default: break
    }
    var step = state.nextStep()
    if case .allTasksFinished = step, let next = state.allTasksFinishedReturned() {
      step = .finish(next)
    }
    guard case .finish(let finish) = step else {
      Issue.record("no finish: \(step)")
      return
    }
    #expect(finish.cancelled == (stop == "cancel"))
    #expect((finish.error == nil) == (stop != "fail"))
  }
}
