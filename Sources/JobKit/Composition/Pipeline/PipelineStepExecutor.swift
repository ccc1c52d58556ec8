import Dispatch

/// A task executor that runs every job of a pipeline's Swift task on one `DispatchQueue`, so the
/// pipeline's steps (each piece between two suspension points) run on that queue.
///
/// The pipeline keeps its executor alive for as long as its task runs.
final class PipelineStepExecutor: Sendable {
  let queue: DispatchQueue

  init(queue: DispatchQueue) {
    self.queue = queue
  }
}

@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
extension PipelineStepExecutor: TaskExecutor {
  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    queue.async {
      job.runSynchronously(on: self.asUnownedTaskExecutor())
    }
  }
}
