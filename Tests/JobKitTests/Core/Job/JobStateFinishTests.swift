import Foundation
import Testing

@testable import JobKit

/// Issue 20: a job's finish says whether a cancel stopped it (a group calls its `onCancelled`
/// handler then), not a fail, not a normal end; its `finished` event carries a cancel's reason
/// (none for a plain cancel) or the fail's error, while the finish's own error (the job's
/// `error`) stays `nil` after any cancel. Fed one by one on one thread.
@Suite("JobState: how the job finished")
struct JobStateFinishTests {
  /// `stop`: how the job stopped; `event`: the `TestError` id its `finished` event carries.
  @Test(arguments: [("cancel", nil), ("reason", 4), ("fail", 1), ("none", nil)] as [(String, Int?)])
  func theFinishSaysWhetherACancelStoppedTheJobAndItsEventWhy(stop: String, event: Int?) {
    var state = JobState()
    let (_, continuation) = AsyncStream.makeStream(of: JobEvent.self)
    _ = state.addListener(continuation)
    _ = state.beginMain(on: 1)
    state.mainReturned()
    switch stop {
    case "cancel": _ = state.stop(.cancelled(reason: nil))
    case "reason": _ = state.stop(.cancelled(reason: TestError(4)))
    case "fail": _ = state.stop(.failed(TestError(1)))
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
    #expect(finish.cancelled == (stop == "cancel" || stop == "reason"))
    #expect((finish.error as? TestError) == (stop == "fail" ? TestError(1) : nil))
    #expect((finish.error == nil) == (stop != "fail"))
    var finished: [Int?] = []
    for pending in state.outbox.takeNested().events {
      if case .finished(let error, _) = pending.stamped(.now) {
        finished.append(error.map { ($0 as? TestError)?.id ?? -1 })
      }
    }
    #expect(finished == [event])
  }
}
