extension GroupState {
  /// The group's cancellation handler (`GroupJob.onCancelled`): set any number of times until
  /// the group finishes, then taken out once.
  enum CancellationHandler {
    case unset
    case set(@Sendable () -> Void)
    /// The group finished: the handler was taken out, and one set later is not kept.
    case spent
  }

  /// The handler set now, if the group has not finished.
  var currentCancellationHandler: (@Sendable () -> Void)? {
    if case .set(let handler) = cancellationHandler { return handler }
    return nil
  }

  /// `onCancelled` was set to `handler`. Returns the handler to release after the lock: the one
  /// it replaced, or `handler` itself if the group finished (it would never be called).
  mutating func setCancellationHandler(_ handler: (@Sendable () -> Void)?) -> (@Sendable () -> Void)? {
    if case .spent = cancellationHandler { return handler }
    let replaced = currentCancellationHandler
    cancellationHandler = handler.map { .set($0) } ?? .unset
    return replaced
  }

  /// The job is about to finish: takes the handler out, for the caller to call (if a cancel
  /// stopped the group) and release after the lock. Later calls return `nil`.
  mutating func takeCancellationHandler() -> (@Sendable () -> Void)? {
    let handler = currentCancellationHandler
    cancellationHandler = .spent
    return handler
  }
}
