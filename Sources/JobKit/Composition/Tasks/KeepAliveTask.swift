/// A task that finishes when told: tracked by a job, it keeps the job running (a job finishes
/// once its tasks did) until ``release()``, so that tasks the job tracks later, from outside its
/// `main()` (a server's requests, a worker's claimed rows), run in it and share its limits.
///
/// ```swift
/// final class ServingJob: JobController {
///   let keepAlive = KeepAliveTask()
///   override func main() { trackAndQueue(keepAlive) }
/// }
/// // … job.trackAndQueue(request) for each request while it serves …
/// job.keepAlive.release()   // the job finishes once the tasks it tracked did
/// ```
///
/// - ``release()`` finishes the task, before or after it started; later calls do nothing.
/// - `cancel()` ends it cancelled at once. Released or cancelled, it holds no thread meanwhile.
public final class KeepAliveTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `keepAliveState` is a locked box.
  private struct State {
    var started = false
    var released = false
    /// `operationDone` was called (once).
    var done = false
  }

  private let keepAliveState = LockedBox(State())

  /// A task that runs until ``release()`` or `cancel()`.
  public override init() {
    super.init()
  }

  /// Whether ``release()`` was called.
  public var isReleased: Bool {
    keepAliveState.withLock { $0.released }
  }

  /// Lets the task finish: at once if it runs, as soon as it starts otherwise.
  public func release() {
    let finish = keepAliveState.withLock { state -> Bool in
      state.released = true
      guard state.started, !state.done else { return false }
      state.done = true
      return true
    }
    if finish { operationDone() }
  }

  /// Starts waiting for ``release()``; finishes at once if it came before.
  public override func operationStart() {
    let finish = keepAliveState.withLock { state -> Bool in
      state.started = true
      guard state.released, !state.done else { return false }
      state.done = true
      return true
    }
    if finish { operationDone() }
  }

  /// Ends the wait: the task finishes cancelled.
  public override func operationCancelled() {
    let finish = keepAliveState.withLock { state -> Bool in
      guard !state.done else { return false }
      state.done = true
      return true
    }
    if finish { operationDone() }
  }
}
